"""`jobgen apply`: install rendered units where systemd reads them, in one idempotent step.

Two halves, as everywhere in jobgen:

* ``plan_apply`` is pure. From the files to install (already placed by a layout), what is on
  disk now (``read_tree``) and what systemd says about the units (``UnitState``), it returns
  the file changes and the ordered ``systemctl`` / ``systemd-tmpfiles`` calls, each with the
  reason. ``--check`` and ``--diff`` print that plan and stop.
* ``execute`` carries a plan out: stop and disable what was removed, write the files
  (write.py, atomically), ``daemon-reload``, ``systemd-tmpfiles --create``, restart changed
  workers, enable and start what is not yet enabled or active. A unit that fails to start is
  named; the rest is still applied.

Rules the plan keeps (README: Deploying):

* Ownership: a file is jobgen's from manifest M when its first line is the header jobgen
  writes for M. A file at a generated path that is not (hand-written, another manifest's,
  a symbolic link, a mask) is never overwritten: the whole apply is refused, naming it.
  A file is removed only when it is M's and M no longer generates it.
* Stop before delete: a removed job's timer is stopped first (no new run starts), a run in
  progress is waited for up to ``--stop-timeout`` and only then stopped (SIGTERM, then the
  unit's own stop timeout), then the timer is disabled, and only then are its files removed.
* Idempotent: a second apply finds every file identical and every entry unit enabled and
  active, so it changes nothing and calls no state-changing command (only read-only queries:
  ``is-enabled``, ``is-active``).
* ``--root DIR`` (an image root): no running systemd is asked or touched; enabling is done by
  ``systemctl --root=DIR enable``, which makes the same ``.wants/`` links an enable on the
  booted image would; lock files are made by systemd-tmpfiles-setup.service at its boot.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jobgen.compiler import layout as layouts
from jobgen.compiler import write
from jobgen.compiler import header
from jobgen.compiler.diagnostics import WARNING, Diagnostic
from jobgen.runtime import spawn

UNIT_SUFFIXES = (".service", ".timer", ".target", ".path")  # .path: the watch of an overlap: queue job
RUNNING = frozenset({"active", "activating", "deactivating", "reloading", "refreshing"})
ENABLED = frozenset({"enabled", "enabled-runtime"})
ENABLE_DIR = "etc/systemd/system"  # where `systemctl [--root] enable` makes its links, whatever the layout
INSTALL_LINKS = {"WantedBy": ".wants", "RequiredBy": ".requires", "UpheldBy": ".upholds"}  # systemd.unit(5) [Install]
HEAD_BYTES = 8192  # enough for a header line (a manifest's file name is at most NAME_MAX bytes)
FILE_BYTES_MAX = 64 << 20  # far above any unit or snippet jobgen writes (a manifest is at most 1 MiB)
POLL_SECONDS = 0.5  # how often a removed job's run in progress is asked whether it ended

CREATE, UPDATE, IDENTICAL, REMOVE = write.CREATE, write.UPDATE, write.IDENTICAL, write.REMOVE


class Refused(Exception):
    """apply cannot go ahead; nothing was changed. One line per reason."""

    def __init__(self, reasons: list[str]):
        self.reasons = reasons
        super().__init__("; ".join(reasons))


@dataclass(frozen=True)
class Where:
    """Where to install: this host (root "/", running systemd) or an image root."""

    root: Path
    layout: layouts.Layout
    image: bool  # --root DIR: no running systemd

    def systemctl(self, *args: str) -> tuple[str, ...]:
        return ("systemctl", f"--root={self.root}", *args) if self.image else ("systemctl", *args)


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the root, e.g. etc/systemd/system/x.timer
    action: str  # create | update | identical | remove
    old: bytes | None
    new: bytes | None

    @property
    def changes_anything(self) -> bool:
        return self.action != IDENTICAL


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    why: str
    wait_for: str | None = None  # a removed job's service: wait while it runs, then argv if still running


@dataclass
class ApplyPlan:
    files: list[FileChange]
    before: list[Step]  # stop/disable removed units: before their files go
    after: list[Step]  # reload, tmpfiles, restarts, enable/start: after the files are written

    @property
    def steps(self) -> list[Step]:
        return self.before + self.after

    @property
    def changed(self) -> bool:
        return bool(self.steps) or any(f.changes_anything for f in self.files)


@dataclass
class UnitState:
    """What systemd says about units (systemctl is-enabled / is-active), by unit name."""

    enabled: dict[str, str] = field(default_factory=dict)
    active: dict[str, str] = field(default_factory=dict)
    # units whose file on disk is not what systemd has loaded (NeedDaemonReload=yes): an
    # earlier apply wrote them but its daemon-reload failed, so the files are identical now
    # and only systemd can tell that a reload is still owed
    stale: list[str] = field(default_factory=list)

    def is_enabled(self, unit: str) -> bool:
        return self.enabled.get(unit, "not-found") in ENABLED

    def is_running(self, unit: str) -> bool:
        return self.active.get(unit, "inactive") in RUNNING


# --------------------------------------------------------------------------- reading


def _read(path: Path) -> tuple[bytes | None, str | None]:
    """(content, None), (None, None) when absent, or (None, why it cannot be jobgen's)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:  # ELOOP (a folder on the way links to itself), ENOTDIR, EACCES...
        return None, f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        if target == "/dev/null":
            return None, "is masked (a symbolic link to /dev/null): unmask it or drop the job"
        return None, f"is a symbolic link (to {target}), not a file jobgen wrote"
    if not stat.S_ISREG(st.st_mode):
        return None, "is not a regular file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            # Only a file whose first line is jobgen's header is read whole (it may be
            # compared or removed); for any other the first line is all that is judged, so
            # a stray multi-gigabyte *.conf beside the units costs a read of HEAD_BYTES.
            data = fh.read(HEAD_BYTES)
            if header.manifest_of(data) is None and not header.shared(data):
                return data, None
            data += fh.read(FILE_BYTES_MAX + 1 - len(data))
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"
    if len(data) > FILE_BYTES_MAX:
        return None, f"is larger than {FILE_BYTES_MAX >> 20} MiB, more than jobgen writes: not a file jobgen wrote"
    return data, None


def read_tree(where: Where, desired: dict[str, bytes], made_by: dict[str, str]) -> tuple[dict[str, bytes], list[str]]:
    """What is on disk now: the desired paths, plus every file in the layout's folders that a
    given manifest wrote (candidates for removal). Returns (path -> bytes, refusals)."""
    manifests = set(made_by.values())
    existing: dict[str, bytes] = {}
    refused = outside(where, desired)
    if refused:
        return existing, refused  # nothing is read through a link that leaves the root
    for rel in sorted(desired):
        data, why = _read(where.root / rel)
        if why:
            refused.append(f"{where.root / rel} {why}")
        elif data is not None:
            if header.shared(data):
                existing[rel] = data  # the mail template: any manifest's (compiler/header.py SHARED)
            elif header.owner(data, {made_by[rel]}) is None:
                theirs = header.manifest_of(data)
                by = f"jobgen wrote it from {theirs}, not {made_by[rel]}" if theirs else "jobgen did not write it"
                refused.append(f"{where.root / rel} exists and {by}: move it away or rename the job")
            else:
                existing[rel] = data
    for folder in sorted(set(layouts.folders(where.layout))):
        base = where.root / folder
        if not base.is_dir() or base.is_symlink():
            continue
        try:
            names = sorted(os.listdir(base))
        except OSError as exc:  # a folder the files to remove may be in, unread: no guess
            refused.append(f"{base} cannot be read ({exc.strerror})")
            continue
        for name in names:
            rel = f"{folder}/{name}" if folder else name
            if rel in desired or not name.endswith((*UNIT_SUFFIXES, ".conf")):
                continue
            data, why = _read(base / name)
            if data is not None and header.owner(data, manifests):
                existing[rel] = data
            elif why and why.startswith("cannot be read"):
                refused.append(f"{base / name} {why}")
    return existing, refused


def _wants_folders(desired: dict[str, bytes]) -> set[str]:
    """The folders `systemctl enable` links into: ENABLE_DIR/TARGET.wants|.requires|.upholds
    for each WantedBy=, RequiredBy=, UpheldBy= of a unit's [Install] (systemd.unit(5))."""
    found = set()
    for rel, data in desired.items():
        if not _unit(rel) or not _has_install(data):
            continue
        for line in data.decode("utf-8", "replace").partition("\n[Install]\n")[2].splitlines():
            key, _, value = line.partition("=")
            if key.strip() in INSTALL_LINKS:
                found |= {f"{ENABLE_DIR}/{target}{INSTALL_LINKS[key.strip()]}" for target in value.split()}
    return found


def outside(where: Where, desired: dict[str, bytes]) -> list[str]:
    """Every folder apply writes into or enables into, beneath the root: one refusal per
    folder that a symbolic link leads out of it. The same check as render's output folder
    (write.check_folder): links are resolved as this host sees them, so an absolute link in
    an image (/etc/systemd -> /srv/x) leaves the root even though the booted image would
    read it inside; refusing it is the safe reading. A link that stays inside is followed."""
    folders = set(layouts.folders(where.layout)) | {rel.rpartition("/")[0] for rel in desired} | {ENABLE_DIR} | _wants_folders(desired)
    refused = []
    for sub in sorted(folders):
        try:
            write.check_folder(where.root, sub, what="root")
        except write.OutputError as exc:
            if str(exc) not in refused:  # etc/systemd leads out: once, not per folder in it
                refused.append(str(exc))
    return refused


# --------------------------------------------------------------------------- planning


def _unit(rel: str) -> str | None:
    name = rel.rpartition("/")[2]
    return name if name.endswith(UNIT_SUFFIXES) else None


def _has_install(data: bytes) -> bool:
    return b"\n[Install]\n" in data


def _stem(unit: str) -> str:
    return unit.rpartition(".")[0].split("@", 1)[0]


def entry_units(files: dict[str, bytes]) -> dict[str, str]:
    """Units that are enabled and started (those with [Install]): timers of jobs, worker
    targets, single workers, the queue watches of `overlap: queue` jobs (NAME-drain.path).
    -> unit name: 'timer' | 'path' | 'worker'."""
    out = {}
    for rel, data in files.items():
        unit = _unit(rel)
        if unit and _has_install(data) and "@." not in unit:
            out[unit] = "timer" if unit.endswith(".timer") else "path" if unit.endswith(".path") else "worker"
    return out


def plan_apply(where: Where, desired: dict[str, bytes], existing: dict[str, bytes], state: UnitState, restart: str = "changed", origin: dict[str, str] | None = None) -> ApplyPlan:
    """The file changes and the ordered calls that make the host match ``desired``."""
    origin = origin or {}
    files = [_change(rel, existing.get(rel), desired.get(rel)) for rel in sorted(set(desired) | set(existing))]
    changed = {f.path for f in files if f.changes_anything}
    before: list[Step] = []
    after: list[Step] = []
    old_entries = entry_units(existing)
    new_entries = entry_units(desired)
    for unit in sorted(set(old_entries) - set(new_entries)):
        before += _retire(where, unit, old_entries[unit], state, origin)
    if not where.image and any(_unit(p) for p in changed):
        after.append(Step(("systemctl", "daemon-reload"), "unit files changed"))
    elif not where.image and state.stale:
        after.append(Step(("systemctl", "daemon-reload"), f"systemd has not loaded {', '.join(sorted(state.stale))} as on disk (NeedDaemonReload)"))
    if not where.image:
        for f in files:
            if f.action in (CREATE, UPDATE) and not _unit(f.path):
                after.append(Step(("systemd-tmpfiles", "--create", f"/{f.path}"), "lock files of host-locked jobs (tmpfiles.d snippet written)"))
    created = {_unit(f.path) for f in files if f.action == CREATE}
    updated_stems = {_stem(u) for f in files if f.action == UPDATE and (u := _unit(f.path))}
    for unit in sorted(new_entries):
        after += _converge(where, unit, new_entries[unit], state, is_new=unit in created, changed=_stem(unit) in updated_stems, restart=restart)
    return ApplyPlan(files, before, after)


def _change(rel: str, old: bytes | None, new: bytes | None) -> FileChange:
    if new is None:
        return FileChange(rel, REMOVE, old, None)
    if old is None:
        return FileChange(rel, CREATE, None, new)
    return FileChange(rel, IDENTICAL if old == new else UPDATE, old, new)


def _retire(where: Where, unit: str, kind: str, state: UnitState, origin: dict[str, str]) -> list[Step]:
    """Stop, wait, disable: what comes before a removed job's or worker's files go."""
    gone = "no longer in its manifest"
    steps = []
    if not where.image and state.is_running(unit):
        steps.append(Step(where.systemctl("stop", unit), f"{gone}: stop it first (no new run starts)"))
    if kind == "timer" and not where.image:
        service = unit.removesuffix(".timer") + ".service"
        if state.is_running(service):
            steps.append(Step(where.systemctl("stop", service), f"{gone}: its run in progress is waited for (--stop-timeout), then stopped", wait_for=service))
    if state.is_enabled(unit):
        steps.append(Step(where.systemctl("disable", unit), f"{gone}: disabled before its files are removed"))
    return steps


def _converge(where: Where, unit: str, kind: str, state: UnitState, *, is_new: bool, changed: bool, restart: str) -> list[Step]:
    what = {"timer": "timer", "path": "queue watch"}.get(kind, "worker")
    enabled = not is_new and state.is_enabled(unit)
    running = not is_new and state.is_running(unit)
    if where.image:
        return [] if enabled else [Step(where.systemctl("enable", unit), f"new {what}" if is_new else f"{what} not enabled")]
    if not enabled and not running:
        return [Step(where.systemctl("enable", "--now", unit), f"new {what}" if is_new else f"{what} not enabled and not running")]
    steps = []
    if not enabled:
        steps.append(Step(where.systemctl("enable", unit), f"{what} not enabled"))
    if not running:
        steps.append(Step(where.systemctl("start", unit), f"{what} not running"))
    elif changed and kind == "worker" and restart == "changed":
        steps.append(Step(where.systemctl("restart", unit), "worker changed: restarted gracefully (SIGTERM, then its stop_timeout)"))
    return steps


# --------------------------------------------------------------------------- the host


def root_problem(root: Path) -> str | None:
    """Why ``--root`` cannot be installed into, or None."""
    try:
        st = os.stat(root)
    except FileNotFoundError:
        return "does not exist (give the image's root folder; apply does not make it)"
    except PermissionError:
        return "not readable (permission denied)"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "not a folder"
    if not os.access(root, os.R_OK | os.X_OK):
        return "not readable (permission denied)"
    return None


def holder_present(holder: str, root: Path, image: bool) -> bool:
    if not os.path.isabs(holder):
        return True  # not judged: systemd's own search (systemd.service(5) "Command lines")
    if image:
        # A link is taken as it is: where it points is the booted image's to resolve.
        return os.path.lexists(os.path.join(root, holder.lstrip("/")))
    return os.path.isfile(holder) and os.access(holder, os.X_OK)


def holder_warnings(result, holder: str, root: Path, image: bool, running: str | None):
    """``result`` (pipeline.Result) with a warning at each job whose units exec ``holder``
    when that file is not in ``root``: such a unit fails with status=203/EXEC
    ("Failed to locate executable"), the job never runs, and nothing else would say so."""
    if not result.plan.holder_jobs or holder_present(holder, root, image):
        return result
    where = f"in {root}" if image else "on this host"
    hint = f" (the jobgen running now is {running})" if running and running != holder and not image else ""
    found = [
        Diagnostic(pos, WARNING, f"job '{name}': its units run {holder} (--holder), which does not exist {where}: they would fail to start "
                   f"(status=203/EXEC); give --holder the path of jobgen there{hint}")
        for name, pos in result.plan.holder_jobs
    ]
    return result._replace(diagnostics=tuple(sorted(set(result.diagnostics) | set(found))))


def host_problem(where: Where, check: bool) -> str | None:
    """Why apply cannot run on this host, or None (--check only reads)."""
    if where.image:
        if not check and spawn.find("systemctl") is None:
            # Checked before anything is written: the files alone, never enabled, are an
            # image whose timers never start.
            return f"systemctl not found: apply --root enables the units with `systemctl --root={where.root} enable` (install systemd, or use --check)"
        return None
    if not check and os.geteuid() != 0:
        return "installing units needs root (run as root, or use --check to see what would change)"
    if not os.path.isdir("/run/systemd/system"):
        return "systemd is not running on this host (no /run/systemd/system); to fill an image root use --root DIR"
    if spawn.find("systemctl") is None:
        return "systemctl not found"
    return None


def _run(argv: tuple[str, ...], timeout: float = 600) -> subprocess.CompletedProcess:
    """The call's result; one that cannot be started or does not end in ``timeout`` is a
    failed call (its reason as stderr), named like any other, never a crash mid-apply."""
    try:
        return spawn.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(argv, 124, "", f"no answer in {timeout:g}s")
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", f"cannot run {exc.filename or argv[0]}: {exc.strerror}")


def query_state(where: Where, units: list[str], loaded: list[str] = ()) -> UnitState:
    """is-enabled / is-active of each unit: read-only questions, one unit per call (a unit
    systemctl cannot find prints nothing on stdout, so answers of one call could not be
    matched to their units); and which of ``loaded`` (units whose file stays) systemd has
    not loaded as on disk: one call, each answer names its unit."""
    state = UnitState()
    if where.image and spawn.find("systemctl") is None:
        return state
    for unit in sorted(set(units)):
        state.enabled[unit] = _run(where.systemctl("is-enabled", unit)).stdout.strip() or "not-found"
        if not where.image:
            state.active[unit] = _run(("systemctl", "is-active", unit)).stdout.strip() or "unknown"
    if not where.image and loaded:
        state.stale = needing_reload(_run(("systemctl", "show", "--property=Id,NeedDaemonReload", "--", *sorted(set(loaded)))).stdout)
    return state


def needing_reload(shown: str) -> list[str]:
    """The units `systemctl show --property=Id,NeedDaemonReload UNIT...` says need a
    daemon-reload: one block per unit, blank-line separated, matched by Id= (not by order)."""
    out = []
    for block in shown.split("\n\n"):
        props = dict(line.partition("=")[::2] for line in block.splitlines() if "=" in line)
        if props.get("NeedDaemonReload") == "yes" and props.get("Id"):
            out.append(props["Id"])
    return sorted(out)


def units_loaded_from(desired: dict[str, bytes], existing: dict[str, bytes]) -> list[str]:
    """Units whose file stays as it is (no template: systemd shows instances, not templates)."""
    return sorted(u for rel, data in existing.items() if desired.get(rel) == data and (u := _unit(rel)) and "@." not in u)


def units_to_ask(desired: dict[str, bytes], existing: dict[str, bytes]) -> list[str]:
    """Entry units and, for removed timers, their services (is a run in progress?)."""
    units = set(entry_units(existing)) | {u for u in entry_units(desired) if any(_unit(r) == u for r in existing)}
    units |= {u.removesuffix(".timer") + ".service" for u in entry_units(existing) if u.endswith(".timer")}
    return sorted(units)


@dataclass
class Outcome:
    done: list[Step] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unwritten: str | None = None  # the files could not be written (write.OutputError): none was changed


def execute(where: Where, plan: ApplyPlan, stop_timeout: float) -> Outcome:
    out = Outcome()
    for step in plan.before:
        _do(step, out, stop_timeout)
    try:
        _write(where, plan.files)
    except write.OutputError as exc:
        # Nothing after the files (reload, enable, start) acts on files that are not there.
        out.unwritten = str(exc)
        return out
    for step in plan.after:
        _do(step, out, stop_timeout)
    return out


def _do(step: Step, out: Outcome, stop_timeout: float) -> None:
    if step.wait_for:
        deadline = time.monotonic() + stop_timeout
        while time.monotonic() < deadline:
            if _run(("systemctl", "is-active", step.wait_for)).stdout.strip() not in RUNNING:
                return  # the run ended on its own: nothing to stop
            time.sleep(POLL_SECONDS)
    r = _run(step.argv)
    out.done.append(step)
    if r.returncode != 0:
        detail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        out.failed.append(f"`{' '.join(step.argv)}` failed ({step.why}): {detail}")


def _write(where: Where, files: list[FileChange]) -> None:
    """Every file change as one transaction (write.apply) in the folder the changed files
    share (etc, usr/lib: ``lock_folder``): units and their tmpfiles.d snippet are installed together or not
    at all, never units whose lock files no snippet makes."""
    changed = [f for f in files if f.changes_anything]
    if not changed:
        return
    # Always the folder ``locked`` holds: the journal is where the next apply looks for it.
    base = lock_folder(where)
    cut = len(base) + 1 if base else 0
    write.apply(where.root / base, [write.Change(f.path[cut:], f.action, f.old, f.new) for f in changed])


def lock_folder(where: Where) -> str:
    """The folder, relative to the root, that every folder of the layout is in (etc,
    usr/lib): it holds an apply's lock file and journal (compiler/write.py)."""
    return os.path.commonpath(layouts.folders(where.layout))


@contextlib.contextmanager
def locked(where: Where, *, dry: bool, on_wait: Callable[[], None] = lambda: None) -> Iterator[write.Recovery]:
    """Serialise applies to one root, as renders of one folder are (write.locked, the same
    lock file): the whole read, plan, write and systemctl sequence runs under it, so a
    second apply plans from what the first left. An apply that died after its commit point
    is completed first; a dry run waits for a running apply but writes nothing."""
    base = lock_folder(where)
    subs = tuple(os.path.relpath(folder, base) for folder in layouts.folders(where.layout))
    with write.locked(where.root / base, subs, dry=dry, on_wait=on_wait) as recovery:
        yield recovery
