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
import shlex
import signal as _signal
from dataclasses import dataclass
from typing import Any, Callable
from zoneinfo import available_timezones

from jobgen import names, timespec
from jobgen.diagnostics import ERROR, WARNING, Diagnostic, ManifestError, Pos
from jobgen.escape import CONTROL
from jobgen.load import Map, Node, Scalar, Seq
from jobgen.model import (
    HARDENING_PROFILES,
    LOCK_SCOPES,
    OVERLAP_POLICIES,
    Job,
    Lock,
    Manifest,
    Schedule,
    Worker,
)
from jobgen.target import Target, parse_target

MANIFEST_VERSION = "1"


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
    if CONTROL.search(node.value):
        # A newline or other control character would end the directive and let the
        # rest of the value become a directive of its own (systemd.syntax(7)).
        raise Invalid("control characters (such as a newline) are not allowed")
    return node.value


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
        raise Invalid(f"invalid time span '{value}': {exc} (systemd.time(7), e.g. 30s, 5min, 1h 30min)") from None
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
            if not isinstance(item, Scalar) or item.is_null:
                raise Invalid(f"every command argument must be a string, got {_kind(item)}", item.pos)
            if "\x00" in item.value:
                raise Invalid("a command argument cannot contain a NUL byte", item.pos)
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
        raise Invalid(f"the program must be an absolute path, got '{words[0]}' (e.g. /usr/bin/{words[0]})")
    return tuple(words)


def environment(node: Node) -> tuple[tuple[str, str], ...]:
    if not isinstance(node, Map):
        raise Invalid(f"expected a mapping of NAME: value, got {_kind(node)}")
    pairs = []
    for key, value in node.items:
        if not names.ENV_NAME.fullmatch(key.value):
            raise Invalid(f"'{key.value}' is not a valid environment variable name", key.pos)
        if not isinstance(value, Scalar):
            raise Invalid(f"the value of {key.value} must be a string, got {_kind(value)}", value.pos)
        if CONTROL.search(value.value):
            raise Invalid(f"the value of {key.value} contains a control character (such as a newline)", value.pos)
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
        raise Invalid(f"invalid calendar expression '{value}': {exc} (systemd.time(7) CALENDAR EVENTS)") from None
    return Schedule("calendar", calendar=cal.normalized, has_timezone=cal.timezone is not None)


_SCHEDULE_FORMS = {
    "calendar": calendar,
    "every": lambda n: Schedule("every", usec=timespan(n)),
    "after_boot": lambda n: Schedule("after_boot", usec=timespan(n)),
}


def schedule(node: Node) -> Schedule:
    if isinstance(node, Scalar):
        return calendar(node)
    if not isinstance(node, Map) or len(node.items) != 1:
        raise Invalid("expected a calendar expression or a mapping with one of: " + ", ".join(_SCHEDULE_FORMS))
    key, value = node.items[0]
    form = _SCHEDULE_FORMS.get(key.value)
    if form is None:
        raise Invalid(
            f"unknown schedule form '{key.value}'{_did_you_mean(key.value, _SCHEDULE_FORMS)}; "
            "allowed: " + ", ".join(_SCHEDULE_FORMS),
            key.pos,
        )
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
    pos: Pos | None = None
    keypos: tuple[tuple[str, Pos], ...] = ()


_LOCK_KEYS: dict[str, Callable[[Node], Any]] = {
    "scope": choice(*LOCK_SCOPES),
    "name": lambda n: _scalar(n, "a lock name"),
    "backend": lambda n: _scalar(n, "a lock server URL"),
    "ttl": timespan,
    "password_file": abs_path,
    "credential": lambda n: _scalar(n, "a credential as NAME:/path"),
}


_LOCK_FIELDS = {"ttl": "ttl_usec"}  # manifest key -> LockSpec field where they differ


def lock(node: Node) -> LockSpec:
    if isinstance(node, Scalar) and not node.is_null:
        return LockSpec(scope=choice(*LOCK_SCOPES)(node), pos=node.pos)
    if not isinstance(node, Map):
        raise Invalid("expected a mapping with scope (unit, host, cluster), name, backend, ttl")
    values: dict[str, Any] = {}
    for key, value in node.items:
        conv = _LOCK_KEYS.get(key.value)
        if conv is None:
            raise Invalid(
                f"unknown key 'lock.{key.value}'{_did_you_mean(key.value, _LOCK_KEYS)}; allowed: " + ", ".join(_LOCK_KEYS),
                key.pos,
            )
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

REQUIRED_JOB_KEYS = ("command", "schedule")
REQUIRED_WORKER_KEYS = ("command", "stop_timeout")
TOP_LEVEL_KEYS = ("jobgen", "target", "defaults", "jobs", "workers")


def _did_you_mean(word: str, options) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


# --------------------------------------------------------------------------- the pass


class _Problems:
    def __init__(self) -> None:
        self.items: set[Diagnostic] = set()  # a set: a bad default is reported once

    def error(self, pos: Pos, message: str) -> None:
        self.items.add(Diagnostic(pos, ERROR, message))

    def warning(self, pos: Pos, message: str) -> None:
        self.items.add(Diagnostic(pos, WARNING, message))


def _convert_keys(
    what: str, entries: list[tuple[Scalar, Node]], table: dict[str, Key], problems: _Problems
) -> tuple[dict[str, Any], dict[str, Pos]]:
    values: dict[str, Any] = {}
    keypos: dict[str, Pos] = {}
    for key, node in entries:
        spec = table.get(key.value)
        if spec is None:
            problems.error(
                key.pos,
                f"{what}: unknown key '{key.value}'{_did_you_mean(key.value, table)}"
                + ("" if _did_you_mean(key.value, table) else "; allowed: " + ", ".join(sorted(table))),
            )
            continue
        keypos[key.value] = key.pos
        try:
            values[spec.field] = spec.convert(node)
        except Invalid as exc:
            problems.error(exc.pos or node.pos, f"{what}: '{key.value}': {exc.message}")
    return values, keypos


def _entries_with_defaults(body: Map, defaults: Map | None, table: dict[str, Key]) -> list[tuple[Scalar, Node]]:
    own = {k.value for k, _ in body.items}
    inherited = [(k, v) for k, v in (defaults.items if defaults else ()) if k.value in table and k.value not in own]
    return inherited + list(body.items)


def _job_rules(name: str, v: dict[str, Any], keypos: dict[str, Pos], pos: Pos, p: _Problems) -> Job | None:
    what = f"job '{name}'"
    for key in REQUIRED_JOB_KEYS:
        if JOB_KEYS[key].field not in v:
            p.error(pos, f"{what}: missing required key '{key}'")
    overlap = v.get("overlap", "skip")
    if overlap == "wait" and "wait_usec" not in v:
        p.error(keypos.get("overlap", pos), f"{what}: 'overlap: wait' needs 'wait_timeout' (how long a run may wait for the lock)")
    if overlap != "wait" and "wait_usec" in v:
        p.error(keypos["wait_timeout"], f"{what}: 'wait_timeout' only applies to 'overlap: wait' (overlap is '{overlap}')")
    sched: Schedule | None = v.get("schedule")
    tz = v.pop("timezone", None)
    if sched is not None and tz is not None:
        if sched.kind != "calendar":
            p.error(keypos["timezone"], f"{what}: 'timezone' only applies to calendar schedules")
        elif sched.has_timezone:
            p.error(keypos["timezone"], f"{what}: the calendar expression already names a time zone")
        else:
            v["schedule"] = Schedule("calendar", calendar=f"{sched.calendar} {tz}", has_timezone=True)
    if sched is not None and sched.kind != "calendar":
        for key in ("persistent", "randomized_offset", "fixed_random_delay"):
            if key in keypos:
                # systemd.timer(5): Persistent= and RandomizedOffsetSec= only act on OnCalendar=.
                p.error(keypos[key], f"{what}: '{key}' only applies to calendar schedules")
    if v.get("fixed_random_delay") and "randomized_delay_usec" not in v:
        p.error(keypos["fixed_random_delay"], f"{what}: 'fixed_random_delay' needs 'randomized_delay'")
    v["lock"] = _job_lock(what, name, overlap, v.get("lock"), keypos, pos, p)
    if any(d.severity == ERROR and d.message.startswith(what + ":") for d in p.items) or "command" not in v:
        return None
    if "schedule" not in v:
        return None
    return Job(name=name, pos=pos, keypos=keypos, **v)


def _job_lock(what: str, job: str, overlap: str, spec: LockSpec | None, keypos, pos: Pos, p: _Problems) -> Lock | None:
    if overlap == "allow":
        if spec is not None:
            p.error(keypos["lock"], f"{what}: 'lock' has no effect with 'overlap: allow' (runs may overlap by choice)")
        return None
    spec = spec or LockSpec()
    scope = spec.scope or "host"
    kp = dict(spec.keypos)
    at = spec.pos or keypos.get("lock", pos)
    if scope == "unit" and overlap == "wait":
        p.error(kp.get("scope", at), f"{what}: 'lock.scope: unit' cannot wait; use scope host or cluster with 'overlap: wait'")
    if scope != "cluster":
        for key in ("backend", "ttl", "password_file", "credential"):
            if getattr(spec, _LOCK_FIELDS.get(key, key)) is not None:
                p.error(kp[key], f"{what}: 'lock.{key}' only applies to 'scope: cluster' (scope is '{scope}')")
    name = spec.name or job
    pattern = names.CLUSTER_LOCK_NAME if scope == "cluster" else names.LOCK_NAME
    if not pattern.fullmatch(name):
        p.error(kp.get("name", at), f"{what}: 'lock.name': '{name}' may only contain letters, digits and '_.:@-'" + ("/" if scope == "cluster" else ""))
    if scope == "cluster":
        if spec.backend is None:
            p.error(at, f"{what}: 'scope: cluster' needs 'lock.backend' (redis://, mariadb://, mysql:// or postgresql:// URL)")
        elif problem := _backend_problem(spec.backend):
            p.error(kp["backend"], f"{what}: 'lock.backend': {problem}")
        if spec.name is None:
            p.error(at, f"{what}: 'scope: cluster' needs an explicit 'lock.name', the identity every host shares (e.g. 'shop:{job}')")
    return Lock(scope, name, spec.backend, spec.ttl_usec, spec.password_file, spec.credential)


_BACKEND_SCHEMES = ("redis", "rediss", "mariadb", "mysql", "postgresql", "postgres")


def _backend_problem(url: str) -> str | None:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme not in _BACKEND_SCHEMES:
        return f"unsupported scheme '{parts.scheme}'; allowed: " + ", ".join(s + "://" for s in _BACKEND_SCHEMES)
    password = parts.password or ""
    # Unit files are world-readable (/etc/systemd/system is 0755): a password in the URL
    # would be readable by every local user. It must come from the environment at run
    # time (${VAR}, expanded by the lock holder, not by systemd) or a password file.
    if password and not (password.startswith("${") and password.endswith("}")):
        return "a literal password would be written into a world-readable unit; use ${VARIABLE} (from environment_file) or lock.password_file"
    return None


def _worker_rules(name: str, v: dict[str, Any], keypos: dict[str, Pos], pos: Pos, p: _Problems) -> Worker | None:
    what = f"worker '{name}'"
    for key in REQUIRED_WORKER_KEYS:
        if WORKER_KEYS[key].field not in v:
            hint = " (how long the worker may take to finish its current job after SIGTERM)" if key == "stop_timeout" else ""
            p.error(pos, f"{what}: missing required key '{key}'{hint}")
    if "watchdog_usec" in v and v.get("type") != "notify":
        p.error(keypos["watchdog"], f"{what}: 'watchdog' needs 'type: notify' (the worker must send WATCHDOG=1 via sd_notify)")
    stop = v.get("stop_timeout_usec")
    if stop and v.get("max_job_time_usec", 0) > stop:
        p.warning(keypos["stop_timeout"], f"{what}: 'stop_timeout' is shorter than 'max_job_time': a job in progress at stop will be killed")
    if stop and v.get("recycle_after_usec") is not None and v["recycle_after_usec"] < stop:
        p.warning(keypos["recycle_after"], f"{what}: 'recycle_after' is shorter than 'stop_timeout'")
    if v.get("restart") == "always" and "start_limit_burst" not in v:
        p.warning(keypos["restart"], f"{what}: 'restart: always' without 'start_limit_burst'/'start_limit_interval' restarts a crashing worker forever")
    if ("restart_steps" in v) != ("restart_max_delay_usec" in v):
        # systemd.service(5): RestartSteps= without RestartMaxDelaySec= (or the reverse) is ignored.
        key = "restart_steps" if "restart_steps" in v else "restart_max_delay"
        p.error(keypos[key], f"{what}: 'restart_steps' and 'restart_max_delay' go together")
    if any(d.severity == ERROR and d.message.startswith(what + ":") for d in p.items) or not all(WORKER_KEYS[k].field in v for k in REQUIRED_WORKER_KEYS):
        return None
    return Worker(name=name, pos=pos, keypos=keypos, **v)


def _section(root: Map, key: str, p: _Problems) -> Map | None:
    node = root.get(key)
    if node is None or (isinstance(node, Scalar) and node.is_null):
        return None
    if not isinstance(node, Map):
        p.error(node.pos, f"'{key}' must be a mapping, got {_kind(node)}")
        return None
    return node


def _units(kind: str, section: Map | None, defaults: Map | None, table, rules, p: _Problems, taken: dict[str, Pos]):
    out = []
    for key, body in section.items if section else ():
        what = f"{kind} '{key.value}'"
        if problem := names.job_name_problem(key.value):
            p.error(key.pos, f"{what}: {problem}")
            continue
        if key.value in taken:
            p.error(key.pos, f"{what}: the name is already used at line {taken[key.value].line} (unit names must be unique)")
            continue
        taken[key.value] = key.pos
        if not isinstance(body, Map):
            p.error(body.pos, f"{what}: expected a mapping of keys, got {_kind(body)}")
            continue
        values, keypos = _convert_keys(what, _entries_with_defaults(body, defaults, table), table, p)
        if unit := rules(key.value, values, keypos, key.pos, p):
            out.append(unit)
    return tuple(sorted(out, key=lambda u: u.name))


def validate(tree: Node, path: str, target_override: Target | None = None) -> tuple[Manifest, list[Diagnostic]]:
    """Return the model and its warnings, or raise ManifestError with every error."""
    p = _Problems()
    if not isinstance(tree, Map):
        raise ManifestError([Diagnostic(tree.pos, ERROR, f"the manifest must be a mapping, got {_kind(tree)}")])
    for key, _ in tree.items:
        if key.value not in TOP_LEVEL_KEYS:
            p.error(key.pos, f"unknown top-level key '{key.value}'{_did_you_mean(key.value, TOP_LEVEL_KEYS)}; allowed: " + ", ".join(TOP_LEVEL_KEYS))
    version = tree.get("jobgen")
    if version is None:
        p.error(tree.pos, f"missing 'jobgen: {MANIFEST_VERSION}' (the manifest format version)")
    elif not isinstance(version, Scalar) or version.value != MANIFEST_VERSION:
        p.error(version.pos, f"'jobgen' must be {MANIFEST_VERSION} (the manifest format this jobgen reads), got {_kind(version)}")
    target, target_pos = _target(tree, p)
    defaults = _section(tree, "defaults", p)
    if defaults:
        for key, _ in defaults.items:
            if key.value not in JOB_KEYS and key.value not in WORKER_KEYS:
                p.error(key.pos, f"defaults: unknown key '{key.value}'{_did_you_mean(key.value, JOB_KEYS | WORKER_KEYS)}")
    taken: dict[str, Pos] = {}
    jobs = _units("job", _section(tree, "jobs", p), defaults, JOB_KEYS, _job_rules, p, taken)
    workers = _units("worker", _section(tree, "workers", p), defaults, WORKER_KEYS, _worker_rules, p, taken)
    if not jobs and not workers and not p.items:
        p.error(tree.pos, "the manifest defines no jobs and no workers")
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
            p.error(key.pos, f"target: unknown key '{key.value}'; allowed: systemd")
    node = section.get("systemd")
    if node is None:
        return None, None
    try:
        return parse_target(_scalar(node, "a systemd version such as 252 or '>=252'")), node.pos
    except (Invalid, ValueError) as exc:
        p.error(node.pos, f"target: 'systemd': {getattr(exc, 'message', exc)}")
        return None, None
