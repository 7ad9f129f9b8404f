"""Unit and lock names: what systemd accepts, decided here and nowhere else.

systemd.unit(5): a unit name is at most 255 characters of ``[A-Za-z0-9:_.\\-]`` (plus one
``@`` for templates) followed by the type suffix. jobgen uses the job's name as the
unit name stem, unchanged, so ``systemctl status NAME`` works without a lookup table:
names systemd would need ``systemd-escape`` for are refused with the reason instead of
being mangled into something the operator never wrote.
"""

from __future__ import annotations

import re

UNIT_NAME_MAX = 255  # systemd's UNIT_NAME_MAX, including the suffix
# The longest suffix jobgen appends: "@.service" for worker templates.
_LONGEST_SUFFIX = len("@.service")
JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
# A unit another unit points at (OnFailure=, OnSuccess=). The instance may use the
# specifiers for "this unit" (systemd.unit(5)): alert@%n.service is the common idiom.
UNIT_REF = re.compile(r"[A-Za-z0-9_.:\\-]+(@([A-Za-z0-9_.:\\-]|%[nNpPiI])*)?\.(service|target|socket|timer|path|mount)")
LOCK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]*")
CLUSTER_LOCK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@/-]*")
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]*\$?|[0-9]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNIT_SUFFIXES = (".service", ".timer", ".target", ".socket", ".path", ".mount")

# Host lock files and overrun stamps. Under /run (root-only, 0755), not /run/lock: /run/lock is
# world-writable (1777), so before the first `systemd-tmpfiles --create` any local user could
# make /run/lock/jobgen/ and JOB.lock and hold flock(2) on it, and every run of the job would
# be skipped (exit 75, logged as success). Nobody but root can create anything in /run.
LOCK_DIR = "/run/jobgen"


def job_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a unit name stem, or None. The caller shows the name."""
    if not name:
        return "a name cannot be empty"
    if not JOB_NAME.fullmatch(name):
        bad = next((c for c in name if not re.fullmatch(r"[A-Za-z0-9_.:-]", c)), name[0])
        shown = "a space" if bad == " " else f"'{bad}'" if bad.isprintable() else f"U+{ord(bad):04X}"
        first = " at the start" if bad == name[0] and re.fullmatch(r"[.:-]", bad) else ""
        return (
            f"not a valid unit name: {shown}{first} is not allowed; use letters, digits and '_.:-', "
            "starting with a letter, digit or '_' (systemd.unit(5))"
        )
    if name.endswith(_UNIT_SUFFIXES):
        stem, _, suffix = name.rpartition(".")
        return f"ends with the unit type '.{suffix}'; jobgen adds the suffix itself, so name it '{stem}'"
    limit = UNIT_NAME_MAX - _LONGEST_SUFFIX
    if len(name) > limit:
        return f"the name has {len(name)} characters; a unit name stem may have at most {limit} (systemd.unit(5))"
    return None


def lock_file(name: str) -> str:
    return f"{LOCK_DIR}/{name}.lock"


def stamp_file(job: str) -> str:
    """Where the end time of the job's last run is kept (the overrun emulation's stamp)."""
    return f"{LOCK_DIR}/{job}.ended"


# A lock path reaches flock(1)'s argv in a unit file and the path field of a tmpfiles.d line:
# both are escaped (escape.py), but a path the two would read differently is refused.
_PATH_RULES = (
    (lambda p: not p.startswith("/"), "must be an absolute path"),
    (lambda p: "%" in p, "must not contain '%': systemd-tmpfiles would expand it as a specifier (tmpfiles.d(5)) and flock(1) would not, so the job would lock another file than the one created; write the path literally"),
    (lambda p: any(ord(c) < 0x20 or c == "\x7f" for c in p), "must not contain control characters"),
    (lambda p: any(c in ("", ".", "..") for c in p.split("/")[1:]), "must be normalized: no '.' or '..' component, no '//' and no trailing '/' (tmpfiles.d(5) refuses them)"),
)


def lock_path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a host lock file, or None. The caller shows the path."""
    for broken, why in _PATH_RULES:
        if broken(path):
            return why
    return None
