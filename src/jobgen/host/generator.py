"""jobgen as a systemd generator (systemd.generator(7)), the way Podman Quadlet turns
container files into units: manifests in /etc/jobgen/ and /usr/lib/jobgen/ become units
at every boot and every `systemctl daemon-reload`.

What systemd asks of a generator, and how jobgen answers:

- Write only into the output folders it is given. Everything goes into the *normal*
  folder (/run/systemd/generator): units there override vendor units in /usr/lib but not
  the administrator's, so a unit or drop-in in /etc/systemd/system still wins over a
  generated one, as with systemd-fstab-generator. The *early* folder would override /etc
  (nothing could correct a generated unit); the *late* folder ranks below /usr/lib, so a
  vendor unit of the same name would silently replace a job.
- `[Install]` is not applied to generated units: the `.wants/` links that
  `systemctl enable` would make are created here, read from each unit's own WantedBy=
  (timers -> timers.target.wants, workers -> multi-user.target.wants).
- Lock files: jobs lock files under names.LOCK_DIR, made by the tmpfiles.d(5) lines the
  compiler plans. A generator may not write into /etc/tmpfiles.d or /run/tmpfiles.d, so
  the lines go into the output folder (jobgen/tmpfiles.conf) and a generated oneshot,
  jobgen-locks.service, runs `systemd-tmpfiles --create` on them: at boot (linked into
  multi-user.target.wants) and before every run of a job (the job's service has Wants=
  and After= on it), so a job added by a daemon-reload finds its lock file on its first run.
- Each unit is the bytes `jobgen render` writes, then a second [Unit] section of the
  generator's own (_generator_section): SourcePath= the manifest, and for jobs the lock
  unit.
- One bad manifest never stops the others: its problems are returned with their
  positions and its files are left out; nothing here raises for a manifest. Where the
  problems go is cli/generator.py's choice; when nothing at all could take them (a
  container's first pass at boot) add_boot_report() leaves them in the output folder
  with a unit that prints them into the journal during the boot.
- Same manifests, same bytes: manifests in file-name order, files sorted, no time stamps.
- Never stall the boot. systemd runs every generator before it loads any unit and gives
  them all DEADLINE's 90 s together (below); a generator still running then is abandoned
  and the boot goes on without what it had not written. So each manifest's units are
  handed to `emit` (written) as soon as it compiles, the calendar search is bounded in
  steps (compiler/timespec.py search(): per expression and per manifest), and past its
  own `deadline` generate() stops and lists the manifests it did not reach in `left`.

Pure except for reading manifests and the running systemd's version (``discover``,
``running_systemd``) and ``write``; cli/generator.py prints and exits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from jobgen.compiler import header
from jobgen.compiler.diagnostics import ERROR, WARNING, Diagnostic, ManifestError, Pos
from jobgen.compiler.notify import MAIL_TEMPLATE
# Where manifests are read (re-exported: MANIFEST_DIRS, MANIFEST_DIRS_ENV, manifest_dirs).
from jobgen.host import genpersist, sources
from jobgen.host.sources import MANIFEST_DIRS, MANIFEST_DIRS_ENV, MANIFEST_SUFFIX, is_manifest_name, manifest_dirs  # noqa: F401

if TYPE_CHECKING:
    from jobgen.compiler.target import Target

LOCKS_UNIT = "jobgen-locks.service"
TMPFILES_CONF = "jobgen/tmpfiles.conf"  # not a unit name: systemd's loader ignores the folder
REPORT = "jobgen/report"
REPORT_UNIT = "jobgen-generator-report.service"
REPORT_IDENT = "jobgen-generator"  # the identifier the generator's own lines carry
CAT = "/bin/cat"  # coreutils; /bin is on every systemd distribution (a link on merged /usr)
HEADER = header.GENERATOR
# What it reads of the machine (re-exported): the running systemd, systemd-tmpfiles' path,
# the vendor unit folders (host/machine.py, standard library only, for the cache's key).
from jobgen.host.machine import (  # noqa: E402,F401
    INSTALLED_LIBS, PID1_MAPS, TMPFILES_BINARIES, VENDOR_UNIT_DIRS, running_systemd, tmpfiles_binary,
)
from jobgen.host.machine import vendor_unit as _vendor_unit  # noqa: E402

# systemd runs generators in parallel and waits DEFAULT_TIMEOUT_USEC for all of them: 90 s
# (252: src/basic/def.h; 257: src/basic/constants.h from meson's default-timeout-sec=90;
# manager_run_generators() -> execute_directories() in src/core/manager.c of both). Past
# it, its executor dies by the alarm() it set (src/shared/exec-util.c) and units load
# without what the generators had not written. jobgen keeps to a third of that, leaving
# the rest to the other generators and to a slow, loaded boot.
SYSTEMD_GENERATOR_TIMEOUT_SEC = 90
DEADLINE_SEC = 30.0
# Tests (and an administrator who must) set another deadline, in seconds.
DEADLINE_ENV = "JOBGEN_GENERATOR_DEADLINE"


class DeadlineReached(BaseException):
    """Raised into a manifest's compilation when the generator's deadline passes (a
    BaseException: generate()'s net for compiler bugs must not catch it)."""


def discover(dirs: tuple[str, ...]) -> list[Path]:
    """The manifests to generate from, in file-name order (host/sources.py discover)."""
    return [Path(p) for p in sources.discover(dirs)]


# Plain classes and a named tuple, not dataclasses: a dataclass executes its generated
# methods when it is defined, at every boot and daemon-reload.
class Outcome:
    """What one generator run produces: files (path relative to the normal folder ->
    bytes), .wants links (link -> target) and the problems of every manifest."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.links: dict[str, str] = {}
        self.diagnostics: list[Diagnostic] = []
        self.skipped: list[str] = []
        self.left: list[str] = []  # not reached before the deadline


class _Compiled(NamedTuple):
    path: str
    units: dict[str, bytes]  # unit file name -> bytes
    tmpfiles: bytes | None
    wanted_by: dict[str, str]  # unit file name -> the target whose .wants/ links it
    owners: dict[str, Pos]  # unit file name -> position of the job/worker it comes from
    jobs: tuple[str, ...]  # services of scheduled jobs (they take locks)
    notes: tuple[Diagnostic, ...]


def _covers(target: Target, release: int) -> bool:
    return target.min <= release and (target.max is None or release <= target.max)


def _compile(path: str, running: Target | None, holder: str) -> _Compiled:
    """One manifest through pipeline.build(), as `jobgen render` compiles it, the running
    systemd being the target unless the manifest names one (an explicit target wins).
    Raises ManifestError."""
    from jobgen.compiler import pipeline

    result = pipeline.build(path, None, holder, running=running)
    manifest, the_plan, files = result.manifest, result.plan, result.files
    extra = []
    if manifest.target is not None and running is not None and not _covers(manifest.target, running.min):
        pos = manifest.target_pos or Pos(path, 1, 1)
        extra.append(Diagnostic(pos, WARNING, f"target {manifest.target.label} does not include the running systemd {running.min}; "
                                              "its units may use directives this systemd ignores"))
    units, tmpfiles, wanted_by = {}, None, {}
    for unit in the_plan.files:
        if unit.kind == "tmpfiles":
            tmpfiles = files[unit.filename]
            continue
        units[unit.filename] = files[unit.filename]
        for section, directives in unit.sections:
            for key, value in directives:
                # What `systemctl enable` does with [Install] WantedBy= (systemd.unit(5));
                # a template without an instance is never enabled.
                if section == "Install" and key == "WantedBy" and "@." not in unit.filename:
                    wanted_by[unit.filename] = value.text
    owners = {}
    for item in (*manifest.jobs, *manifest.workers):
        for suffix in (".service", ".timer", ".target", "@.service"):
            owners[item.name + suffix] = item.pos
    jobs = tuple(f"{job.name}.service" for job in manifest.jobs)
    notes = tuple(sorted(set(result.diagnostics) | set(extra)))
    return _Compiled(path, units, tmpfiles, wanted_by, owners, jobs, notes)


def _clashes(compiled: _Compiled, taken: dict[str, str]) -> list[Diagnostic]:
    problems = []
    for name in sorted(compiled.units):
        pos = compiled.owners.get(name, Pos(compiled.path, 1, 1))
        stem = name.rsplit(".", 1)[0].rstrip("@")
        if name in (LOCKS_UNIT, REPORT_UNIT, *genpersist.UNITS):
            problems.append(Diagnostic(pos, ERROR, f"'{stem}': the name {name} is taken by a unit of jobgen-generator's own; rename it"))
        elif name in taken and name != MAIL_TEMPLATE:  # the mail template is shared: the same unit from any manifest
            problems.append(Diagnostic(pos, ERROR, f"'{stem}': {name} is also generated from {taken[name]}; unit names must be unique across all manifests; rename one"))
        elif vendor := _vendor_unit(name):
            problems.append(Diagnostic(pos, ERROR, f"'{stem}': {name} would replace the installed unit {vendor} (generated units rank above /usr/lib); rename it"))
    return problems


def generate(manifests: list[Path], normal_dir: str, running: int | None, holder: str | None = None,
             tmpfiles: str | None = None, *, emit: Callable[[Outcome], None] | None = None,
             deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> Outcome:
    """Compile every manifest; a manifest with any error is reported and left out whole.

    `emit` gets, as soon as each good manifest compiles, its files and links plus the
    shared lock files so far (what write() takes). Once `clock()` reaches `deadline`, or
    DeadlineReached interrupts a compilation, the manifests not done are in `left`.

    Smallest manifest first (then by file name): a few huge manifests cannot keep the
    ordinary ones from being written before the deadline. The same order decides which
    of two manifests that generate one unit name is skipped (the later)."""
    from jobgen.compiler import escape
    from jobgen.contract.locks import DEFAULT_HOLDER
    from jobgen.compiler.target import parse_target

    target = None
    if running is not None:
        try:
            target = parse_target(str(running))
        except ValueError:
            target = None  # older than jobgen's table: the manifest's own or the default target
    out = Outcome()
    taken: dict[str, str] = {}
    snippets: dict[str, bytes] = {}
    lock_users: list[str] = []
    by_name = [str(p) for p in manifests]
    manifests = sorted(manifests, key=lambda p: (_size(p), by_name.index(str(p))))
    for index, path in enumerate(manifests):
        where = str(path)
        try:
            if deadline is not None and clock() >= deadline:
                raise DeadlineReached()
            compiled = _compile(where, target, holder or DEFAULT_HOLDER)
            problems = _clashes(compiled, taken)
            source = escape.specifiers(where)
        except DeadlineReached:
            out.left = [str(p) for p in manifests[index:]]
            break
        except ManifestError as exc:
            compiled, problems = None, exc.diagnostics
        except ValueError as exc:  # a path that cannot be written into a unit file
            compiled, problems = None, [Diagnostic(Pos(where, 1, 1), ERROR, f"cannot name this manifest in SourcePath=: {exc}")]
        except Exception as exc:  # noqa: BLE001 -- a bug must cost one manifest, not the boot
            compiled, problems = None, [Diagnostic(Pos(where, 1, 1), ERROR, f"internal error in jobgen (please report it): {type(exc).__name__}: {exc}")]
        if compiled is None or problems:
            out.diagnostics += problems
            out.skipped.append(where)
            continue
        out.diagnostics += compiled.notes
        try:
            _hand_over(compiled, where, source, taken, lock_users, snippets, by_name, out, emit,
                       normal_dir, target, tmpfiles)
        except DeadlineReached:  # the alarm between compiling and writing: not written
            out.left = [str(p) for p in manifests[index:]]
            break
    out.files = dict(sorted(out.files.items()))
    out.links = dict(sorted(out.links.items()))
    return out


def _hand_over(compiled: _Compiled, where: str, source: str, taken: dict[str, str], lock_users: list[str],
               snippets: dict[str, bytes], by_name: list[str], out: Outcome, emit: Callable[[Outcome], None] | None,
               normal_dir: str, target: Target | None, tmpfiles: str | None) -> None:
    """One good manifest's files and links, with the lock files of all so far, added to
    `out` and handed to `emit`."""
    part = Outcome()
    for name, data in compiled.units.items():
        takes_lock = compiled.tmpfiles is not None and name in compiled.jobs
        part.files[name] = data + _generator_section(source, where, takes_lock)
        if name in compiled.wanted_by:
            part.links[f"{compiled.wanted_by[name]}.wants/{name}"] = f"../{name}"
    users = lock_users + [n for n in compiled.units if compiled.tmpfiles is not None and n in compiled.jobs]
    lines = dict(snippets)
    if compiled.tmpfiles is not None:
        lines[where] = compiled.tmpfiles
        joined = [lines[name] for name in by_name if name in lines]  # file-name order, always
        _lock_files(part, joined, len(users), normal_dir, target, tmpfiles)
    if emit is not None:
        emit(part)
    # Counted as generated only once written.
    taken.update(dict.fromkeys(compiled.units, where))
    lock_users[:] = users
    snippets.update(lines)
    out.files.update(part.files)
    out.links.update(part.links)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # compiling it says why


def _lock_files(part: Outcome, snippets: list[bytes], jobs: int, normal_dir: str, target: Target | None,
                tmpfiles: str | None) -> None:
    """The tmpfiles.d lines of every manifest so far and the unit that applies them."""
    from jobgen.compiler import escape

    conf = os.path.join(normal_dir, TMPFILES_CONF)
    part.files[TMPFILES_CONF] = b"".join(snippets)
    quiet = target is None or target.has("Service", "LogLevelMax")
    part.files[LOCKS_UNIT] = _locks_unit(escape.exec_line((tmpfiles or tmpfiles_binary(), "--create", conf)), jobs, quiet)
    part.links[f"multi-user.target.wants/{LOCKS_UNIT}"] = f"../{LOCKS_UNIT}"


def _generator_section(source: str, manifest: str, takes_lock: bool) -> bytes:
    """What the generator adds after the bytes `jobgen render` writes: a second [Unit]
    section (systemd.unit(5): a section may appear more than once; its settings add up).
    In the unit file itself, not a drop-in beside it: a drop-in is a folder and a file more
    per unit, and with them a warm 200-job run spent 55 ms of CPU against 39 without."""
    # SourcePath= (systemd.unit(5)): `systemctl status` names the manifest, and warns that a
    # daemon-reload is due when the manifest changed after the units were generated.
    lines = ["", f"{HEADER} from {manifest}: not in the file `jobgen render` writes.", "[Unit]", f"SourcePath={source}"]
    if takes_lock:
        # Wants=, not Requires=: a tmpfiles line that fails (say, an unknown user) must not
        # stop the jobs whose lock files were made; a job whose file is missing fails on
        # its own ("cannot open lock file"), never runs without its lock.
        lines += [f"Wants={LOCKS_UNIT}", f"After={LOCKS_UNIT}"]
    return ("\n".join(lines) + "\n").encode()


def _locks_unit(exec_start: str, jobs: int, quiet: bool) -> bytes:
    lines = [
        f"{HEADER}: lock files of the {jobs} job(s) generated from manifests in",
        f"# /etc/jobgen and /usr/lib/jobgen (tmpfiles.d(5) lines from jobgen; see {TMPFILES_CONF}).",
        "[Unit]",
        "Description=Lock files of jobgen's jobs",
        "Documentation=man:systemd-tmpfiles(8) man:systemd.generator(7)",
        # It starts with every job run; the default start limit (5 in 10 s,
        # systemd-system.conf(5)) would fail it as soon as jobs run often. Seen on 252.
        "StartLimitIntervalSec=0",
        "",
        "[Service]",
        # No RemainAfterExit=: the service goes inactive after each run, so every job's
        # Wants= starts it again and a job added by a daemon-reload gets its lock file.
        "Type=oneshot",
        f"ExecStart={exec_start}",
    ]
    if quiet:
        # Keeps systemd's "Starting"/"Finished" lines (info) of this helper out of the
        # journal at every job run (seen on 252 and 257); its failures still show.
        # LogLevelMax= needs 236: asked of the running systemd's directive table.
        lines.append("LogLevelMax=notice")
    return ("\n".join(lines) + "\n").encode()


def add_boot_report(outcome: Outcome, normal_dir: str, lines: list[tuple[int, str]]) -> None:
    """Problems that found no way to the journal (kmsg hidden, journald not yet running: a
    container's first pass at boot) as jobgen/report + a oneshot that prints it at boot.
    Each line starts with its syslog priority ("<3>"), which journald keeps as PRIORITY=
    (SyslogLevelPrefix=, on by default, systemd.exec(5))."""
    from jobgen.compiler import escape

    report = os.path.join(normal_dir, REPORT)
    outcome.files[REPORT] = "".join(f"<{priority}>{text}\n" for priority, text in lines).encode()
    unit = [
        f"{HEADER}: prints the problems it found in manifests at boot, when neither",
        "# /dev/kmsg nor the journal was there to take them (a container's first pass at boot).",
        "[Unit]",
        "Description=Problems jobgen-generator found in manifests",
        "Documentation=man:systemd.generator(7)",
        "",
        "[Service]",
        "Type=oneshot",
        f"ExecStart={escape.exec_line((CAT, report))}",
        f"SyslogIdentifier={REPORT_IDENT}",
    ]
    outcome.files[REPORT_UNIT] = ("\n".join(unit) + "\n").encode()
    outcome.links[f"multi-user.target.wants/{REPORT_UNIT}"] = f"../{REPORT_UNIT}"
    outcome.files = dict(sorted(outcome.files.items()))
    outcome.links = dict(sorted(outcome.links.items()))


def write(normal_dir: str, outcome: Outcome) -> None:
    """Files through compiler/write.py (atomic, 0644), then the .wants/ links."""
    from jobgen.compiler import write as writer

    root = Path(normal_dir)
    writer.apply(root, writer.compare(root, outcome.files))
    for link, target in outcome.links.items():
        path = root / link
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() and os.readlink(path) == target:
            continue
        if path.is_symlink() or path.exists():
            path.unlink()
        os.symlink(target, path)
