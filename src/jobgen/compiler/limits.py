"""Every limit jobgen puts on a manifest, in one table (README "Limits" lists the same).

A manifest is input a reviewer may not have read closely: a generated file, a merge of
many teams' jobs, or text written to break the tool. Each limit below is checked up
front, before the work it bounds, so any input ends in at most a few seconds with
bounded memory and, when it is too big, with exit 2 and a position, never a traceback
or a unit systemd cannot read. No real manifest comes near any of them.

Where a limit comes from the host, the comment names the source.
"""

from __future__ import annotations

import os
from pathlib import PurePath

# --------------------------------------------------------------------------- reading YAML
# PyYAML reads about 0.5 MB/s on a small loaded machine; 1 MiB is some 8,000 jobs.
MANIFEST_BYTES = 1024 * 1024


def read_manifest(path: str) -> bytes:
    """A manifest's bytes, at most one past MANIFEST_BYTES: that tells "too large"
    without reading all of it (a path such as /dev/zero ends too). Raises OSError.

    Opened with O_NONBLOCK, then read blocking: a FIFO nobody writes reads as empty (the
    compiler says so) instead of hanging every command, and the generator at boot, in
    open(2); a pipe (`jobgen check <(make-manifest)`) is still read to its end."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= MANIFEST_BYTES and (chunk := os.read(fd, MANIFEST_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)

# PyYAML's composer recurses once per level (a few hundred levels raise RecursionError);
# a manifest needs 5 (jobs > NAME > lock > name > value).
DEPTH = 32
# Nodes, counting every use of an alias: a few lines of nested aliases can stand for a
# billion ("billion laughs").
NODES = 100_000
# One value (a string between quotes, a plain scalar, a key).
VALUE_BYTES = 64 * 1024
# All values together, counting every use of an alias: what the units can grow to.
TOTAL_VALUE_BYTES = 4 * 1024 * 1024

# Problems reported for one manifest: past this, validation stops and says so. Each
# problem costs a message and often a "did you mean" search.
PROBLEMS = 1000

# --------------------------------------------------------------------------- what reaches units
# systemd reads unit files line by line and refuses a line longer than LONG_LINE_MAX,
# 1 MiB (src/basic/fileio.h; "No buffer space available"). The longest line jobgen
# writes is ExecStart=: the lock wrapper plus the command, escaped (escape.py writes at
# most 4 bytes per byte, '\xNN', plus quotes and a space per argument). With these two
# limits the command's part is at most 4 x 64 KiB + 3 x 1024 bytes, and the wrapper's
# values are each at most VALUE_BYTES: well inside 1 MiB (tests/test_limits.py renders
# the worst case and has real systemd-analyze read it).
COMMAND_BYTES = 64 * 1024  # all arguments of one command together (UTF-8)
COMMAND_ARGS = 1024
# Worker instances: one Wants= line and one unit per instance.
INSTANCES = 1000
# Whole numbers systemd reads as an unsigned int (StartLimitBurst=, RestartSteps=).
UINT_MAX = 2**32 - 1

# --------------------------------------------------------------------------- names and paths
# One path component, in bytes (limits.h NAME_MAX; ext4, xfs, btrfs, tmpfs), and a whole
# path with its NUL (limits.h PATH_MAX).
NAME_MAX = 255
PATH_MAX = 4096
# systemd's UNIT_NAME_MAX (src/basic/unit-name.h) is 256 with the NUL: 255 characters.
UNIT_NAME_MAX = 255
# systemd's strict user and group name rule (src/basic/user-util.c valid_user_group_name:
# utmp's 32-byte ut_user with its NUL); numbers below (uid_t)-1, which means "no user".
USER_NAME_MAX = 31
UID_MAX = 2**32 - 2

# Every file name jobgen derives from a job's or worker's name, each one path component:
# the units (plan.py; overlap: queue adds NAME-drain.service and NAME-drain.path), the
# host lock file and overrun stamp in /run/jobgen (plan.py, names.lock_file), the
# queue's spool folder /var/lib/jobgen/queue/NAME; and the temporary sibling each unit is
# first written to, whose name (write.TMP_NAME_MAX) does not grow with the name.
UNIT_FILES = ("{}.service", "{}.timer", "{}@.service", "{}.target", "{}-drain.service", "{}-drain.path")
DERIVED_FILES = (*UNIT_FILES, "{}.lock", "{}.ended", "{}")
# The unit name of a worker's last instance, NAME@1000.service, is a unit name too.
_INSTANCE_UNIT = "{}@" + str(INSTANCES) + ".service"

# A job or worker name is ASCII (names.JOB_NAME), so characters are bytes. The temporary
# names (write.TMP_NAME_MAX) are far shorter than NAME_MAX and do not contain the name.
NAME = min(
    NAME_MAX - max(len(f.format("")) for f in DERIVED_FILES),
    UNIT_NAME_MAX - len(_INSTANCE_UNIT.format("")),
)


def name_for_units_named(unit_name: str) -> int:
    """NAME when an output layout writes each unit file under ``unit_name`` (a format,
    {} the unit's own file name; compiler/layout.py): debian's "PKG.{}" makes
    PKG.NAME-drain.service, longer by the prefix, and the other derived names stay."""
    longest = max(len(unit_name.format(f.format("")) if f in UNIT_FILES else f.format("")) for f in DERIVED_FILES)
    return min(NAME, NAME_MAX - longest)


# The manifest's file name becomes tmpfiles.d/jobgen-STEM.conf (tmpfiles_name), written
# through a temporary sibling like every file.
TMPFILES_CONF = "jobgen-{}.conf"
MANIFEST_STEM_BYTES = NAME_MAX - len(TMPFILES_CONF.format(""))


def tmpfiles_name(manifest_path: str) -> str:
    """The tmpfiles.d(5) snippet's file name for a manifest: jobgen-STEM.conf."""
    return TMPFILES_CONF.format(PurePath(manifest_path).stem)

