"""Stage 3: the typed model + a target systemd -> the list of files to write.

Every directive jobgen writes goes through ``_Unit.set``, which asks the target
(target.py, built from systemd's own parser tables) whether *every* systemd in the
target range accepts it. A directive the target lacks is never written: the feature
that asked for it either has a fallback in ``FALLBACKS`` (reported as a note) or is a
positioned error. Values that changed meaning across releases are gated the same way
through ``Target.lacking_values`` in the same ``_Unit.set``.

A simple manifest key writes its directive from its row of the key table
(validate.JOB_KEYS / WORKER_KEYS, ``Writes``), walked by ``_write_keys``; what overlap
policies and lock scopes do is asked of contract/policies.py. EMITTED, every directive
jobgen can write, is derived from those tables and ``OWN_DIRECTIVES``.

Nothing here escapes text for unit files (tmpfiles.d lines excepted: their path field is
escaped here by escape.tmpfiles_path): argv stays a tuple of strings inside
``Exec`` values until the template filter renders it (escape.py).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from typing import Any, Callable, NamedTuple

from jobgen.compiler import escape, limits, names, notify, timespec
from jobgen.compiler.context import RunSpec, process_context
from jobgen.compiler.diagnostics import ERROR, NOTE, Diagnostic, ManifestError, Pos
from jobgen.compiler.hardening import HARDENING
from jobgen.compiler.hardening import STRICT as _HARDENING_STRICT
from jobgen.compiler.model import Common, Job, Manifest, Record, Worker
from jobgen.compiler.validate import JOB_KEYS, WORKER_KEYS, Key
from jobgen.compiler.target import MATCHERS_READING_UNIT, Target, parse_target
from jobgen.contract import locks, outcomes, policies
from jobgen.contract import queue as queue_contract

# Stated in every output when the manifest names no target: Debian 12 and RHEL 9 ship
# 252, the oldest systemd of the mainstream server releases still in full support.
# Assuming the newest would write directives older hosts ignore with a warning.
DEFAULT_TARGET = ">=252"

DEFAULT_HOLDER = locks.DEFAULT_HOLDER
CONFLICT_EXIT = locks.CONFLICT_EXIT  # 75, EX_TEMPFAIL: the lock contract's conflict code, every scope
FLOCK = "/usr/bin/flock"  # util-linux; Essential on Debian, in util-linux-core on RHEL
SH = "/bin/sh"

# The reporter: one structured journal line per run, so a skipped run is visible as a
# skip and never confused with success or failure. It runs as ExecStopPost= and reads
# what systemd.exec(5) passes there: $SERVICE_RESULT, $EXIT_CODE, $EXIT_STATUS.
# Arguments: $1 job, $2 overlap policy, $3 end-time stamp file ('' for none), $4 the
# outcome of a lock conflict for this policy (policies.OVERLAP: skipped, wait-expired).
# With SuccessExitStatus=75 a conflict ends with result 'success', so the exit status is
# what tells it apart; 'exec-condition' is an activation the overrun check deferred.
# An orderly stop (`systemctl stop`, a shutdown) sends the unit's KillSignal= (SIGTERM for
# jobs, systemd.kill(5)); a oneshot killed by it ends with result 'signal', status TERM
# (seen on 252 and 257): that is the stop, not the job's failure, so it has its own word.
# A stop that had to SIGKILL after TimeoutStopSec= ends with result 'timeout'.
# logger(1) --journald sends the fields natively; $INVOCATION_ID ties the line to its run
# even when logger exits before journald has read its cgroup.
# The result -> outcome arms are outcomes.BY_RESULT, the table `jobgen run` reports from.
def _case_pattern(result: str, code: str, status: str) -> str:
    # `case` patterns: '*' matches '/' too, so "success/*" is every success
    return f"{result}/*" if (code, status) == ("*", "*") else f"{result}/{code}/{status}"


REPORTER = (
    'case "$SERVICE_RESULT/$EXIT_CODE/$EXIT_STATUS" in '
    f"success/exited/{CONFLICT_EXIT}) o=$4 ;; "
    + "".join(f"{_case_pattern(*pattern)}) o={word} ;; " for pattern, word in outcomes.BY_RESULT)
    + f"*) o={outcomes.FAILED} ;; "
    "esac; "
    f'[ -n "$3" ] && [ "$o" != {outcomes.DEFERRED} ] && date +%s%6N > "$3"; '
    "printf 'MESSAGE=%s: %s (result=%s, %s=%s)\\nSYSLOG_IDENTIFIER=jobgen\\nJOBGEN_JOB=%s\\n"
    "JOBGEN_OUTCOME=%s\\nJOBGEN_POLICY=%s\\nJOBGEN_EXIT_STATUS=%s\\nJOBGEN_INVOCATION_ID=%s\\n' "
    '"$1" "$o" "$SERVICE_RESULT" "$EXIT_CODE" "$EXIT_STATUS" "$1" "$o" "$2" "$EXIT_STATUS" "$INVOCATION_ID" '
    "| logger --journald"
)

# Emulation of DeferReactivation=yes (systemd 257) for older targets. Before 257 a
# calendar elapse that falls while the job runs starts it again the moment the run ends
# (systemd-facts: "back-to-back"). The reporter writes each run's end time (µs) into a
# stamp; this ExecCondition= (243) defers an activation that begins less than
# DEFER_WINDOW_USEC after that end, and jobgen sets AccuracySec=1s for these timers so the
# catch-up comes inside the window. It cannot tell who started the unit: systemd 252
# keeps the *first* activation's $TRIGGER_TIMER_REALTIME_USEC on the unit ("older
# details object wins", src/core/unit.c@v252), so that variable is no witness. Hence a
# calendar slot or a `systemctl start` within the window after a run is deferred too
# (README "Overrun"; `jobgen run` never is).
DEFER_WINDOW_USEC = 2_000_000
# The stamp is data, never code: it is read with `read` (its open inside the 2>/dev/null
# group, so a missing or unreadable stamp writes nothing to the journal) and used only if
# it is 1 to 18 digits without a leading zero, so no shell ever evaluates its content in
# $((...)) (bash would run `x[$(cmd)]`; dash would exit 2 and so defer every run), a
# leading 0 is never read as octal, and the number fits a 64-bit shell integer. A stamp
# from the future is ignored. Whatever is wrong with the stamp, the job runs (exit 0);
# only a genuine end less than the window ago defers it (exit 1: ExecCondition= skips).
DEFER_CHECK = (
    'now=$(date +%s%6N); ended=; { read -r ended < "$1"; } 2>/dev/null; '
    "case $now in ''|*[!0-9]*) exit 0 ;; esac; "
    "case $ended in ''|0*|*[!0-9]*|???????????????????*) exit 0 ;; esac; "
    '[ "$ended" -gt "$now" ] && exit 0; '
    f'if [ $((now - ended)) -lt {DEFER_WINDOW_USEC} ]; then '
    'echo "previous run ended $(((now - ended) / 1000))ms ago: '
    'deferring this catch-up activation to the next calendar slot (DeferReactivation emulation)"; exit 1; fi; '
    "exit 0"
)


# Values and unit files are named tuples, not frozen dataclasses: defining a dataclass
# executes its generated methods at every start of every command and boot (six each,
# some 0.5 ms together), a named tuple one. Exec, Env and Raw are keys of the same
# caches (_block's rows, render's escaped texts): as tuples two of them could only be
# equal if their fields were, and their second fields never can be (a str prefix, a str
# value, a bool), so a Raw never stands in for an Env; render.py still keys by type.


class Exec(NamedTuple):
    """An Exec*= value: argv plus jobgen's own prefix; rendered by the 'exec' filter."""

    argv: tuple[str, ...]
    prefix: str = ""


class Env(NamedTuple):
    name: str
    value: str


class Raw(NamedTuple):
    """A plain value (numbers, names, paths, time spans in systemd's syntax), escaped by
    its directive's own rule (escape.setting: '%' doubled only where the directive expands
    specifiers), unless jobgen itself wrote a specifier on purpose (``specifiers=True``,
    e.g. ``%i``), which only an expanding directive may carry."""

    text: str
    specifiers: bool = False


Value = Exec | Env | Raw


class UnitFile(NamedTuple):
    filename: str
    kind: str  # service, timer, target, tmpfiles
    sections: tuple[tuple[str, tuple[tuple[str, Value], ...]], ...] = ()
    lines: tuple[str, ...] = ()  # tmpfiles.d entries
    comment: str = ""


class _Runs(Mapping[str, RunSpec]):
    """job -> its RunSpec, read from its unit (context.process_context) when first asked:
    `jobgen run`, `enqueue` and `status` ask for one or a few; a render asks for none, and
    reading 1,000 units back costs it some 40 ms."""

    def __init__(self, made: dict[str, Callable[[], RunSpec]]):
        self._made, self._read = made, {}

    def __getitem__(self, job: str) -> RunSpec:
        if job not in self._read:
            self._read[job] = self._made[job]()
        return self._read[job]

    def __iter__(self) -> Iterator[str]:
        return iter(self._made)

    def __len__(self) -> int:
        return len(self._made)


class Plan(Record):
    """One manifest's units for one target, and what the commands read beside them: two
    plans are equal when their manifest, target, files and notes are."""

    _UNCOMPARED = frozenset({"runs", "queues", "holder_jobs", "journal_units"})

    manifest: str
    target: Target
    files: tuple[UnitFile, ...]
    notes: tuple[Diagnostic, ...]
    runs: Mapping[str, RunSpec]
    # overlap: queue jobs -> the store arguments of `jobgen enqueue|drain|queue` (runtime/queue/command.py)
    queues: dict[str, tuple[str, ...]]
    # Jobs whose units exec the holder (`jobgen lock|enqueue|drain`), at the key that made
    # them: the CLI warns when that executable is missing (status=203/EXEC otherwise).
    holder_jobs: tuple[tuple[str, Pos], ...]
    # job -> ((service, kind), ...): the units whose journal lines are the job's own, kind
    # outcomes.RUN_UNIT (the reporter's unit) or QUEUE_UNIT (enqueuer and drainer). `jobgen status` counts
    # a line only when journald attests it came from one of these (host/status.py).
    journal_units: dict[str, tuple[tuple[str, str], ...]]


# --------------------------------------------------------------------------- what is written
# Directives plan.py composes itself (a simple key's directive is a row of the key table,
# validate.JOB_KEYS / WORKER_KEYS, and is walked by _write_keys): (section, directive, why).
OWN_DIRECTIVES: tuple[tuple[str, str, str], ...] = (
    ("Unit", "Description", "description, or a default naming the job or worker"),
    ("Unit", "PartOf", "instances > 1: stopping or restarting NAME.target reaches every instance"),
    ("Unit", "Wants", "instances > 1: NAME.target wants NAME@1..N.service; a lock server: network-online.target"),
    ("Service", "Type", "a job is Type=oneshot"),
    ("Service", "ExecCondition", "the DeferReactivation emulation (README: Overrun)"),
    ("Service", "ExecStart", "command, behind the lock wrapper of the lock scope"),
    ("Service", "ExecStopPost", "the reporter: one journal line per run"),
    ("Service", "SuccessExitStatus", "a lock conflict is an outcome, not a failure (policies.SCOPES)"),
    ("Service", "KillMode", "graceful stop of a worker; a cluster lock holder (policies.SCOPES)"),
    ("Service", "LoadCredential", "lock.credential"),
    ("Service", "TimeoutStartSec", "timeout + the lock wait"),
    ("Service", "ReadWritePaths", "the lock folder under ProtectSystem=strict"),
    ("Timer", "OnCalendar", "schedule: calendar"),
    ("Timer", "OnActiveSec", "schedule: every"),
    ("Timer", "OnUnitActiveSec", "schedule: every"),
    ("Timer", "OnUnitInactiveSec", "schedule: every, counted from the end of a run (policies.OVERLAP)"),
    ("Timer", "OnBootSec", "schedule: after_boot"),
    ("Timer", "DeferReactivation", "overrun policy (policies.OVERLAP)"),
    ("Timer", "AccuracySec", "accuracy; 1s under the DeferReactivation emulation"),
    ("Unit", "After", "overlap: queue: the drainer after the enqueuer that wants it; a lock server: network-online.target"),
    ("Path", "DirectoryNotEmpty", "overlap: queue, host scope: the drainer starts while requests wait"),
    ("Path", "Unit", "overlap: queue, host scope: the drainer the watch starts"),
    ("Install", "WantedBy", "timers.target / multi-user.target / paths.target"),
)


def _key_rows() -> tuple[tuple[str, str, str], ...]:
    """(key, section, directive) of every simple key, jobs' and workers' (no duplicates)."""
    rows = {}
    for table in (JOB_KEYS, WORKER_KEYS):
        for key, spec in table.items():
            if spec.writes is not None:
                rows[key] = (key, spec.writes.section, spec.writes.directive)
    return tuple(rows.values())


# Every directive jobgen can write, derived from the tables above (`jobgen directives`
# lists them for a target; _Unit.set refuses any other, and a test holds the golden files
# to exactly this set).
EMITTED: tuple[tuple[str, str], ...] = tuple(
    dict.fromkeys(
        [(section, directive) for section, directive, _ in OWN_DIRECTIVES]
        + [(section, directive) for _, section, directive in _key_rows()]
        + [(section, directive) for section, directive, _ in _HARDENING_STRICT]
    )
)
_EMITTED = frozenset(EMITTED)

# Directive -> what jobgen does when the target lacks it (instead of an error).
FALLBACKS: dict[tuple[str, str], str] = {
    ("Timer", "DeferReactivation"): "emulated with ExecCondition= (README: Overrun)",
    ("Service", "RestartSteps"): "restarts use the fixed restart_delay",
    ("Service", "RestartMaxDelaySec"): "restarts use the fixed restart_delay",
    ("Service", "Type"): "Type=simple",
} | {(s, d): "left out of the hardening profile" for s, d, _ in _HARDENING_STRICT}


# A value the target lacks (target.VALUE_GATES) -> the value written instead, with a note.
# Any other lacking value is a positioned error.
VALUE_FALLBACKS: dict[tuple[str, str, str], str] = {
    # Type=exec (240) only adds "start fails if exec fails"; simple runs the same program.
    ("Service", "Type", "exec"): "simple",
    # ProtectSystem=strict (232): the default profile's full is the strongest older value.
    ("Service", "ProtectSystem", "strict"): "full",
}


def _text(value: Value) -> str:
    """What value gates look at: the text, or for an Exec*= line jobgen's own prefix."""
    if isinstance(value, Exec):
        return value.prefix
    if isinstance(value, Env):
        return f"{value.name}={value.value}"
    return value.text


class _Unit:
    """Collects one unit's directives. ``set`` is the single point where a directive is
    written: it asks the target for the directive and for the value (every row of
    target.VALUE_GATES), so neither can be written without its gate."""

    def __init__(self, ctx: "_Context", filename: str, kind: str):
        self.ctx, self.filename, self.kind = ctx, filename, kind
        self.sections: dict[str, list[tuple[str, Value]]] = {}
        self.last: dict[str, Value] = {}  # directive -> its last value (value gates read its _text)

    def supported(self, section: str, key: str, pos: Pos, feature: str) -> bool:
        reason = self.ctx.lacking(section, key)
        if reason is None:
            return True
        fallback = FALLBACKS.get((section, key))
        if fallback is None:
            self.ctx.error(pos, f"{self.ctx.what}: '{feature}' ({key}=) {reason}")
        else:
            self.ctx.note(pos, f"{key}= {reason}: {fallback}")
        return False

    def _gated(self, section: str, key: str, value: Value, pos: Pos, feature: str) -> Value | None:
        if not self.ctx.target.value_gates_lacked(section, key):
            return value  # no value of this directive is gated for this target
        for gate, reason in self.ctx.target.lacking_values(section, key, _text(value), _Texts(self.last)):
            instead = VALUE_FALLBACKS.get((section, key, gate.value))
            if instead is None:
                self.ctx.error(pos, f"{self.ctx.what}: '{feature}' {reason}")
                return None
            self.ctx.note(pos, f"{reason}: {key}={instead}")
            value = Raw(instead)
        return value

    def set(self, section: str, key: str, value: Value, pos: Pos | None = None, feature: str | None = None) -> Value | None:
        """Write ``key=value`` if the target has both; returns what was written (a
        fallback value, or None when nothing was)."""
        if self.ctx.open(section, key):
            self._store(section, ((key, value),))
            return value
        if (section, key) not in _EMITTED:
            raise ValueError(f"[{section}] {key}= is not in plan.EMITTED")  # a jobgen bug
        pos, feature = pos or self.ctx.pos, feature or key
        if not self.supported(section, key, pos, feature):
            return None
        gated = self._gated(section, key, value, pos, feature)
        if gated is not None:
            self._store(section, ((key, gated),))
        return gated

    def _store(self, section: str, rows: tuple[tuple[str, Value], ...]) -> None:
        """The one place directives are stored: only what came through ``set``."""
        self.sections.setdefault(section, []).extend(rows)
        self.last.update(rows)

    def set_block(self, block: "_Block", pos: Pos) -> None:
        """Write a block worked out once for the target (``_block``): its rows as they
        came through ``set``, its notes at ``pos``, as ``set`` row by row would have."""
        for section, rows in block.sections:
            self._store(section, rows)
        for message in block.notes:
            self.ctx.note(pos, message)

    def freeze(self, comment: str = "") -> UnitFile:
        order = ("Unit", "Service", "Timer", "Path", "Install")
        sections = tuple((s, tuple(self.sections[s])) for s in order if s in self.sections)
        return UnitFile(self.filename, self.kind, sections, comment=comment)


class _Texts(Mapping[str, str]):
    """A unit's directives -> the _text of their last value, made when a value gate that
    reads the unit asks (target.MATCHERS_READING_UNIT), not on every ``set``."""

    def __init__(self, last: dict[str, Value]):
        self._last = last

    def __getitem__(self, key: str) -> str:
        return _text(self._last[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._last)

    def __len__(self) -> int:
        return len(self._last)


@functools.lru_cache(maxsize=None)
def _open(target: Target, section: str, key: str) -> bool:
    """True if ``set`` has nothing to ask for ``key=`` on ``target``: jobgen writes it,
    every release of the target has it, and no value of it is gated (target.VALUE_GATES)
    for the target. Most directives on most targets are: 1,000 jobs ask this 25,000 times."""
    return (section, key) in _EMITTED and target.lacking(section, key) is None and not target.value_gates_lacked(section, key)


class _Block:
    """Directives worked out once per target: what ``set`` wrote, row by row, and the
    notes it made (fallbacks, which do not name the job), and the rows by section, in
    order (_Unit._store). Made once per target and row set, read for every unit."""

    __slots__ = ("rows", "notes", "sections")

    def __init__(self, rows: tuple[tuple[str, str, Value], ...], notes: tuple[str, ...]):
        self.rows, self.notes = rows, notes
        self.sections = tuple(
            (section, tuple((key, value) for s, key, value in rows if s == section))
            for section in dict.fromkeys(s for s, _, _ in rows)
        )


@functools.lru_cache(maxsize=None)
def _block(target: Target, rows: tuple[tuple[str, str, Value], ...]) -> _Block | None:
    """``rows`` through ``set`` on a unit of their own, once per target; None when the
    answer would depend on the unit or the job (a gate that reads the rest of the unit, or
    an error, which names the job): then each unit asks ``set`` itself."""
    for section, key, _ in rows:
        if any(gate.match in MATCHERS_READING_UNIT for gate in target.value_gates_lacked(section, key)):
            return None
    ctx = _Context(target, DEFAULT_HOLDER, Pos("", 0, 0))
    unit = _Unit(ctx, "", "service")
    written = []
    for section, key, value in rows:
        if (done := unit.set(section, key, value)) is not None:
            written.append((section, key, done))
    if ctx.diags:
        return None
    # Each note as often as set made it: the manifest's note counts every one.
    return _Block(tuple(written), tuple(message for message, (_, count) in ctx._noted.items() for _ in range(count)))


class _Context:
    def __init__(self, target: Target, holder: str, pos: Pos):
        self.target, self.holder, self.pos = target, holder, pos
        self.what = ""  # "job 'x'" / "worker 'y'": how messages name what they are about
        self.diags: list[Diagnostic] = []
        self._noted: dict[str, list] = {}  # message -> [first position, count]
        # _open and _block per directive and per row set, kept here for this plan's one
        # target: asked of the lru_caches, each question hashed the Target (and a block's
        # every row) again, some 25 times a job.
        self._open: dict[tuple[str, str], bool] = {}
        self._blocks: dict[str, _Block | None] = {}
        self._lacking: dict[tuple[str, str], str | None] = {}

    def open(self, section: str, key: str) -> bool:
        """_open(self.target, section, key), once per plan."""
        known = self._open.get((section, key))
        if known is None:
            known = self._open[section, key] = _open(self.target, section, key)
        return known

    def lacking(self, section: str, key: str) -> str | None:
        """self.target.lacking(section, key), once per plan."""
        if (section, key) not in self._lacking:
            self._lacking[section, key] = self.target.lacking(section, key)
        return self._lacking[section, key]

    def block(self, name: str, rows: tuple[tuple[str, str, Value], ...]) -> "_Block | None":
        """_block(self.target, rows) for the rows ``name`` stands for, once per plan."""
        if name not in self._blocks:
            self._blocks[name] = _block(self.target, rows)
        return self._blocks[name]

    def error(self, pos: Pos, message: str) -> None:
        self.diags.append(Diagnostic(pos, ERROR, message))

    def note(self, pos: Pos, message: str) -> None:
        # One note per fallback per manifest, at its first place: a fallback is a fact
        # about the target, and 1,000 jobs must not print it 1,000 times.
        seen = self._noted.setdefault(message, [pos, 0])
        seen[0] = min(seen[0], pos)
        seen[1] += 1

    def notes(self) -> list[Diagnostic]:
        return [
            Diagnostic(pos, NOTE, message if count == 1 else f"{message} (and {count - 1} more in this manifest)")
            for message, (pos, count) in self._noted.items()
        ]


@functools.lru_cache(maxsize=1024)  # a Raw is frozen: jobs share their few time spans (AccuracySec=1s...)
def _span(usec: int) -> Raw:
    return Raw(timespec.format_timespan(usec))


# --------------------------------------------------------------------------- common keys


# How a simple key's model value becomes its directive's values (validate.Writes.render).
# None, False, 0 and empty write nothing.
_RENDER: dict[str, Callable[[Any], list[Value]]] = {
    "text": lambda v: [Raw(v)],
    "number": lambda v: [Raw(str(v))],
    "span": lambda v: [_span(v)],
    "yes": lambda v: [Raw("yes")],
    # specifiers=True: names.UNIT_REF admits only %n %N %p %P %i %I, meant as specifiers.
    "units": lambda v: [Raw(unit, specifiers=True) for unit in v],
    "environment": lambda v: [Env(name, value) for name, value in v],
    "each": lambda v: [Raw(item) for item in v],  # one directive line per item
}


def _write_keys(units: dict[str, _Unit], c: Common, table: dict[str, Key]) -> None:
    """Walk the key table: each simple key the job or worker set goes, through the one
    gate in _Unit.set, into the unit that holds its section (``units``: section -> unit)."""
    for key, field_name, section, directive, render in _writing_keys(table):
        value = getattr(c, field_name)
        if value is None or value is False or value == () or value == "":
            continue
        unit = units[section]
        for rendered in render(value):
            unit.set(section, directive, rendered, c.where(key), key)


_WRITING: dict[int, tuple[dict[str, Key], tuple[tuple[str, str, str, str, Callable[[Any], list[Value]]], ...]]] = {}


def _writing_keys(table: dict[str, Key]) -> tuple[tuple[str, str, str, str, Callable[[Any], list[Value]]], ...]:
    """The table's simple keys in order, as (key, field, section, directive, render):
    the rows _write_keys walks for every job, picked out of the table once."""
    known = _WRITING.get(id(table))
    if known is None or known[0] is not table:
        rows = tuple((key, spec.field, spec.writes.section, spec.writes.directive, _RENDER[spec.writes.render])
                     for key, spec in table.items() if spec.writes is not None)
        known = _WRITING[id(table)] = (table, rows)
    return known[1]


@functools.lru_cache(maxsize=None)
def _hardening_rows(profile: str) -> tuple[tuple[str, str, Raw], ...]:
    """A profile's directives in order, once per profile (every job of a manifest asks)."""
    chosen: dict[str, list[str]] = {}
    for section, key, value in HARDENING[profile]:
        # A later row for a single-valued key replaces the earlier one (strict's
        # ProtectSystem=strict over default's full); list-valued keys accumulate.
        if key == "SystemCallFilter":
            chosen.setdefault(key, []).append(value)
        else:
            chosen[key] = [value]
    return tuple(("Service", key, Raw(value)) for key, values in chosen.items() for value in values)


def _hardening(u: _Unit, c: Common, writable: tuple[str, ...] = ()) -> None:
    pos = c.where("hardening")
    rows = _hardening_rows(c.hardening)
    # The profile's gates are the same for every job of a target: asked once (_block).
    block = u.ctx.block(c.hardening, rows)
    if block is not None:
        u.set_block(block, pos)
        if not writable:
            return
        written = {key: value for _, key, value in block.rows}
    else:
        feature = f"hardening: {c.hardening}"
        written = {key: u.set("Service", key, value, pos, feature) for _, key, value in rows}
    # Only ProtectSystem=strict makes the file system read-only; a target without it
    # gets full (VALUE_FALLBACKS), under which /run stays writable.
    if writable and written.get("ProtectSystem") == Raw("strict"):
        for path in writable:
            u.set("Service", "ReadWritePaths", Raw(escape.path_word(path)))  # a lock.path may hold a space


# --------------------------------------------------------------------------- jobs


def _lock_argv(ctx: _Context, job: Job) -> tuple[tuple[str, ...], str | None]:
    """The lock wrapper in front of the job's argv, and the host lock file if any."""
    lock = job.lock
    wait = timespec.seconds_ceiling(job.wait_usec) if job.wait_usec else None
    if lock is None or lock.kind.wrapper == "none":
        return job.command, None
    if lock.kind.wrapper == "flock":
        path = lock.path or names.lock_file(lock.name)
        mode = ("--wait", str(wait)) if wait else ("--nonblock",)
        # No --close: the job keeps the lock's file descriptor, so if flock itself is
        # killed the lock stays held until the job is gone too (never two at once).
        return (FLOCK, *mode, "--conflict-exit-code", str(CONFLICT_EXIT), path, *job.command), path
    argv = [ctx.holder, "lock", "--backend", lock.backend or "", "--name", lock.name, "--job", job.name]
    if wait:
        argv += ["--wait", str(wait)]
    if lock.ttl_usec:
        argv += ["--ttl", str(timespec.seconds_ceiling(lock.ttl_usec))]
    if lock.credential:
        argv += ["--password-file", "${CREDENTIALS_DIRECTORY}/" + lock.credential.split(":", 1)[0]]
    elif lock.password_file:
        argv += ["--password-file", lock.password_file]
    return (*argv, "--", *job.command), None


def _defer(job: Job) -> bool:
    # systemd.timer(5): DeferReactivation= acts on OnCalendar= only. A waiting policy
    # wants the queued run; 'allow' has no lock to protect.
    return job.schedule.kind == "calendar" and job.policy.defers_overrun


def _emulate_defer(ctx: _Context, timer: _Unit, job: Job) -> bool:
    """DeferReactivation=yes where the target has it; else whether to emulate it."""
    reason = ctx.lacking("Timer", "DeferReactivation")
    if reason is None:
        timer.set("Timer", "DeferReactivation", Raw("yes"))
        return False
    pos = job.where("overlap")
    if ctx.lacking("Service", "ExecCondition") is None:
        ctx.note(pos, f"DeferReactivation= {reason}: {FALLBACKS[('Timer', 'DeferReactivation')]}")
        return True
    ctx.note(pos, f"DeferReactivation= {reason}, and its emulation needs ExecCondition= (243): "
             "a run that overruns a calendar slot is followed by one catch-up run (README: Overrun)")
    return False


def _mail_on_failure(ctx: _Context, svc: _Unit, job: Job) -> None:
    """OnFailure= to the mail template's instance for this unit and address (compiler/notify.py)."""
    for section, key, value in _mail_directives(ctx, job, svc.filename):
        svc.set(section, key, value, job.where("mail_on_failure"), "mail_on_failure")


def _mail_directives(ctx: _Context, job: Job, unit: str) -> tuple[tuple[str, str, Value], ...]:
    """The OnFailure= that mails `unit`'s failure, when the job asks for it (a queue job's
    drainer is renamed after _job_files: it asks with its own name)."""
    if not job.mail_on_failure:
        return ()
    mail = notify.mail_unit(unit, job.mail_on_failure)
    if len(mail) > notify.UNIT_NAME_MAX:
        ctx.error(job.where("mail_on_failure"), f"{ctx.what}: 'mail_on_failure': the unit that mails the failure, {mail}, "
                  f"would be {len(mail)} characters; systemd refuses unit names over {notify.UNIT_NAME_MAX} "
                  "(shorten the job name or the address)")
        return ()
    return (("Unit", "OnFailure", Raw(mail)),)


def _mail_template(jobs: tuple[Job, ...]) -> list[UnitFile]:
    """The mail template, once per output, when any job mails (templates/mail.j2)."""
    if not any(j.mail_on_failure for j in jobs):
        return []
    return [UnitFile(notify.MAIL_TEMPLATE, "mail", comment="mails a failed unit's status (mail_on_failure)")]


def _job_files(ctx: _Context, job: Job) -> tuple[list[UnitFile], RunSpec, list[str]]:
    ctx.pos, ctx.what = job.pos, f"job '{job.name}'"
    argv, lockfile = _lock_argv(ctx, job)
    stamp = names.stamp_file(job.name)
    description = job.description or f"jobgen job {job.name}"

    timer = _Unit(ctx, f"{job.name}.timer", "timer")
    timer.set("Unit", "Description", Raw(f"Schedule for {job.name}: {description}"))
    sched = job.schedule
    if sched.kind == "calendar":
        # A time zone (235) or '~' (233) in the expression is gated by set, at the key that wrote it.
        asked = "timezone" if "timezone" in job.keypos else "schedule"
        # A list: one OnCalendar= line per expression, in the order written (systemd.timer(5):
        # the timer elapses at each; the order changes nothing but keeps the bytes stable).
        for expression in sched.calendars:
            timer.set("Timer", "OnCalendar", Raw(expression), job.where(asked), asked)
    elif sched.kind == "every":
        # Runs start every N: the first N after the timer starts, then N after each start.
        # With overlap: skip the interval is counted from the end of the previous run
        # (OnUnitInactiveSec=), so an overrun never triggers an immediate second run.
        timer.set("Timer", "OnActiveSec", _span(sched.usec or 0))
        key = "OnUnitInactiveSec" if job.policy.every_from_end else "OnUnitActiveSec"
        timer.set("Timer", key, _span(sched.usec or 0))
    else:
        timer.set("Timer", "OnBootSec", _span(sched.usec or 0))
    emulate_defer = _defer(job) and _emulate_defer(ctx, timer, job)
    accuracy = job.accuracy_usec
    if emulate_defer and accuracy is None:
        accuracy = 1_000_000
    if accuracy is not None:
        timer.set("Timer", "AccuracySec", _span(accuracy), job.where("accuracy"), "accuracy")

    svc = _Unit(ctx, f"{job.name}.service", "service")
    svc.set("Unit", "Description", Raw(description))
    svc.set("Service", "Type", Raw("oneshot"))
    _write_keys({"Unit": svc, "Service": svc, "Timer": timer}, job, JOB_KEYS)
    _mail_on_failure(ctx, svc, job)
    if job.lock is not None and job.lock.kind.server:
        # The lock server is on the network: at boot a timer (Persistent=, OnBootSec=) can
        # start the job before it is reachable (systemd.special(7) network-online.target).
        svc.set("Unit", "Wants", Raw("network-online.target"))
        svc.set("Unit", "After", Raw("network-online.target"))
    timer.set("Install", "WantedBy", Raw("timers.target"))
    if emulate_defer:
        svc.set("Service", "ExecCondition", Exec((SH, "-c", DEFER_CHECK, "jobgen-defer", stamp)), job.where("overlap"), "overlap: skip (DeferReactivation emulation)")
    svc.set("Service", "ExecStart", Exec(argv))
    policy = job.policy
    reporter = (SH, "-c", REPORTER, "jobgen-report", job.name, policy.name, stamp if emulate_defer else "", policy.conflict_outcome)
    # '-': a reporter that cannot log must not turn a good run into a failed unit.
    svc.set("Service", "ExecStopPost", Exec(reporter, prefix="-"))
    scope = job.lock.kind if job.lock is not None else None
    if scope is not None and scope.conflict_is_success:
        svc.set("Service", "SuccessExitStatus", Raw(str(CONFLICT_EXIT)))
    if scope is not None and scope.kill_mode:
        svc.set("Service", "KillMode", Raw(scope.kill_mode))
    if job.lock is not None and job.lock.credential:
        svc.set("Service", "LoadCredential", Raw(job.lock.credential), job.where("lock"), "lock.credential")
    # A oneshot's run time is bounded by TimeoutStartSec= (RuntimeMaxSec= does nothing for
    # oneshot, systemd.service(5)); the lock wait counts inside it.
    if job.timeout_usec:
        svc.set("Service", "TimeoutStartSec", _span(job.timeout_usec + (job.wait_usec or 0)))
    else:
        svc.set("Service", "TimeoutStartSec", Raw("infinity"))
    writable = {os.path.dirname(lockfile)} if lockfile else set()
    if emulate_defer:
        writable.add(names.LOCK_DIR)
    _hardening(svc, job, writable=tuple(sorted(writable)))

    tmpfiles = []
    if lockfile:
        tmpfiles.append(_tmpfile(lockfile, job))
    if emulate_defer:
        tmpfiles.append(_tmpfile(stamp, job))
    comment = f"job {job.name}: overlap={job.overlap}, lock={job.lock.scope if job.lock else 'none'}"
    service = svc.freeze(comment)
    # `jobgen run` reads its process context from the unit itself (context.CONTEXT), makes
    # the lock file from the snippet's own lines, and names a conflict as the reporter does.
    lock_files = (LOCK_DIR_LINE, tmpfiles[0]) if lockfile else ()
    run = functools.partial(process_context, service.sections, lock_file=lockfile, lock_files=lock_files,
                            conflict_outcome=policy.conflict_outcome)
    return [service, timer.freeze(comment)], run, tmpfiles


# The lock directory is created with a deliberate owner and mode, once, by systemd-tmpfiles
# (the snippet's first line; `jobgen run` applies it with the job's lock file line).
# 0755 root: only root creates, renames or removes a lock file in it (see LOCK_DIR).
LOCK_DIR_LINE = f"d {escape.tmpfiles_path(names.LOCK_DIR)} 0755 root root -"


def _tmpfile(path: str, c: Common) -> str:
    # systemd-tmpfiles(8) 'f': create if missing, never truncate or age it. Mode 0600 owned by
    # the job's user: flock(1) needs only to open the file (read-only is enough), so whoever can
    # open it can hold the lock and make every run exit 75 ("skipped", counted as success).
    # Only the job's user and root can; not its group, not other users (README: Threat model).
    # The group field is root: with 0600 it grants nothing, and a group name is not needed.
    return f"f {escape.tmpfiles_path(path)} 0600 {c.user or 'root'} root -"


# --------------------------------------------------------------------------- overlap: queue

# Host-scope spools live on disk across reboots (/var/lib, not /run): a request that was
# reported as enqueued must still be there after a crash or a reboot.
QUEUE_DIR = queue_contract.SPOOL_DIR


def _queue_store(job: Job) -> tuple[str, ...]:
    """Where the job's requests are kept, as `jobgen enqueue|drain|queue` options."""
    lock = job.lock
    assert lock is not None and job.queue is not None  # validate: a queue job has a lock
    if lock.kind.server:
        store = ["--backend", lock.backend or "", "--name", lock.name]
        if lock.credential:
            store += ["--password-file", "${CREDENTIALS_DIRECTORY}/" + lock.credential.split(":", 1)[0]]
        elif lock.password_file:
            store += ["--password-file", lock.password_file]
    else:
        store = ["--spool", f"{QUEUE_DIR}/{job.name}"]
    q = job.queue
    bounds = ["--max-pending", str(q.max_pending), "--on-full", q.on_full, "--max-attempts", str(q.max_attempts)]
    return (*store, "--job", job.name, *bounds)


def _adding(ctx: _Context, unit: UnitFile, *directives: tuple[str, str, Value]) -> dict[str, list[tuple[str, Value]]]:
    """Directives to add to a frozen unit, each through the one gate (_Unit.set)."""
    probe = _Unit(ctx, unit.filename, unit.kind)
    for section, key, value in directives:
        probe.set(section, key, value)
    return probe.sections


def _spool_writable(unit: UnitFile, spool: str | None) -> tuple[tuple[str, str, Value], ...]:
    """ReadWritePaths= for the spool where the hardening made the file system read-only."""
    strict = any(k == "ProtectSystem" and v == Raw("strict") for _, d in unit.sections for k, v in d)
    return (("Service", "ReadWritePaths", Raw(spool)),) if spool and strict else ()


def _without(unit: UnitFile, drop: set[tuple[str, str]], add: dict[str, list[tuple[str, Value]]]) -> UnitFile:
    sections = []
    for name, directives in unit.sections:
        kept = tuple((k, v) for k, v in directives if (name, k) not in drop)
        sections.append((name, kept + tuple(add.get(name, []))))
    return unit._replace(sections=tuple(sections))


def _queue_files(ctx: _Context, job: Job) -> tuple[list[UnitFile], RunSpec, list[str], tuple[str, ...]]:
    """overlap: queue -> NAME.timer + NAME.service (records a request and returns at once)
    + NAME-drain.service (runs the requests one at a time under the job's lock)
    + NAME-drain.path (host scope: starts the drainer when the spool has work)."""
    store = _queue_store(job)
    enqueue = (ctx.holder, "enqueue", *store, "--by")
    # `timeout` bounds each request (the drainer stops it, exit 124); the drain unit has none.
    per_request = ("--timeout", str(timespec.seconds_ceiling(job.timeout_usec))) if job.timeout_usec else ()
    drain_cmd = (ctx.holder, "drain", *store, *per_request, "--", *job.command)
    # The enqueuer: the job's timer, user, environment and hardening, no lock (enqueue takes
    # the spool's own short lock), no reporter (enqueue logs enqueued/rejected itself).
    enq_job = job.replace(command=(*enqueue, queue_contract.BY_UNIT), overlap=policies.ALLOW, lock=None, queue=None, timeout_usec=60_000_000)
    units, enq_run, _ = _job_files(ctx, enq_job)
    drainer = f"{job.name}-drain.service"
    spool = f"{QUEUE_DIR}/{job.name}" if job.lock is not None and job.lock.kind.lock_file else None
    units = [u._replace(comment=f"job {job.name}: overlap=queue: each trigger records a request") for u in units]
    # A cluster queue's enqueuer talks to the lock server too (the drainer gets this with
    # its lock, in _job_files).
    network: tuple[tuple[str, str, Value], ...] = ()
    if job.lock is not None and job.lock.kind.server:
        network = (("Unit", "Wants", Raw("network-online.target")), ("Unit", "After", Raw("network-online.target")))
    units = [
        _without(u, {("Service", "ExecStopPost")}, _adding(ctx, u, ("Unit", "Wants", Raw(drainer)), *network, *_spool_writable(u, spool)))
        if u.kind == "service" else u
        for u in units
    ]
    # The drainer: the job's lock around `jobgen drain`; it loops until the queue is empty.
    # No TimeoutStartSec from 'timeout': one drain runs many requests (each one is bounded).
    drain_job = job.replace(command=drain_cmd, overlap=policies.SKIP, timeout_usec=None, schedule=job.schedule._replace(kind="every"),
                        mail_on_failure=None)  # added below, under the drainer's own name
    drain_units, _, lines = _job_files(ctx, drain_job)
    (svc,) = [u for u in drain_units if u.kind == "service"]
    svc = svc._replace(filename=drainer, comment=f"job {job.name}: drains its queue, one request at a time under its lock")
    # Type=exec (240+), not oneshot: a oneshot's start job lasts until the drain ends, and
    # systemd counts boot as finished only when no job is left (src/core/manager.c
    # manager_check_finished), so a backlog found by the .path unit at boot held up
    # `Startup finished`, multi-user.target's time and `is-system-running --wait` (seen on
    # 252 and 257). With exec the start job ends once the drainer is running
    # (systemd.service(5) Type=); the drain itself is unbounded (no TimeoutStartSec=).
    _adding(ctx, svc, ("Service", "Type", Raw("exec")))  # through the gate; set in place below
    svc = _without(svc, {("Service", "ExecStopPost"), ("Service", "TimeoutStartSec")},
                   _adding(ctx, svc, ("Unit", "After", Raw(f"{job.name}.service")), *_spool_writable(svc, spool),
                           *_mail_directives(ctx, job, drainer)))
    svc = svc._replace(sections=tuple((name, tuple((k, Raw("exec") if (name, k) == ("Service", "Type") else v) for k, v in d))
                                      for name, d in svc.sections))
    files = [*units, svc]
    if spool is not None:
        path = _Unit(ctx, f"{job.name}-drain.path", "path")
        path.set("Unit", "Description", Raw(f"Work waiting in the queue of {job.name}"))
        # systemd.path(5): DirectoryNotEmpty= starts the unit while the folder has entries,
        # and checks again when the unit stops, so a request that came in as a drain was
        # finishing is not left behind.
        path.set("Path", "DirectoryNotEmpty", Raw(f"{spool}/{queue_contract.PENDING}"))
        path.set("Path", "Unit", Raw(drainer))
        path.set("Install", "WantedBy", Raw("paths.target"))
        files.append(path.freeze(f"job {job.name}: queue watch"))
        # `user: root` is no user: (an imported root job names it): root's group, not '-'.
        owner, group = job.user or "root", job.group or ("root" if job.user in (None, "root") else "-")
        lines += ["d /var/lib/jobgen 0755 root root -", f"d {QUEUE_DIR} 0755 root root -"]
        lines += [f"d {spool}{sub} 0700 {owner} {group} -" for sub in ("", *(f"/{d}" for d in queue_contract.SPOOL_FOLDERS))]
    run = lambda: enq_run()._replace(argv=(*enqueue, "jobgen run"))  # noqa: E731 - the enqueuer unit's context
    return files, run, lines, store


# --------------------------------------------------------------------------- workers


def _worker_files(ctx: _Context, w: Worker) -> list[UnitFile]:
    ctx.pos, ctx.what = w.pos, f"worker '{w.name}'"
    template = w.instances > 1
    name = f"{w.name}@.service" if template else f"{w.name}.service"
    description = w.description or f"jobgen worker {w.name}"
    svc = _Unit(ctx, name, "service")
    # A template's instances show their number in the journal and `systemctl status`
    # (%i, systemd.unit(5) SPECIFIERS); the user's text keeps its '%' literal.
    title = Raw(description.replace("%", "%%") + " (instance %i)", specifiers=True) if template else Raw(description)
    svc.set("Unit", "Description", title)
    _write_keys({"Unit": svc, "Service": svc}, w, WORKER_KEYS)
    if template:
        # PartOf=: stopping or restarting NAME.target reaches every instance.
        svc.set("Unit", "PartOf", Raw(f"{w.name}.target"))
        # After=NAME.target: units stop in the reverse of their start order (systemd.unit(5),
        # After=/Before=), so the target's stop job waits for every instance's, and
        # `systemctl stop NAME.target` returns once they have all exited. Without it the
        # target has the implicit After= on what it Wants= (systemd.target(5), default
        # dependencies) and stops first, returning while the instances still run (seen on 252
        # and 257). systemd skips that implicit After= when it would contradict an explicit
        # order (src/core/unit.c unit_add_default_target_dependency, "Don't create loops").
        svc.set("Unit", "After", Raw(f"{w.name}.target"))
    svc.set("Service", "ExecStart", Exec(w.command))
    # Graceful stop (systemd.kill(5)): the stop signal (stop_signal, KillSignal=) to the main
    # process only, then after TimeoutStopSec= (stop_timeout) SIGKILL to everything left.
    svc.set("Service", "KillMode", Raw("mixed"))
    _hardening(svc, w)
    files = []
    if template:
        tgt = _Unit(ctx, f"{w.name}.target", "target")
        tgt.set("Unit", "Description", Raw(f"{description} ({w.instances} instances)"))
        for i in range(1, w.instances + 1):
            tgt.set("Unit", "Wants", Raw(f"{w.name}@{i}.service"))
        tgt.set("Install", "WantedBy", Raw("multi-user.target"))
        files.append(tgt.freeze(f"worker {w.name}: {w.instances} instances"))
    else:
        svc.set("Install", "WantedBy", Raw("multi-user.target"))
    files.append(svc.freeze(f"worker {w.name}"))
    return files


# --------------------------------------------------------------------------- entry point


def plan(manifest: Manifest, holder: str = DEFAULT_HOLDER) -> Plan:
    """Raise ManifestError when a feature cannot be expressed for the target."""
    assumed = manifest.target is None
    target = manifest.target or parse_target(DEFAULT_TARGET)
    ctx = _Context(target, holder, manifest.target_pos or (manifest.jobs or manifest.workers)[0].pos)
    files: list[UnitFile] = []
    runs: dict[str, Callable[[], RunSpec]] = {}
    tmp_lines: list[str] = []
    queues: dict[str, tuple[str, ...]] = {}
    journal_units: dict[str, tuple[tuple[str, str], ...]] = {}
    for job in manifest.jobs:
        if job.policy.queues:
            units, run, lines, queues[job.name] = _queue_files(ctx, job)
        else:
            units, run, lines = _job_files(ctx, job)
        files += units
        runs[job.name] = run
        kind = outcomes.QUEUE_UNIT if job.policy.queues else outcomes.RUN_UNIT
        journal_units[job.name] = tuple((u.filename, kind) for u in units if u.kind == "service")
        tmp_lines += lines
    for worker in manifest.workers:
        files += _worker_files(ctx, worker)
    files += _mail_template(manifest.jobs)
    if tmp_lines:
        # Jobs never create or delete lock files (a lock is the kernel lock on an open
        # file, not the file's existence): systemd-tmpfiles does, from these lines.
        head = [LOCK_DIR_LINE]
        # jobgen-STEM.conf, named by the manifest as limits.py bounds it (one rule, one place).
        name = limits.tmpfiles_name(manifest.path)
        # set(): two queue jobs both name the shared spool parents (systemd-tmpfiles warns
        # "Duplicate line" on a repeated path).
        files.append(UnitFile(f"tmpfiles.d/{name}", "tmpfiles", lines=tuple(head + sorted(set(tmp_lines)))))
    if ctx.diags:  # only errors: notes are kept apart, one per fallback (_Context.note)
        raise ManifestError(ctx.diags + ctx.notes())
    notes = sorted(ctx.notes())
    if assumed:
        notes.insert(0, Diagnostic(manifest.target_pos or Pos(manifest.path, 1, 1), NOTE, f"no target systemd given (target: {{systemd: ...}} or --systemd); assuming {DEFAULT_TARGET}"))
    holder_jobs = tuple((j.name, j.where("overlap") if j.policy.queues else j.where("lock")) for j in manifest.jobs if _execs_holder(j))
    return Plan(manifest=manifest.path, target=target, files=tuple(sorted(files, key=lambda f: f.filename)), notes=tuple(notes),
                runs=_Runs(runs), queues=queues, holder_jobs=holder_jobs, journal_units=journal_units)


def _execs_holder(job: Job) -> bool:
    # _queue_files: enqueue and drain are the holder's; _lock_argv: a "holder" lock wrapper.
    return job.policy.queues or (job.lock is not None and job.lock.kind.wrapper == "holder")
