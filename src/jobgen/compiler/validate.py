"""Stage 2: the str tree from load.py -> the typed model, or every problem at once.

The schema is data: ``JOB_KEYS``/``WORKER_KEYS`` map each manifest key to the model
field it fills and the converter that checks it. A converter raises ``Invalid`` with a
message; ``_convert_keys`` adds the place, the job and the key, and keeps going so the
user sees all problems in one run. Cross-key rules (``overlap: wait`` needs
``wait_timeout``, ...) live in ``_job_rules``/``_worker_rules`` after the per-key pass.
Version gates are not checked here: they depend on the target, in plan.py.
"""

from __future__ import annotations

import difflib
import re
import shlex
import signal as _signal
from dataclasses import dataclass
from typing import Any, Callable
from zoneinfo import available_timezones

from jobgen.compiler import names, timespec
from jobgen.compiler.diagnostics import ERROR, WARNING, Diagnostic, ManifestError, Pos
from jobgen.compiler.escape import CONTROL
from jobgen.compiler.load import Map, Node, Scalar, Seq
from jobgen.compiler.model import (
    HARDENING_PROFILES,
    LOCK_SCOPES,
    OVERLAP_POLICIES,
    Job,
    Lock,
    Manifest,
    Schedule,
    Worker,
)
from jobgen.compiler.directive_table import LAST_RELEASE
from jobgen.compiler.target import Target, parse_target
from jobgen.contract import locks

MANIFEST_VERSION = "1"
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class Invalid(Exception):
    def __init__(self, message: str, pos: Pos | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos


# --------------------------------------------------------------------------- converters
# Each takes a node and returns a value or raises Invalid. They know nothing of jobs.


def _scalar(node: Node, what: str = "a string") -> str:
    if not isinstance(node, Scalar) or node.is_null:
        raise Invalid(f"expected {what}, got {_kind(node)}")
    if problem := control_problem(node.value):
        raise Invalid(problem)
    return node.value


def control_problem(value: str) -> str | None:
    """Why ``value`` cannot go into a unit file, naming the character, or None.

    A newline or other control character would end the directive and let the rest of
    the value become a directive of its own (systemd.syntax(7)).
    """
    m = CONTROL.search(value)
    if m is None:
        return None
    ch = m.group()
    if ch in "\n\r\u2028\u2029":
        # The usual cause is a YAML block scalar ('|' keeps line breaks, '>' keeps the last).
        return "must be one line, but contains a line break (write it on one line, or fold it with '>-')"
    if problem := _surrogate_problem(ch):
        return problem
    if ch >= "\ufdd0":
        return f"contains the Unicode noncharacter U+{ord(ch):04X}, which systemd refuses in a unit file"
    return f"contains the control character U+{ord(ch):04X}, which a unit file cannot carry"


def _surrogate_problem(text: str) -> str | None:
    m = _SURROGATE.search(text)
    if m is None:
        return None
    # YAML "\ud83d\ude00" is two lone UTF-16 halves, not the emoji: no UTF-8 form exists.
    return (
        f"contains U+{ord(m.group()):04X}, half of a UTF-16 surrogate pair, which is not a character; "
        "write the character itself (or \\U0001F600 style in double quotes)"
    )


def _kind(node: Node) -> str:
    if isinstance(node, Map):
        return "a mapping"
    if isinstance(node, Seq):
        return "a list"
    return "nothing" if node.is_null else f"'{node.value}'"


def text_line(node: Node) -> str:
    value = _scalar(node, "one line of text")
    if not value.strip():
        raise Invalid("must not be empty")
    return value.strip()


def abs_path(node: Node) -> str:
    value = _scalar(node, "an absolute path")
    if not value.startswith("/"):
        raise Invalid(f"must be an absolute path, got '{value}'")
    return value


def optional_abs_path(node: Node) -> str:
    """EnvironmentFile= style: '-/path' means 'ignore if missing' (systemd.exec(5))."""
    value = _scalar(node, "an absolute path")
    if not value.lstrip("-").startswith("/"):
        raise Invalid(f"must be an absolute path (optionally prefixed with '-'), got '{value}'")
    return value


def timespan(node: Node) -> int:
    value = _scalar(node, "a time span such as 30s or 5min")
    try:
        usec = timespec.parse_timespan(value)
    except ValueError as exc:
        # timespec says "why in 'X'"; the value is quoted once here.
        why = str(exc).removesuffix(f" in {value!r}")
        raise Invalid(f"invalid time span '{value}': {why} (systemd.time(7), e.g. 30s, 5min, 1h 30min)") from None
    if usec <= 0:
        raise Invalid(f"time span must be greater than zero, got '{value}'")
    return usec


_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


def boolean(node: Node) -> bool:
    value = _scalar(node, "true or false").lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise Invalid(f"expected true or false, got '{value}'")


def choice(*allowed: str) -> Callable[[Node], str]:
    def convert(node: Node) -> str:
        value = _scalar(node, "one of " + ", ".join(allowed))
        if value not in allowed:
            raise Invalid(f"must be one of {', '.join(allowed)}; got '{value}'{_did_you_mean(value, allowed)}")
        return value

    return convert


def positive_int(node: Node) -> int:
    value = _scalar(node, "a whole number")
    if not value.isdigit() or int(value) < 1:
        raise Invalid(f"expected a whole number >= 1, got '{value}'")
    return int(value)


def argv(node: Node) -> tuple[str, ...]:
    """A list of strings, or one string split by POSIX shell rules (no shell runs it)."""
    if isinstance(node, Seq):
        words = []
        for item in node.items:
            if isinstance(item, Scalar) and item.is_null:
                shown = f"'{item.value}'" if item.value else "an empty item"
                raise Invalid(f"{shown} is YAML null, not an argument; quote it (\"{item.value}\") to pass the text", item.pos)
            if not isinstance(item, Scalar):
                raise Invalid(f"every command argument must be a string, got {_kind(item)}", item.pos)
            if "\x00" in item.value:
                raise Invalid("a command argument cannot contain a NUL byte", item.pos)
            # Other control characters are C-escaped in Exec lines (escape.py); these cannot be.
            if problem := _surrogate_problem(item.value):
                raise Invalid(f"a command argument {problem}", item.pos)
            words.append(item.value)
    else:
        text = _scalar(node, "a command (a list of arguments or a string)")
        try:
            words = shlex.split(text, posix=True)
        except ValueError as exc:
            raise Invalid(f"cannot split command: {exc}") from None
    if not words:
        raise Invalid("the command is empty")
    if not words[0].startswith("/"):
        # systemd would resolve a bare name against its own fixed PATH, not the shell's;
        # an absolute path makes verification and behaviour the same everywhere.
        raise Invalid(
            f"the program must be an absolute path, got '{words[0]}' "
            f"(`command -v {words[0]}` on the target host prints it)"
        )
    return tuple(words)


def environment(node: Node) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, Map):
        raise Invalid(f"expected a mapping of NAME: value, got {_kind(node)}")
    pairs = []
    for key, value in node.items:
        if not names.ENV_NAME.fullmatch(key.value):
            raise Invalid(
                f"'{key.value}' is not a valid variable name (letters, digits and '_', not starting with a digit)",
                key.pos,
            )
        if not isinstance(value, Scalar):
            raise Invalid(f"the value of {key.value} must be a string, got {_kind(value)}", value.pos)
        if value.is_null:
            # 'NAME:' or 'NAME: ~' is YAML's null, not a value: say which one was meant.
            raise Invalid(f"{key.value} has no value (YAML null); write {key.value}: '' for an empty one", key.pos)
        if problem := control_problem(value.value):
            raise Invalid(f"the value of {key.value} {problem}", value.pos)
        pairs.append((key.value, value.value))
    return tuple(sorted(pairs))


def unit_names(node: Node) -> tuple[str, ...]:
    items = node.items if isinstance(node, Seq) else (node,)
    units = []
    for item in items:
        value = _scalar(item, "a unit name")
        if not names.UNIT_REF.fullmatch(value):
            raise Invalid(f"'{value}' is not a unit name such as alert@%n.service or page-ops.service", item.pos)
        units.append(value)
    return tuple(units)


def user_name(node: Node) -> str:
    value = _scalar(node, "a user or group name")
    if not names.USER_NAME.fullmatch(value):
        raise Invalid(f"'{value}' is not a valid user or group name (systemd.exec(5) User=)")
    return value


def memory_size(node: Node) -> str:
    value = _scalar(node, "a size such as 512M or 2G")
    number, unit = value[:-1], value[-1:]
    if value.isdigit() or (unit in "KMGT" and number.isdigit()) or (unit == "%" and number.isdigit()):
        return value
    raise Invalid(f"expected a size such as 512M, 2G or 50%, got '{value}'")


def stop_signal(node: Node) -> str:
    value = _scalar(node, "a signal name such as SIGTERM").upper()
    if not value.startswith("SIG"):
        value = "SIG" + value
    if value not in _signal.Signals.__members__ or value in ("SIGKILL", "SIGSTOP"):
        raise Invalid(f"'{value}' is not a signal a worker can handle (SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, ...)")
    return value


def timezone(node: Node) -> str:
    value = _scalar(node, "a time zone such as Europe/Berlin")
    if value != "UTC" and value not in _zones():
        raise Invalid(f"unknown time zone '{value}'{_did_you_mean(value, sorted(_zones()))}")
    return value


_ZONES: set[str] = set()


def _zones() -> set[str]:
    if not _ZONES:
        _ZONES.update(available_timezones())
    return _ZONES


def calendar(node: Node) -> Schedule:
    value = _scalar(node, "an OnCalendar= expression such as '*-*-* 02:30:00' or hourly")
    try:
        cal = timespec.parse_calendar(value)
    except ValueError as exc:
        # timespec says "invalid calendar spec 'X': why"; the value is quoted once here.
        why = str(exc).removeprefix(f"invalid calendar spec {value!r}: ")
        raise Invalid(
            f"invalid calendar expression '{value}': {why} "
            "(systemd.time(7) CALENDAR EVENTS, e.g. daily, 'Mon..Fri 02:30', '*:0/15')"
        ) from None
    return Schedule("calendar", calendar=cal.normalized, has_timezone=cal.timezone is not None)


_SCHEDULE_FORMS = {
    "calendar": calendar,
    "every": lambda n: Schedule("every", usec=timespan(n)),
    "after_boot": lambda n: Schedule("after_boot", usec=timespan(n)),
}


def schedule(node: Node) -> Schedule:
    if isinstance(node, Scalar):
        return calendar(node)
    if not isinstance(node, Map):
        raise Invalid(
            f"expected a calendar expression or a mapping with one of {', '.join(_SCHEDULE_FORMS)}, got {_kind(node)}"
        )
    if len(node.items) != 1:
        written = ", ".join(k.value for k, _ in node.items) or "nothing"
        raise Invalid(
            f"a schedule mapping takes exactly one of {', '.join(_SCHEDULE_FORMS)}; got {written}"
            " (a job has one schedule: make a second job for another one)"
        )
    key, value = node.items[0]
    form = _SCHEDULE_FORMS.get(key.value)
    if form is None:
        raise Invalid(f"unknown schedule form '{key.value}'{_hint(key.value, _SCHEDULE_FORMS)}", key.pos)
    try:
        return form(value)
    except Invalid as exc:
        raise Invalid(exc.message, exc.pos or value.pos) from None


@dataclass(frozen=True)
class LockSpec:
    """The lock as written; completed by ``_job_rules`` once the job is known."""

    scope: str | None = None
    name: str | None = None
    backend: str | None = None
    ttl_usec: int | None = None
    password_file: str | None = None
    credential: str | None = None
    path: str | None = None
    pos: Pos | None = None
    keypos: tuple[tuple[str, Pos], ...] = ()


_LOCK_KEYS: dict[str, Callable[[Node], Any]] = {
    "scope": choice(*LOCK_SCOPES),
    "name": lambda n: _scalar(n, "a lock name"),
    "backend": lambda n: _scalar(n, "a lock server URL"),
    "ttl": timespan,
    "password_file": abs_path,
    "credential": lambda n: _scalar(n, "a credential as NAME:/path"),
    "path": abs_path,
}


_LOCK_FIELDS = {"ttl": "ttl_usec"}  # manifest key -> LockSpec field where they differ


def lock(node: Node) -> LockSpec:
    if isinstance(node, Scalar) and not node.is_null:
        return LockSpec(scope=choice(*LOCK_SCOPES)(node), pos=node.pos)
    if not isinstance(node, Map):
        raise Invalid(f"expected a scope ({', '.join(LOCK_SCOPES)}) or a mapping of {', '.join(_LOCK_KEYS)}; got {_kind(node)}")
    values: dict[str, Any] = {}
    for key, value in node.items:
        conv = _LOCK_KEYS.get(key.value)
        if conv is None:
            raise Invalid(f"unknown key 'lock.{key.value}'{_hint(key.value, _LOCK_KEYS)}", key.pos)
        try:
            values[_LOCK_FIELDS.get(key.value, key.value)] = conv(value)
        except Invalid as exc:
            raise Invalid(f"'lock.{key.value}': {exc.message}", exc.pos or value.pos) from None
    return LockSpec(pos=node.pos, keypos=tuple((k.value, k.pos) for k, _ in node.items), **values)


# --------------------------------------------------------------------------- key tables


@dataclass(frozen=True)
class Key:
    field: str  # model attribute it fills
    convert: Callable[[Node], Any]


COMMON_KEYS: dict[str, Key] = {
    "description": Key("description", text_line),
    "command": Key("command", argv),
    "user": Key("user", user_name),
    "group": Key("group", user_name),
    "working_directory": Key("working_directory", abs_path),
    "environment": Key("environment", environment),
    "environment_file": Key("environment_file", optional_abs_path),
    "hardening": Key("hardening", choice(*HARDENING_PROFILES)),
    "memory_max": Key("memory_max", memory_size),
    "on_failure": Key("on_failure", unit_names),
}

JOB_KEYS: dict[str, Key] = COMMON_KEYS | {
    "schedule": Key("schedule", schedule),
    "timezone": Key("timezone", timezone),
    "overlap": Key("overlap", choice(*OVERLAP_POLICIES)),
    "wait_timeout": Key("wait_usec", timespan),
    "lock": Key("lock", lock),
    "timeout": Key("timeout_usec", timespan),
    "persistent": Key("persistent", boolean),
    "randomized_delay": Key("randomized_delay_usec", timespan),
    "fixed_random_delay": Key("fixed_random_delay", boolean),
    "randomized_offset": Key("randomized_offset_usec", timespan),
    "accuracy": Key("accuracy_usec", timespan),
    "on_success": Key("on_success", unit_names),
}

WORKER_KEYS: dict[str, Key] = COMMON_KEYS | {
    "instances": Key("instances", positive_int),
    "type": Key("type", choice("exec", "notify", "simple")),
    "restart": Key("restart", choice("on-failure", "always", "on-abnormal", "no")),
    "restart_delay": Key("restart_delay_usec", timespan),
    "restart_max_delay": Key("restart_max_delay_usec", timespan),
    "restart_steps": Key("restart_steps", positive_int),
    "start_limit_interval": Key("start_limit_interval_usec", timespan),
    "start_limit_burst": Key("start_limit_burst", positive_int),
    "stop_signal": Key("stop_signal", stop_signal),
    "stop_timeout": Key("stop_timeout_usec", timespan),
    "recycle_after": Key("recycle_after_usec", timespan),
    "watchdog": Key("watchdog_usec", timespan),
    "max_job_time": Key("max_job_time_usec", timespan),
}

# Required keys, with what to write: a missing key is the one problem where the user has
# nothing on the line to look at, so the message says what the key is for.
# Keys of the other kind, with what to write instead. (is_job, key) -> reason.
_WRONG_KIND: dict[tuple[bool, str], str] = {
    (True, "recycle_after"): "is for workers: RuntimeMaxSec= does nothing for a Type=oneshot job "
    "(systemd.service(5)); bound a job's run time with 'timeout'",
    (True, "stop_timeout"): "is for workers; a job's run time is bounded by 'timeout'",
    (True, "instances"): "is for workers; a scheduled job runs once per elapse",
    (True, "restart"): "is for workers; a failed job runs again at its next scheduled time",
    (False, "schedule"): "is for jobs; a worker runs all the time (use 'jobs:' for scheduled work)",
    (False, "timeout"): "is for jobs; a worker's stop deadline is 'stop_timeout'",
    (False, "overlap"): "is for jobs; a worker is one long-running process per instance",
    (False, "lock"): "is for jobs; a worker is one long-running process per instance",
}

REQUIRED_JOB_KEYS: dict[str, str] = {
    "command": "the program and its arguments, e.g. [/usr/bin/php, /srv/app/artisan, 'catalog:refresh']",
    "schedule": "when it runs, e.g. daily, '*:0/5' or {every: 15min}",
}
REQUIRED_WORKER_KEYS: dict[str, str] = {
    "command": "the program and its arguments, e.g. [/usr/bin/php, /srv/app/artisan, 'queue:work']",
    "stop_timeout": "how long the worker may take to finish its current job after SIGTERM, e.g. 30s",
}
TOP_LEVEL_KEYS = ("jobgen", "target", "defaults", "jobs", "workers")
# The shape of each top-level section, shown when a section is not a mapping.
SECTION_SHAPES: dict[str, str] = {
    "target": 'target: {systemd: ">=252"}',
    "defaults": "defaults: {user: app}",
    "jobs": "jobs: {NAME: {command: [...], schedule: ...}}",
    "workers": "workers: {NAME: {command: [...], stop_timeout: 30s}}",
}


def _did_you_mean(word: str, options) -> str:
    close = _closest(word, options)
    return f"; did you mean '{close}'?" if close else ""


def _closest(word: str, options) -> str | None:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return close[0] if close else None


def _hint(word: str, options) -> str:
    """For an unknown key: the likely spelling, or else every allowed one."""
    return _did_you_mean(word, options) or "; allowed: " + ", ".join(options)


# --------------------------------------------------------------------------- the pass

class _Problems:
    def __init__(self) -> None:
        self.items: set[Diagnostic] = set()

    def error(self, pos: Pos, message: str) -> None:
        self.items.add(Diagnostic(pos, ERROR, message))

    def warning(self, pos: Pos, message: str) -> None:
        self.items.add(Diagnostic(pos, WARNING, message))

    def error_count(self) -> int:
        return sum(1 for d in self.items if d.severity == ERROR)


@dataclass
class _Seen:
    """What one job or worker wrote, beyond the values that converted. Cross-key rules
    ask this, so a key that is present but refused (already reported) is not reported
    again as missing, and a refused value is not used to judge other keys."""

    keypos: dict[str, Pos]  # every known key written (own or from defaults), valid or not
    failed: set[str]  # keys whose value was refused
    meant: set[str]  # keys an unknown (misspelt) key was probably meant to be

    def wrote(self, key: str) -> bool:
        return key in self.keypos or key in self.meant

    def valid(self, key: str) -> bool:
        """The key was written and its value accepted."""
        return key in self.keypos and key not in self.failed


def _convert_keys(
    what: str, entries: list[tuple[Scalar, Node, bool]], table: dict[str, Key], problems: _Problems
) -> tuple[dict[str, Any], _Seen]:
    """Convert every entry; ``inherited`` entries come from ``defaults:``, whose problems
    ``_check_defaults`` reports once (not once per job)."""
    values: dict[str, Any] = {}
    seen = _Seen({}, set(), set())
    for key, node, inherited in entries:
        spec = table.get(key.value)
        if spec is None and (why := _WRONG_KIND.get((table is JOB_KEYS, key.value))):
            problems.error(key.pos, f"{what}: '{key.value}' {why}")
            continue
        if spec is None:
            problems.error(key.pos, f"{what}: unknown key '{key.value}'{_hint(key.value, sorted(table))}")
            if close := _closest(key.value, table):
                seen.meant.add(close)
            continue
        seen.keypos[key.value] = key.pos
        try:
            values[spec.field] = spec.convert(node)
        except Invalid as exc:
            seen.failed.add(key.value)
            if not inherited:
                problems.error(exc.pos or node.pos, f"{what}: '{key.value}': {exc.message}")
    return values, seen


def _entries_with_defaults(body: Map, defaults: Map | None, table: dict[str, Key]) -> list[tuple[Scalar, Node, bool]]:
    own = {k.value for k, _ in body.items}
    inherited = [(k, v, True) for k, v in (defaults.items if defaults else ()) if k.value in table and k.value not in own]
    return inherited + [(k, v, False) for k, v in body.items]


def _check_defaults(defaults: Map, p: _Problems) -> None:
    for key, node in defaults.items:
        spec = JOB_KEYS.get(key.value) or WORKER_KEYS.get(key.value)
        if spec is None:
            p.error(key.pos, f"defaults: unknown key '{key.value}'{_hint(key.value, sorted(JOB_KEYS | WORKER_KEYS))}")
            continue
        try:
            spec.convert(node)
        except Invalid as exc:
            p.error(exc.pos or node.pos, f"defaults: '{key.value}': {exc.message}")


def _required(what: str, required: dict[str, str], seen: _Seen, pos: Pos, p: _Problems) -> None:
    for key, purpose in required.items():
        if not seen.wrote(key):
            p.error(pos, f"{what}: missing required key '{key}' ({purpose})")


def _span_text(usec: int) -> str:
    return timespec.format_timespan(usec)


def _job_rules(name: str, v: dict[str, Any], seen: _Seen, pos: Pos, p: _Problems) -> Job:
    what = f"job '{name}'"
    keypos = seen.keypos
    _required(what, REQUIRED_JOB_KEYS, seen, pos, p)
    # A refused 'overlap' is unknown, not 'skip': rules that depend on it wait for a valid one.
    overlap = None if "overlap" in seen.failed else v.get("overlap", "skip")
    if overlap == "wait" and not seen.wrote("wait_timeout"):
        p.error(
            keypos.get("overlap", pos),
            f"{what}: 'overlap: wait' needs 'wait_timeout', how long a run may wait for the lock (e.g. wait_timeout: 10min)",
        )
    if overlap is not None and overlap != "wait" and "wait_timeout" in keypos:
        p.error(
            keypos["wait_timeout"],
            f"{what}: 'wait_timeout' only applies to 'overlap: wait' (overlap is '{overlap}'); remove it or set 'overlap: wait'",
        )
    sched: Schedule | None = v.get("schedule")
    tz = v.pop("timezone", None)
    if sched is not None and tz is not None:
        if sched.kind != "calendar":
            p.error(keypos["timezone"], f"{what}: 'timezone' only applies to calendar schedules (this schedule is '{sched.kind}')")
        elif sched.has_timezone:
            p.error(keypos["timezone"], f"{what}: the calendar expression already names a time zone; remove one of them")
        else:
            v["schedule"] = Schedule("calendar", calendar=f"{sched.calendar} {tz}", has_timezone=True)
    if sched is not None and sched.kind != "calendar":
        for key in ("persistent", "randomized_offset", "fixed_random_delay"):
            if key in keypos:
                # systemd.timer(5): Persistent= and RandomizedOffsetSec= only act on OnCalendar=.
                p.error(
                    keypos[key],
                    f"{what}: '{key}' only applies to calendar schedules (this schedule is '{sched.kind}'); "
                    "remove it or use a calendar expression",
                )
    if v.get("fixed_random_delay") and not seen.wrote("randomized_delay"):
        p.error(keypos["fixed_random_delay"], f"{what}: 'fixed_random_delay' needs 'randomized_delay' (the delay it fixes)")
    v["lock"] = _job_lock(what, name, overlap, v.get("lock"), seen, pos, p)
    return Job(name=name, pos=pos, keypos=keypos, **v)


def _job_lock(what: str, job: str, overlap: str | None, spec: LockSpec | None, seen: _Seen, pos: Pos, p: _Problems) -> Lock | None:
    if overlap == "allow":
        if "lock" in seen.keypos:
            p.error(
                seen.keypos["lock"],
                f"{what}: 'lock' has no effect with 'overlap: allow' (runs may overlap by choice); "
                "remove 'lock' or choose 'overlap: skip' or 'overlap: wait'",
            )
        return None
    if "lock" in seen.failed:
        return None
    spec = spec or LockSpec()
    scope = spec.scope or "host"
    kp = dict(spec.keypos)
    at = spec.pos or seen.keypos.get("lock", pos)
    if scope == "unit" and overlap == "wait":
        p.error(kp.get("scope", at), f"{what}: 'lock.scope: unit' cannot wait; use scope host or cluster with 'overlap: wait'")
    if scope != "host" and spec.path is not None:
        p.error(kp["path"], f"{what}: 'lock.path' only applies to 'scope: host' (scope is '{scope}')")
    if spec.path is not None and not spec.path.endswith(".lock"):
        # The name says what the file is for: nobody deletes a *.lock file to tidy up.
        p.error(kp["path"], f"{what}: 'lock.path' must end in .lock, got '{spec.path}'")
    if scope != "cluster":
        for key in ("backend", "ttl", "password_file", "credential"):
            if getattr(spec, _LOCK_FIELDS.get(key, key)) is not None:
                p.error(kp[key], f"{what}: 'lock.{key}' only applies to 'scope: cluster' (scope is '{scope}')")
    name = spec.name or job
    # Without lock.name the job's name is used, already checked as a unit name (a subset).
    # The rule per scope is the lock contract's, the one `jobgen lock --name` applies.
    if spec.name is not None and (problem := locks.name_problem(scope, name)):
        p.error(kp.get("name", at), f"{what}: 'lock.name': {problem}")
    if scope == "cluster":
        if spec.backend is None:
            p.error(at, f"{what}: 'scope: cluster' needs 'lock.backend', the lock server's URL ({locks.SCHEME_LIST})")
        elif problem := locks.url_problem(spec.backend):
            p.error(kp["backend"], f"{what}: 'lock.backend': {problem}")
        if spec.name is None:
            p.error(at, f"{what}: 'scope: cluster' needs an explicit 'lock.name', the identity every host shares (e.g. 'shop:{job}')")
    return Lock(scope, name, spec.backend, spec.ttl_usec, spec.password_file, spec.credential, spec.path)


def _worker_rules(name: str, v: dict[str, Any], seen: _Seen, pos: Pos, p: _Problems) -> Worker:
    what = f"worker '{name}'"
    keypos = seen.keypos
    _required(what, REQUIRED_WORKER_KEYS, seen, pos, p)
    if "watchdog" in keypos and v.get("type") != "notify" and "type" not in seen.failed:
        p.error(keypos["watchdog"], f"{what}: 'watchdog' needs 'type: notify' (the worker must send WATCHDOG=1 via sd_notify)")
    stop = v.get("stop_timeout_usec")
    longest = v.get("max_job_time_usec")
    if stop and longest and longest > stop:
        p.warning(
            keypos["stop_timeout"],
            f"{what}: 'stop_timeout' ({_span_text(stop)}) is shorter than 'max_job_time' ({_span_text(longest)}): "
            f"a job in progress at stop is killed after {_span_text(stop)}; make stop_timeout at least {_span_text(longest)}",
        )
    recycle = v.get("recycle_after_usec")
    if stop and recycle is not None and recycle < stop:
        p.warning(
            keypos["recycle_after"],
            f"{what}: 'recycle_after' ({_span_text(recycle)}) is shorter than 'stop_timeout' ({_span_text(stop)}): "
            "the worker may spend longer stopping than working; recycle_after is meant for hours (e.g. 6h)",
        )
    if v.get("restart") == "always" and not (seen.wrote("start_limit_burst") or seen.wrote("start_limit_interval")):
        # systemd-system.conf(5): DefaultStartLimitBurst=5 in DefaultStartLimitIntervalSec=10s;
        # restarts slower than 2s apart never reach it.
        p.warning(
            keypos["restart"],
            f"{what}: 'restart: always' without 'start_limit_burst' or 'start_limit_interval': a worker that keeps "
            "crashing is restarted forever once its restarts are more than 2s apart (systemd's default limit is 5 starts in 10s)",
        )
    if seen.wrote("restart_steps") != seen.wrote("restart_max_delay"):
        # systemd.service(5): RestartSteps= without RestartMaxDelaySec= (or the reverse) is ignored.
        key, other = ("restart_steps", "restart_max_delay") if "restart_steps" in keypos else ("restart_max_delay", "restart_steps")
        p.error(keypos[key], f"{what}: '{key}' needs '{other}' (systemd ignores one without the other)")
    return Worker(name=name, pos=pos, keypos=keypos, **v)


def _section(root: Map, key: str, p: _Problems) -> Map | None:
    node = root.get(key)
    if node is None or (isinstance(node, Scalar) and node.is_null):
        return None
    if not isinstance(node, Map):
        p.error(node.pos, f"'{key}' must be a mapping, got {_kind(node)} (e.g. {SECTION_SHAPES[key]})")
        return None
    return node


def _units(kind: str, section: Map | None, defaults: Map | None, table, rules, p: _Problems, taken: dict[str, tuple[str, Pos]]):
    out = []
    for key, body in section.items if section else ():
        what = f"{kind} '{key.value}'"
        errors_before = p.error_count()
        if problem := names.job_name_problem(key.value):
            p.error(key.pos, f"{what}: {problem}")
        elif key.value in taken:
            other, at = taken[key.value]
            p.error(
                key.pos,
                f"{what}: the name is already used by {other} '{key.value}' at line {at.line}; "
                "jobs and workers share one namespace of unit names, rename one",
            )
        else:
            taken[key.value] = (kind, key.pos)
        if not isinstance(body, Map):
            p.error(body.pos, f"{what}: expected a mapping of keys, got {_kind(body)}")
            continue
        # The body is checked even under a bad name: every problem in one run.
        values, seen = _convert_keys(what, _entries_with_defaults(body, defaults, table), table, p)
        unit = rules(key.value, values, seen, key.pos, p)
        if p.error_count() == errors_before and not seen.failed:
            out.append(unit)
    return tuple(sorted(out, key=lambda u: u.name))


def validate(tree: Node, path: str, target_override: Target | None = None) -> tuple[Manifest, list[Diagnostic]]:
    """Return the model and its warnings, or raise ManifestError with every error."""
    p = _Problems()
    if not isinstance(tree, Map):
        raise ManifestError(
            [Diagnostic(tree.pos, ERROR, f"the manifest must be a mapping with jobgen: {MANIFEST_VERSION} and jobs:, got {_kind(tree)}")]
        )
    for key, _ in tree.items:
        if key.value not in TOP_LEVEL_KEYS:
            p.error(key.pos, f"unknown top-level key '{key.value}'{_hint(key.value, TOP_LEVEL_KEYS)}")
    version = tree.get("jobgen")
    if version is None:
        p.error(tree.pos, f"missing 'jobgen: {MANIFEST_VERSION}' (the manifest format version)")
    elif not isinstance(version, Scalar) or version.value != MANIFEST_VERSION:
        p.error(version.pos, f"'jobgen' must be {MANIFEST_VERSION} (the manifest format this jobgen reads), got {_kind(version)}")
    target, target_pos = _target(tree, p)
    defaults = _section(tree, "defaults", p)
    if defaults:
        _check_defaults(defaults, p)
    taken: dict[str, tuple[str, Pos]] = {}
    jobs = _units("job", _section(tree, "jobs", p), defaults, JOB_KEYS, _job_rules, p, taken)
    workers = _units("worker", _section(tree, "workers", p), defaults, WORKER_KEYS, _worker_rules, p, taken)
    if not jobs and not workers and not p.items:
        p.error(tree.pos, "the manifest defines no jobs and no workers (add a 'jobs:' or 'workers:' section)")
    diags = sorted(p.items)
    if any(d.severity == ERROR for d in diags):
        raise ManifestError(diags)
    manifest = Manifest(path, target_override or target, target_pos, jobs, workers)
    return manifest, diags


def _target(tree: Map, p: _Problems) -> tuple[Target | None, Pos | None]:
    section = _section(tree, "target", p)
    if section is None:
        return None, None
    for key, _ in section.items:
        if key.value != "systemd":
            p.error(key.pos, f"target: unknown key '{key.value}'{_hint(key.value, ('systemd',))}")
    node = section.get("systemd")
    if node is None:
        return None, None
    try:
        target = parse_target(_scalar(node, "a systemd version such as 252 or '>=252'"))
    except (Invalid, ValueError) as exc:
        p.error(node.pos, f"target: 'systemd': {getattr(exc, 'message', exc)}")
        return None, None
    if target.min > LAST_RELEASE:
        # Nothing is known past the directive table: a release that does not exist yet is
        # more likely a typo (300 for 250) than a plan.
        p.warning(
            node.pos,
            f"target: 'systemd': '{node.value}' starts after systemd {LAST_RELEASE}, the newest release jobgen knows; "
            "its version checks assume nothing changed since",
        )
    return target, node.pos
