"""Stage 2: the str tree from load.py -> the typed model, or every problem at once.

The schema is data: ``JOB_KEYS``/``WORKER_KEYS`` map each manifest key to the model
field it fills, the converter that checks it and, for a simple key, the directive it
writes (``Writes``, walked by plan.py). A converter raises ``Invalid`` with a
message; ``_convert_keys`` adds the place, the job and the key, and keeps going so the
user sees all problems in one run. Cross-key rules (``overlap: wait`` needs
``wait_timeout``, ...) live in ``_job_rules``/``_worker_rules`` after the per-key pass.
Version gates are not checked here: they depend on the target, in plan.py.
"""

from __future__ import annotations

import posixpath
import re
import signal as _signal
import unicodedata
from functools import lru_cache
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

# cron (a hint for a schedule that did not read) and shellwords (a command written as one
# string) are imported where they are used: a manifest of calendars and argument lists,
# most of them, never needs them.
from jobgen.compiler import limits, names, notify, timespec
from jobgen.compiler.diagnostics import ERROR, WARNING, Diagnostic, ManifestError, Pos
from jobgen.compiler.escape import SURROGATE, search_control
from jobgen.compiler.hardening import HARDENING
from jobgen.compiler.load import Map, Node, Scalar, Seq
from jobgen.compiler.model import (
    HARDENING_PROFILES,
    LOCK_SCOPES,
    OVERLAP_POLICIES,
    Common,
    Job,
    Lock,
    Queue,
    Manifest,
    Schedule,
    Worker,
)
from jobgen.compiler.directive_table import LAST_RELEASE
from jobgen.contract.policies import DEFAULT_OVERLAP, DEFAULT_SCOPE, OVERLAP, SCOPES
from jobgen.compiler.target import Target, parse_target
from jobgen.contract import locks
from jobgen.contract import queue as queue_contract

if TYPE_CHECKING:
    from jobgen.compiler import shellwords

MANIFEST_VERSION = "1"


class Invalid(Exception):
    def __init__(self, message: str, pos: Pos | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos


class InvalidEntries(Invalid):
    """Every problem in a mapping under a key (``lock:``, ``queue:``), each message naming
    its own sub-key ('lock.path'): a misspelt key does not hide the others' problems."""

    def __init__(self, problems: list[tuple[Pos, str]]):
        super().__init__(problems[0][1], problems[0][0])
        self.problems = problems


def _key_problems(key: str, exc: Invalid, node: Node) -> list[tuple[Pos, str]]:
    """(place, message) for each problem in the value of ``key``, the message naming the key."""
    if isinstance(exc, InvalidEntries):
        return exc.problems
    return [(exc.pos or node.pos, f"'{key}': {exc.message}")]


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
    m = search_control(value)
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
    m = SURROGATE.search(text)
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
    _checked_path(value, value)
    return value


def optional_abs_path(node: Node) -> str:
    """EnvironmentFile= style: '-/path' means 'ignore if missing' (systemd.exec(5)). systemd
    strips exactly one '-' (v252 load-fragment.c config_parse_unit_env_file) and ignores
    the line if the rest is not absolute: '--/etc/x' is the relative '-/etc/x', which
    `jobgen run` would read from its working folder."""
    value = _scalar(node, "an absolute path")
    _checked_path(value.removeprefix("-"), value, " (optionally prefixed with one '-')")
    return value


def _checked_path(path: str, value: str, form: str = "") -> None:
    """Absolute and normalized as systemd's path_simplify_and_warn wants it (v252
    src/shared/parse-helpers.c: absolute, then after path_simplify path_is_normalized,
    which refuses a '..' component; WorkingDirectory= fails the unit, EnvironmentFile= is
    ignored)."""
    if not path.startswith("/"):
        raise Invalid(f"must be an absolute path{form}, got '{value}'")
    if ".." in path.split("/"):
        raise Invalid(f"must be a normalized path without '..' (systemd refuses such a path in its settings: \"path is not normalized\"), got '{value}'")
    _path_length(path)


def _path_length(path: str) -> None:
    """The kernel refuses longer paths (ENAMETOOLONG): limits.h PATH_MAX and NAME_MAX."""
    size = len(path.encode("utf-8", "surrogatepass"))
    if size >= limits.PATH_MAX:
        raise Invalid(f"the path has {size} bytes; a path may have at most {limits.PATH_MAX - 1} (PATH_MAX)")
    longest = max(path.split("/"), key=lambda part: len(part.encode("utf-8", "surrogatepass")))
    if (size := len(longest.encode("utf-8", "surrogatepass"))) > limits.NAME_MAX:
        raise Invalid(f"a path component has {size} bytes; each may have at most {limits.NAME_MAX} (NAME_MAX)")


# Python's int() refuses more than 4300 digits with a message about itself; systemd's
# numbers stop far earlier (a time span is an unsigned 64-bit count of microseconds).
_LONG_NUMBER = re.compile(r"[0-9]{21,}")


def timespan(node: Node) -> int:
    value = _scalar(node, "a time span such as 30s or 5min")
    if _LONG_NUMBER.search(value):
        raise Invalid(f"invalid time span '{value}': number too large (systemd.time(7), e.g. 30s, 5min, 1h 30min)")
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


def whole_number(maximum: int, why: str) -> Callable[[Node], int]:
    """A whole number from 1 to ``maximum``, written in ASCII digits (str.isdigit()
    accepts '²' and other digits int() refuses)."""

    def convert(node: Node) -> int:
        value = _scalar(node, "a whole number")
        if not (value.isascii() and value.isdigit()) or int(value) < 1:
            raise Invalid(f"expected a whole number >= 1, got '{value}'")
        if len(value) > len(str(maximum)) or int(value) > maximum:
            raise Invalid(f"{value} is more than {maximum}, {why}")
        return int(value)

    return convert


positive_int = whole_number(limits.UINT_MAX, "the largest number systemd reads here (an unsigned 32-bit int)")


def argv(node: Node) -> tuple[str, ...]:
    """A list of strings, or one string split by POSIX shell rules that holds no shell syntax
    (shellwords.py: no shell runs it)."""
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
        from jobgen.compiler import shellwords

        try:
            reading = shellwords.read(text)
        except ValueError as exc:
            raise Invalid(f"cannot split command: {exc}") from None
        if reading.syntax:
            raise Invalid(_shell_syntax(text, reading))
        words = list(reading.words)
    if not words:
        raise Invalid("the command is empty")
    _command_size(words)
    if not words[0].startswith("/"):
        # systemd would resolve a bare name against its own fixed PATH, not the shell's;
        # an absolute path makes verification and behaviour the same everywhere.
        raise Invalid(
            f"the program must be an absolute path, got '{words[0]}' "
            f"(`command -v {words[0]}` on the target host prints it)"
        )
    return tuple(words)


def _shell_syntax(text: str, reading: shellwords.Reading) -> str:
    """A string command with shell syntax in it means two things; say both ways to write
    each (shellwords.py: no shell runs it, and systemd performs none of it)."""
    import json  # here: an error message's quoting, not worth 2 ms of every compile

    pieces = [f"'{piece.text}' ({piece.what})" for piece in reading.syntax]
    named = pieces[0] if len(pieces) == 1 else ", ".join(pieces[:-1]) + " and " + pieces[-1]
    return (
        f"{named} {'is' if len(pieces) == 1 else 'are'} shell syntax, but a string command is only split into words: "
        'no shell runs it, and the words reach the program as written (systemd.service(5) "Command lines"); '
        f"for the shell write: command: [/bin/sh, -c, {json.dumps(text.strip(), ensure_ascii=False)}]; "
        f"for the words as written, a list: command: {json.dumps(list(reading.words), ensure_ascii=False)}"
    )


def _command_size(words: list[str]) -> None:
    """ExecStart= must stay below systemd's line limit after escaping (limits.py)."""
    if len(words) > limits.COMMAND_ARGS:
        raise Invalid(f"the command has {len(words)} arguments; a command may have at most {limits.COMMAND_ARGS} (README: Limits)")
    size = sum(len(w.encode("utf-8", "surrogatepass")) for w in words)
    if size > limits.COMMAND_BYTES:
        raise Invalid(
            f"the command's arguments add up to {size:,} bytes; a command may have at most {limits.COMMAND_BYTES:,} "
            "(README: Limits); put long scripts in a file and run that"
        )


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


def mail_address(node: Node) -> str:
    """`mail_on_failure:` (compiler/notify.py: the address rule and why it is narrow)."""
    value = _scalar(node, notify.ADDRESS_RULE)
    if problem := notify.address_problem(value):
        raise Invalid(problem)
    return value


def unit_names(node: Node) -> tuple[str, ...]:
    items = node.items if isinstance(node, Seq) else (node,)
    units = []
    for item in items:
        value = _scalar(item, "a unit name")
        if not names.UNIT_REF.fullmatch(value):
            raise Invalid(f"'{value}' is not a unit name such as alert@%n.service or page-ops.service", item.pos)
        if len(value) > limits.UNIT_NAME_MAX:
            raise Invalid(f"the unit name has {len(value)} characters; systemd allows at most {limits.UNIT_NAME_MAX}", item.pos)
        units.append(value)
    return tuple(units)


# systemd.unit(5) Documentation=: "Only URIs of the types http://, https://, file:, info:,
# man: are accepted"; the list is space-separated, so a URI holds no white space.
DOCUMENTATION_SCHEMES = ("http://", "https://", "file:", "info:", "man:")


def documentation_uris(node: Node) -> tuple[str, ...]:
    items = node.items if isinstance(node, Seq) else (node,)
    uris = []
    for item in items:
        value = _scalar(item, "a URI")
        if not value.startswith(DOCUMENTATION_SCHEMES) or any(c.isspace() for c in value):
            raise Invalid(f"'{value}' is not a documentation URI: systemd accepts {', '.join(DOCUMENTATION_SCHEMES)} "
                          "without spaces (man:shop(8), https://example.org/shop)", item.pos)
        uris.append(value)
    return tuple(uris)


def user_name(node: Node) -> str:
    value = _scalar(node, "a user or group name")
    if not names.USER_NAME.fullmatch(value):
        raise Invalid(f"'{value}' is not a valid user or group name (systemd.exec(5) User=)")
    if len(value) > limits.USER_NAME_MAX or (value.isdigit() and int(value) > limits.UID_MAX):
        # systemd accepts longer names with a warning ("does not match strict user/group
        # name rules"): utmp keeps 32 bytes with the NUL. (uid_t)-1 is "no user".
        if value.isdigit():
            raise Invalid(f"'{value}' is not a valid user or group number (at most {limits.UID_MAX})")
        raise Invalid(f"'{value}' is too long for a user or group name (at most {limits.USER_NAME_MAX} characters)")
    return value


def memory_size(node: Node) -> str:
    """MemoryMax= (systemd.resource-control(5)): bytes with K/M/G/T (base 1024), or a
    percentage of physical memory. systemd reads a bare number as bytes and refuses 0 and
    more than 100% ("out of range"); a percentage is kept as written, never as '%%'
    (MemoryMax= does not expand specifiers, specifier_table.py)."""
    value = _scalar(node, "a size such as 512M or 2G")
    number, unit = value[:-1], value[-1:]
    if _ascii_digits(value):
        raise Invalid(
            f"'{value}' would be {value} bytes: systemd reads a number without a unit as bytes; "
            f"write the unit, e.g. '{value}M' or '{value}G'"
        )
    if number.isdigit() and not number.isascii() and unit in "KMGT%":
        # systemd reads sizes with strtoull (parse_size), which knows the digits 0-9 only:
        # it would ignore '١٢G' (int() reads it as 12), and int() refuses '²'.
        ascii = "".join(str(unicodedata.digit(c, "?")) for c in number)
        raise Invalid(f"'{value}' is written with digits systemd does not read (only 0-9; it would ignore "
                      f"the limit); write '{ascii}{unit}'")
    if not (_ascii_digits(number) and unit in "KMGT%"):
        raise Invalid(f"expected a size such as 512M, 2G or 50%, got '{value}'")
    if int(number) == 0:
        raise Invalid(f"'{value}' is no memory at all (systemd refuses a zero limit); remove memory_max for no limit")
    if unit == "%" and int(number) > 100:
        raise Invalid(f"'{value}' is more than the host's memory; a percentage of physical memory is 1% to 100%")
    if unit != "%" and int(number) * 1024 ** ("KMGT".index(unit) + 1) >= _UINT64_MAX:
        raise Invalid(f"'{value}' is more than systemd can hold (parse_size: an unsigned 64-bit count of bytes)")
    return value


_UINT64_MAX = 2**64 - 1  # systemd's "infinity" for a memory limit (CGROUP_LIMIT_MAX)


def _ascii_digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


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
        from zoneinfo import available_timezones  # here: zoneinfo loads sysconfig, and most manifests name no zone

        _ZONES.update(available_timezones())
    return _ZONES


def calendar(node: Node) -> Schedule:
    return _calendar(_scalar(node, "an OnCalendar= expression such as '*-*-* 02:30:00' or hourly"))


@lru_cache(maxsize=4096)
def _calendar(value: str) -> Schedule:
    # Pure in the text, and manifests repeat their schedules: parsed once per expression,
    # not once per job. Whether it elapses is _calendar_searches(), under a bound.
    if _LONG_NUMBER.search(value):
        raise Invalid(f"invalid calendar expression '{value}': number too large")
    try:
        cal = timespec.parse_calendar(value)
    except ValueError as exc:
        if hint := _not_a_calendar(value):
            raise Invalid(f"invalid calendar expression '{value}': {hint}") from None
        # timespec says "invalid calendar spec 'X': why"; the value is quoted once here.
        why = str(exc).removeprefix(f"invalid calendar spec {value!r}: ")
        raise Invalid(
            f"invalid calendar expression '{value}': {why} "
            "(systemd.time(7) CALENDAR EVENTS, e.g. daily, 'Mon..Fri 02:30', '*:0/15')"
        ) from None
    return Schedule("calendar", calendar=cal.normalized, has_timezone=cal.timezone is not None)


def _not_a_calendar(value: str) -> str | None:
    """What the user probably wrote instead of a calendar expression: cron syntax or a time span."""
    from jobgen.compiler import cron

    if hint := cron.suggestion(value):
        return hint
    if any(c.isalpha() for c in value):
        try:
            timespec.parse_timespan(value)
        except ValueError:
            return None
        return f"this is a time span; for a run every {value.strip()} write schedule: {{every: {value.strip()}}}"
    return None


_SCHEDULE_FORMS = {
    "calendar": calendar,
    "every": lambda n: Schedule("every", usec=timespan(n)),
    "after_boot": lambda n: Schedule("after_boot", usec=timespan(n)),
}


def schedule(node: Node) -> Schedule:
    if isinstance(node, Scalar):
        return calendar(node)
    if isinstance(node, Seq):
        return calendar_list(node)
    if not isinstance(node, Map):
        raise Invalid(
            f"expected a calendar expression, a list of them or a mapping with one of {', '.join(_SCHEDULE_FORMS)}, "
            f"got {_kind(node)}"
        )
    if len(node.items) != 1:
        written = ", ".join(k.value for k, _ in node.items) or "nothing"
        raise Invalid(
            f"a schedule mapping takes exactly one of {', '.join(_SCHEDULE_FORMS)}; got {written}"
            " (several calendar expressions go in a list, schedule: ['Mon 02:00', 'Fri 04:00']; every and after_boot"
            " stand alone: make a second job for them)"
        )
    key, value = node.items[0]
    form = _SCHEDULE_FORMS.get(key.value)
    if form is None:
        raise Invalid(f"unknown schedule form '{key.value}'{_hint(key.value, _SCHEDULE_FORMS)}", key.pos)
    try:
        return form(value)
    except Invalid as exc:
        raise Invalid(exc.message, exc.pos or value.pos) from None


def calendar_list(node: Seq) -> Schedule:
    """`schedule: [EXPR, ...]`: one OnCalendar= line each, the timer elapsing at every one
    (systemd.timer(5)); each item is checked at its own place. Only calendar expressions:
    Persistent=, RandomizedOffsetSec= and DeferReactivation= act on OnCalendar= alone, so a
    timer that mixed in OnBootSec= or OnUnitActiveSec= would apply them to part of its
    schedule (README: Job keys)."""
    if not node.items:
        raise Invalid("a schedule list needs at least one calendar expression")
    problems: list[tuple[Pos, str]] = []
    found: list[tuple[Schedule, str | None]] = []
    first_at: dict[str, tuple[int, str]] = {}
    for i, item in enumerate(node.items, start=1):
        where = f"'schedule' item {i}"
        if not isinstance(item, Scalar) or item.is_null:
            problems.append((item.pos, f"{where}: expected a calendar expression, got {_kind(item)} (a schedule list "
                             "holds calendar expressions only; every and after_boot are schedules of their own)"))
            continue
        try:
            one = calendar(item)
        except Invalid as exc:
            problems.append((exc.pos or item.pos, f"{where}: {exc.message}"))
            continue
        if one.calendar in first_at:
            n, text = first_at[one.calendar]
            problems.append((item.pos, f"{where}: '{item.value}' repeats item {n}, '{text}' (both are "
                             f"'{one.calendar}'); remove one"))
            continue
        first_at[one.calendar or ""] = (i, item.value)
        found.append((one, timespec.parse_calendar(one.calendar or "").timezone))
    zones = {zone for _, zone in found}
    if not problems and len(zones) > 1:
        shown = ", ".join(sorted(z or "none" for z in zones))
        problems.append((node.pos, f"'schedule': the expressions of a list must all name the same time zone or none "
                         f"(got {shown}); write it once with the 'timezone' key"))
    if problems:
        raise InvalidEntries(problems)
    calendars = [one.calendar or "" for one, _ in found]
    return Schedule("calendar", calendar=calendars[0], also=tuple(calendars[1:]), has_timezone=zones != {None})


class LockSpec(NamedTuple):
    """The lock as written; completed by ``_job_rules`` once the job is known. A named
    tuple: a frozen dataclass executes six generated methods at every start."""

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


def _sub_keys(node: Map, prefix: str, table: dict[str, Callable[[Node], Any]], fields: dict[str, str] | None = None) -> dict[str, Any]:
    """A mapping under a key (`lock:`, `queue:`): each sub-key through its converter, every
    problem named `prefix.key` (InvalidEntries). -> field name -> value."""
    values: dict[str, Any] = {}
    problems: list[tuple[Pos, str]] = []
    for key, value in node.items:
        conv = table.get(key.value)
        if conv is None:
            # Both the likely spelling and the whole list: a sub-mapping has few keys.
            close = _closest(key.value, table)
            meant = f"; did you mean '{prefix}.{close}'?" if close else ""
            problems.append((key.pos, f"unknown key '{prefix}.{key.value}'{meant} (allowed: {', '.join(table)})"))
            continue
        try:
            values[(fields or {}).get(key.value, key.value)] = conv(value)
        except Invalid as exc:
            problems.append((exc.pos or value.pos, f"'{prefix}.{key.value}': {exc.message}"))
    if problems:
        raise InvalidEntries(problems)
    return values


def lock(node: Node) -> LockSpec:
    if isinstance(node, Scalar) and not node.is_null:
        return LockSpec(scope=choice(*LOCK_SCOPES)(node), pos=node.pos)
    if not isinstance(node, Map):
        raise Invalid(f"expected a scope ({', '.join(LOCK_SCOPES)}) or a mapping of {', '.join(_LOCK_KEYS)}; got {_kind(node)}")
    values = _sub_keys(node, "lock", _LOCK_KEYS, _LOCK_FIELDS)
    return LockSpec(pos=node.pos, keypos=tuple((k.value, k.pos) for k, _ in node.items), **values)


# --------------------------------------------------------------------------- key tables


# Table rows are named tuples (as target.py's ValueGate): a frozen dataclass executes six
# generated methods when it is defined, at every start of every command.
class Writes(NamedTuple):
    """The directive a simple key writes as it is: plan.py walks these rows (its
    ``_RENDER[render]`` turns the model's value into the directive's value(s); None,
    False, 0 and empty write nothing). The key's name is the feature a version gate names."""

    section: str  # Unit, Service (the service), Timer (a job's timer)
    directive: str
    render: str  # text | number | span | yes | units | environment | each


class Key(NamedTuple):
    field: str  # model attribute it fills
    convert: Callable[[Node], Any]
    writes: Writes | None = None  # None: plan.py composes the key's directives itself


_QUEUE_KEYS: dict[str, Callable[[Node], Any]] = {
    "max_pending": positive_int,
    "on_full": choice(*queue_contract.ON_FULL),
    "max_attempts": positive_int,
}


def queue_settings(node: Node) -> Queue:
    """`queue: {max_pending, on_full, max_attempts}` (README "overlap: queue")."""
    if isinstance(node, Scalar) and node.is_null:
        return Queue()
    if not isinstance(node, Map):
        raise Invalid(f"expected a mapping of {', '.join(_QUEUE_KEYS)}; got {_kind(node)}")
    return Queue(**_sub_keys(node, "queue", _QUEUE_KEYS))


# A new simple key (one directive, written as it is) takes all of this; the test that
# fails without each step is named:
# - a row here (a worker-only key in WORKER_KEYS, a job-only one in JOB_KEYS) and its field
#   in model.py. The JSON Schema (tools/schema.py) is generated from these rows, but a new
#   converter needs its shape in tools/schema.py CONVERTERS (tests/test_schema.py), and a
#   bad value its case in tests/errors/ with the exact message (tests/test_errors.py);
# - its directive in directive_table.py (generated from systemd's sources by
#   tools/gen_directives.py, so normally there already: plan.py gates on the release that
#   added it). The row's Writes puts the directive in plan.EMITTED, which then needs a row
#   in specifier_table.py (whether it expands '%', which escape.py follows;
#   tests/test_directive_table.py test_every_emitted_directive_has_one_specifier_fact);
# - a job or worker using it in tests/cases/more-keys.yaml (or an example), and the goldens
#   rendered again for 252 and 257: JOBGEN_UPDATE_GOLDEN=1 .venv/bin/python -m pytest
#   tests/test_golden.py, the diff reviewed (test_golden_units_use_exactly_the_directives_jobgen_declares
#   fails until a golden file holds the directive);
# - the manual page jobgen.yaml(5) generated again: .venv/bin/python tools/gen_manpages.py
#   docs/man (tests/integrations/test_manpages.py: the committed pages are the generated
#   ones and name every key);
# - its line in README.md ("Keys of jobs and workers", "Job keys" or "Worker keys").
COMMON_KEYS: dict[str, Key] = {
    "description": Key("description", text_line),
    "documentation": Key("documentation", documentation_uris, Writes("Unit", "Documentation", "each")),
    "command": Key("command", argv),
    "user": Key("user", user_name, Writes("Service", "User", "text")),
    "group": Key("group", user_name, Writes("Service", "Group", "text")),
    "working_directory": Key("working_directory", abs_path, Writes("Service", "WorkingDirectory", "text")),
    "environment": Key("environment", environment, Writes("Service", "Environment", "environment")),
    "environment_file": Key("environment_file", optional_abs_path, Writes("Service", "EnvironmentFile", "text")),
    "hardening": Key("hardening", choice(*HARDENING_PROFILES)),
    "memory_max": Key("memory_max", memory_size, Writes("Service", "MemoryMax", "text")),
    "on_failure": Key("on_failure", unit_names, Writes("Unit", "OnFailure", "units")),
}

JOB_KEYS: dict[str, Key] = COMMON_KEYS | {
    "schedule": Key("schedule", schedule),
    "timezone": Key("timezone", timezone),
    "overlap": Key("overlap", choice(*OVERLAP_POLICIES)),
    "wait_timeout": Key("wait_usec", timespan),
    "lock": Key("lock", lock),
    "timeout": Key("timeout_usec", timespan),
    "persistent": Key("persistent", boolean, Writes("Timer", "Persistent", "yes")),
    "randomized_delay": Key("randomized_delay_usec", timespan, Writes("Timer", "RandomizedDelaySec", "span")),
    "fixed_random_delay": Key("fixed_random_delay", boolean, Writes("Timer", "FixedRandomDelay", "yes")),
    "randomized_offset": Key("randomized_offset_usec", timespan, Writes("Timer", "RandomizedOffsetSec", "span")),
    "accuracy": Key("accuracy_usec", timespan),
    "on_success": Key("on_success", unit_names, Writes("Unit", "OnSuccess", "units")),
    "mail_on_failure": Key("mail_on_failure", mail_address),
    "queue": Key("queue", queue_settings),
}

WORKER_KEYS: dict[str, Key] = COMMON_KEYS | {
    "instances": Key("instances", whole_number(limits.INSTANCES, "jobgen's limit for one worker (README: Limits)")),
    "type": Key("type", choice("exec", "notify", "simple"), Writes("Service", "Type", "text")),
    "restart": Key("restart", choice("on-failure", "always", "on-abnormal", "no"), Writes("Service", "Restart", "text")),
    "restart_delay": Key("restart_delay_usec", timespan, Writes("Service", "RestartSec", "span")),
    "restart_max_delay": Key("restart_max_delay_usec", timespan, Writes("Service", "RestartMaxDelaySec", "span")),
    "restart_steps": Key("restart_steps", positive_int, Writes("Service", "RestartSteps", "number")),
    "start_limit_interval": Key("start_limit_interval_usec", timespan, Writes("Unit", "StartLimitIntervalSec", "span")),
    "start_limit_burst": Key("start_limit_burst", positive_int, Writes("Unit", "StartLimitBurst", "number")),
    "stop_signal": Key("stop_signal", stop_signal, Writes("Service", "KillSignal", "text")),
    "stop_timeout": Key("stop_timeout_usec", timespan, Writes("Service", "TimeoutStopSec", "span")),
    "recycle_after": Key("recycle_after_usec", timespan, Writes("Service", "RuntimeMaxSec", "span")),
    "watchdog": Key("watchdog_usec", timespan, Writes("Service", "WatchdogSec", "span")),
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
    import difflib  # only a manifest with a misspelt word needs it

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return close[0] if close else None


def _hint(word: str, options, close: str | None = None) -> str:
    """For an unknown key: the likely spelling (``close``, when already looked up), or
    else every allowed one."""
    close = close or _closest(word, options)
    return f"; did you mean '{close}'?" if close else "; allowed: " + ", ".join(options)


# --------------------------------------------------------------------------- the pass

class _TooMany(Exception):
    """More problems than limits.PROBLEMS: validation stops (every problem costs a message
    and often a "did you mean" search; 40,000 misspelt keys took minutes)."""


class _Problems:
    def __init__(self) -> None:
        self.items: set[Diagnostic] = set()
        self.stopped_at: Pos | None = None
        self.errors = 0  # errors in items, counted as added: asked twice per job

    def add(self, diagnostic: Diagnostic) -> None:
        if len(self.items) >= limits.PROBLEMS:
            self.stopped_at = diagnostic.pos
            raise _TooMany
        before = len(self.items)
        self.items.add(diagnostic)
        if len(self.items) > before and diagnostic.severity == ERROR:
            self.errors += 1

    def error(self, pos: Pos, message: str) -> None:
        self.add(Diagnostic(pos, ERROR, message))

    def warning(self, pos: Pos, message: str) -> None:
        self.add(Diagnostic(pos, WARNING, message))

    def error_count(self) -> int:
        # Counted, not summed over items: a manifest of 1,000 jobs with a warning each
        # made the sum 2,000 passes over up to 1,000 problems.
        return self.errors


class _Seen:
    """What one job or worker wrote, beyond the values that converted. Cross-key rules
    ask this, so a key that is present but refused (already reported) is not reported
    again as missing, and a refused value is not used to judge other keys. (A plain
    class: a dataclass executes its generated methods at every start.)"""

    def __init__(self, keypos: dict[str, Pos], failed: set[str], meant: set[str]):
        self.keypos = keypos  # every known key written (own or from defaults), valid or not
        self.failed = failed  # keys whose value was refused
        self.meant = meant  # keys an unknown (misspelt) key was probably meant to be

    def wrote(self, key: str) -> bool:
        return key in self.keypos or key in self.meant


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
            close = _closest(key.value, table)
            problems.error(key.pos, f"{what}: unknown key '{key.value}'{_hint(key.value, sorted(table), close)}")
            if close:
                seen.meant.add(close)
            continue
        seen.keypos[key.value] = key.pos
        try:
            values[spec.field] = spec.convert(node)
        except Invalid as exc:
            seen.failed.add(key.value)
            if not inherited:
                for at, message in _key_problems(key.value, exc, node):
                    problems.error(at, f"{what}: {message}")
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
            for at, message in _key_problems(key.value, exc, node):
                p.error(at, f"defaults: {message}")


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
    overlap = None if "overlap" in seen.failed else v.get("overlap", DEFAULT_OVERLAP)
    waits = overlap is not None and OVERLAP[overlap].waits
    if waits and not seen.wrote("wait_timeout"):
        p.error(
            keypos.get("overlap", pos),
            f"{what}: 'overlap: wait' needs 'wait_timeout', how long a run may wait for the lock (e.g. wait_timeout: 10min)",
        )
    if overlap is not None and not waits and "wait_timeout" in keypos:
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
            v["schedule"] = Schedule("calendar", calendar=f"{sched.calendar} {tz}", has_timezone=True,
                                     also=tuple(f"{c} {tz}" for c in sched.also))
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
    v["queue"] = _job_queue(what, overlap, v.get("queue"), v["lock"], seen, pos, p)
    return Job(name=name, pos=pos, keypos=keypos, **v)


def _queue_lacks_database(url: str) -> bool:
    try:
        raw = locks.split_url(url)
    except locks.UrlProblem:
        return False  # the lock check reports the URL itself
    return locks.SCHEMES[raw.scheme].queue_needs_database and not raw.path.strip("/")


def _job_queue(what: str, overlap: str | None, queue: Queue | None, lock: Lock | None, seen: _Seen, pos: Pos, p: _Problems) -> Queue | None:
    if overlap is None or not OVERLAP[overlap].queues:
        if "queue" in seen.keypos and overlap is not None:
            p.error(seen.keypos["queue"], f"{what}: 'queue' only applies to 'overlap: queue' (overlap is '{overlap}'); remove it or set 'overlap: queue'")
        return None
    if lock is not None and not SCOPES[lock.scope].lock_file and not SCOPES[lock.scope].server:
        # `jobgen drain` run by hand, or from a second unit, must see the drainer's lock.
        shared = "' or '".join(name for name, s in SCOPES.items() if s.lock_file or s.server)
        p.error(seen.keypos.get("lock", pos), f"{what}: 'overlap: queue' needs 'lock.scope: {shared}' (the drainer's lock); '{lock.scope}' guards only the unit")
    if lock is not None and SCOPES[lock.scope].server and lock.backend and _queue_lacks_database(lock.backend):
        # GET_LOCK needs no database; the queue's table does.
        p.error(seen.keypos.get("lock", pos), f"{what}: 'overlap: queue' keeps its requests in a table: 'lock.backend' must name a database (e.g. mariadb://db.internal/jobs)")
    return queue or Queue()


def _job_lock(what: str, job: str, overlap: str | None, spec: LockSpec | None, seen: _Seen, pos: Pos, p: _Problems) -> Lock | None:
    if overlap is not None and not OVERLAP[overlap].locks:
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
    scope = spec.scope or DEFAULT_SCOPE
    kind = SCOPES[scope]
    kp = dict(spec.keypos)
    at = spec.pos or seen.keypos.get("lock", pos)
    if not kind.can_wait and overlap is not None and OVERLAP[overlap].waits:
        p.error(kp.get("scope", at), f"{what}: 'lock.scope: unit' cannot wait; use scope host or cluster with 'overlap: wait'")
    if not kind.lock_file and spec.path is not None:
        p.error(kp["path"], f"{what}: 'lock.path' only applies to 'scope: host' (scope is '{scope}')")
    if spec.path is not None and not spec.path.endswith(".lock"):
        # The name says what the file is for: nobody deletes a *.lock file to tidy up.
        p.error(kp["path"], f"{what}: 'lock.path' must end in .lock, got '{spec.path}'")
    elif spec.path is not None and (why := names.lock_path_problem(spec.path)):
        p.error(kp["path"], f"{what}: 'lock.path' {why}, got {spec.path!r}")
    if not kind.server:
        for key in ("backend", "ttl", "password_file", "credential"):
            if getattr(spec, _LOCK_FIELDS.get(key, key)) is not None:
                p.error(kp[key], f"{what}: 'lock.{key}' only applies to 'scope: cluster' (scope is '{scope}')")
    name = spec.name or job
    # Without lock.name the job's name is used, already checked as a unit name (a subset).
    # The rule per scope is the lock contract's, the one `jobgen lock --name` applies.
    if spec.name is not None and (problem := locks.name_problem(scope, name)):
        p.error(kp.get("name", at), f"{what}: 'lock.name': {problem}")
    if kind.server:
        if spec.backend is None:
            p.error(at, f"{what}: 'scope: cluster' needs 'lock.backend', the lock server's URL ({locks.SCHEME_LIST})")
        elif problem := locks.url_problem(spec.backend):
            p.error(kp["backend"], f"{what}: 'lock.backend': {problem}")
        if spec.name is None:
            p.error(at, f"{what}: 'scope: cluster' needs an explicit 'lock.name', the identity every host shares (e.g. 'shop:{job}')")
        if spec.credential is not None and (problem := locks.credential_problem(spec.credential)):
            p.error(kp["credential"], f"{what}: 'lock.credential': {problem}")
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
    if recycle is not None and v.get("restart") == "no":
        # RuntimeMaxSec= ends the worker with result 'timeout' (systemd.service(5)), which
        # every Restart= policy but 'no' restarts.
        p.error(
            keypos["recycle_after"],
            f"{what}: 'recycle_after' with 'restart: no': the worker is stopped after {_span_text(recycle)} "
            "(RuntimeMaxSec=) and never started again; use restart: on-failure (the default) or always",
        )
    if seen.wrote("restart_steps") != seen.wrote("restart_max_delay"):
        # systemd.service(5): RestartSteps= without RestartMaxDelaySec= (or the reverse) is ignored.
        key, other = ("restart_steps", "restart_max_delay") if "restart_steps" in keypos else ("restart_max_delay", "restart_steps")
        p.error(keypos[key], f"{what}: '{key}' needs '{other}' (systemd ignores one without the other)")
    return Worker(name=name, pos=pos, keypos=keypos, **v)


# --------------------------------------------------------------------------- lint
# Values systemd accepts but that do not do what the user wants. Checked on the keys a
# job or worker writes itself, and once on 'defaults:' (not once per job that inherits).

# systemd warns "Special user nobody configured, this is not safe!" (systemd-analyze
# verify, 252 and 257). nobody is the kernel's overflow user: it also owns every file of
# an unmapped user (NFS root squash, user namespaces), so a job running as nobody can
# touch those, and they can touch its files. 65534 is the same user by number.
_SHARED_USERS = ("nobody", "65534")
# Names of variables that hold secrets. Unit files are world-readable (0644 in
# /etc/systemd/system) and `systemctl show` prints Environment= to every local user.
_SECRET_NAME = r"PASSWORD|PASSWD|TOKEN|SECRET|API_?KEY"  # compiled at its first use (re's cache): environment: only


def _lint_user(what: str, node: Node, p: _Problems) -> None:
    if isinstance(node, Scalar) and node.value in _SHARED_USERS:
        p.warning(
            node.pos,
            f"{what}: 'user: {node.value}' is the shared overflow user, which also owns the files of unmapped users "
            "(systemd warns \"Special user nobody configured, this is not safe!\"); run it as a dedicated "
            "system user (useradd --system NAME)",
        )


def _lint_environment(what: str, node: Node, p: _Problems) -> None:
    for key, value in node.items if isinstance(node, Map) else ():
        if re.search(_SECRET_NAME, key.value, re.IGNORECASE) and isinstance(value, Scalar) and value.value:
            p.warning(
                key.pos,
                f"{what}: 'environment': {key.value} looks like a secret, and unit files are readable by every local "
                "user (so is `systemctl show`); put it in 'environment_file' (a file only root can read) "
                "or, for the lock password, use 'lock.credential'",
            )


_LINTS: dict[str, Callable[[str, Node, "_Problems"], None]] = {
    "user": _lint_user,
    "environment": _lint_environment,
}


def _lint(what: str, body: Map, p: _Problems) -> None:
    for key, node in body.items:
        if check := _LINTS.get(key.value):
            check(what, node, p)


# --------------------------------------------------------------------------- across jobs


def _manifest_name(path: str, p: _Problems) -> None:
    """The manifest's file name is part of what jobgen writes: the first line of every
    unit (header.line) and the tmpfiles.d snippet's name (limits.TMPFILES_CONF)."""
    name = PurePath(path).name
    if (m := search_control(name)) is not None:
        # A line break would end the header's comment and start a line of its own in every
        # unit; a byte that is not UTF-8 (a surrogate here, os.fsdecode) has no text to write.
        what = "a byte that is not UTF-8" if 0xDC80 <= ord(m.group()) <= 0xDCFF else f"the control character U+{ord(m.group()):04X}"
        p.error(Pos(path, 1, 1), f"the manifest's file name holds {what}; it is written into the first line of every unit "
                "and into the tmpfiles.d snippet's name: rename the file")
        return
    stem = PurePath(path).stem
    if (size := len(stem.encode("utf-8", "surrogateescape"))) > limits.MANIFEST_STEM_BYTES:
        p.error(
            Pos(path, 1, 1),
            f"the manifest's file name has {size} bytes before its extension; jobgen allows at most "
            f"{limits.MANIFEST_STEM_BYTES}, so that tmpfiles.d/{limits.TMPFILES_CONF.format('NAME')} fits in "
            f"{limits.NAME_MAX} bytes (README: Limits)",
        )


# Folders a hardening profile hides from the unit or gives it a private copy of
# (systemd.exec(5)): a lock file there is not the file `jobgen run` or another unit
# opens, so the lock would lock nothing (or fail to open at all).
_PRIVATE_VIEWS: dict[tuple[str, str], tuple[str, ...]] = {
    ("PrivateTmp", "yes"): ("/tmp", "/var/tmp"),
    ("ProtectHome", "yes"): ("/home", "/root", "/run/user"),
}


def _private_view(hardening: str, path: str) -> tuple[str, str] | None:
    """(the directive, the folder) that makes ``path`` private to the unit, or None."""
    for _, key, value in HARDENING[hardening]:
        for folder in _PRIVATE_VIEWS.get((key, value), ()):
            if path.startswith(folder + "/"):
                return f"{key}={value}", folder
    return None


def _calendar_searches(tree: Map, jobs: tuple[Job, ...], p: _Problems) -> None:
    """Whether each calendar ever elapses and whether systemd can compute it, within
    jobgen's bounds (timespec.search: steps per expression and per manifest, so a manifest
    of thousands of slow expressions cannot stall `check` or the generator at boot).
    Never elapsing is an error (jobgen's rule: the job could never run). systemd accepts
    the rest without a word when it loads the timer, so they are warnings: an expression
    its find_next() gives up on (the timer then stops), and one jobgen did not finish
    checking."""
    budget = timespec.Steps(timespec.MANIFEST_STEPS)
    section = tree.get("jobs")
    unchecked: list[Job] = []
    for job in jobs:
        if job.schedule.kind != "calendar" or not job.schedule.calendar:
            continue
        # Every item of a `schedule:` list is its own OnCalendar= line: one that never
        # elapses is as much a mistake as a single expression that never does.
        for i, expression in enumerate(job.schedule.calendars):
            found = timespec.search(timespec.parse_calendar(expression), budget)
            if found.spent == "manifest":
                unchecked.append(job)
                break
            if not (found.never or found.loop is not None or found.spent == "expression"):
                continue  # nothing to say: the expression and its place are not needed
            _calendar_problem(section, job, i, expression, found, p)
    if unchecked:
        first = unchecked[0]
        p.warning(first.where("schedule"), f"job '{first.name}': 'schedule': this and {len(unchecked) - 1:,} later calendar "
                                           f"schedule(s) were not checked for elapses: the manifest used up jobgen's bound of "
                                           f"{timespec.MANIFEST_STEPS:,} search steps per manifest")


def _calendar_problem(section, job: Job, i: int, expression: str, found, p: _Problems) -> None:
    """What _calendar_searches found wrong with item ``i`` of a job's calendars, at its place."""
    node = section.get(job.name) if isinstance(section, Map) else None
    node = node.get("schedule") if isinstance(node, Map) else None
    if isinstance(node, Map):  # schedule: {calendar: ...}
        node = node.get("calendar")
    what = f"job '{job.name}': 'schedule'"
    if isinstance(node, Seq):  # schedule: [EXPR, ...]: the item's own place
        node = node.items[i] if i < len(node.items) else None
        what = f"{what} item {i + 1}"
    written = node.value if isinstance(node, Scalar) else expression
    pos = node.pos if node is not None else job.where("schedule")
    if found.never:
        # A date no year has (Feb 30, Apr 31): systemd accepts it and the timer never fires.
        p.error(pos, f"{what}: calendar expression '{written}' never elapses: no date from {timespec.MIN_YEAR} to "
                     f"{timespec.MAX_YEAR} matches it (systemd would accept it and never run the job)")
    elif found.loop is not None:
        p.warning(pos, f"{what}: systemd 252 and 257 cannot compute the next elapse of '{written}' in {found.loop.zone} "
                       f"after {found.loop.after:%Y-%m-%d %H:%M:%S} UTC (\"Infinite loop in calendar calculation\"): "
                       "the timer stops there and the job runs no more until the timer is started again")
    elif found.spent == "expression":
        p.warning(pos, f"{what}: jobgen gave up searching the elapses of '{written}' after {timespec.EXPRESSION_STEPS:,} "
                       "steps (its bound per expression): not checked that it ever elapses")


def _host_lock_files(jobs: tuple[Job, ...], p: _Problems) -> None:
    """Host lock files: the one each job locks must be the file every runner opens, and
    a file two jobs share is created once by tmpfiles.d, with one owner."""
    users: dict[str, Job] = {}
    for job in jobs:
        lock = job.lock
        if lock is None or not lock.kind.lock_file:
            continue
        # Spelled differently, one file: '/run/lock//x.lock' and '/run/lock/./x.lock'.
        path = posixpath.normpath(lock.path or names.lock_file(lock.name))
        what, at = f"job '{job.name}'", job.where("lock")
        # A host lock name's length (its file NAME.lock) is the lock contract's rule (_job_lock).
        if lock.path is not None and (private := _private_view(job.hardening, path)):
            directive, folder = private
            p.error(
                at,
                f"{what}: 'lock.path' {lock.path} is under {folder}, which the unit does not share with the host "
                f"({directive} from 'hardening: {job.hardening}'): the unit and `jobgen run` would lock different "
                "files; leave lock.path out (the lock goes to /run/jobgen) or choose a path outside "
                f"{folder}",
            )
        first = users.setdefault(path, job)
        # `user: root` and no user: are one identity (an imported root job names it).
        if (first.user or "root", first.group) != (job.user or "root", job.group):
            # Two lines for one path in tmpfiles.d: systemd-tmpfiles keeps the first and
            # ignores the other ("Duplicate line"), so one job cannot open its lock.
            p.error(
                at,
                f"{what}: shares the lock file {path} with job '{first.name}' (line {first.pos.line}) but runs as "
                f"{_identity(job)}, not {_identity(first)}: the file has one owner (tmpfiles.d keeps one line per "
                "path), so one of them could not open it; run both as the same user and group, or give them "
                "different lock names",
            )


def _identity(c: Common) -> str:
    user = f"user {c.user}" if c.user and c.user != "root" else "root"
    return f"{user}, group {c.group}" if c.group else user


def _cluster_jobs(jobs: tuple[Job, ...], p: _Problems) -> None:
    for job in jobs:
        if job.lock is None or not job.lock.kind.server or job.timeout_usec is not None:
            continue
        p.warning(
            job.where("lock"),
            f"job '{job.name}': a cluster-locked job without 'timeout' runs with TimeoutStartSec=infinity: a run "
            "that hangs keeps the lock on every host until someone stops it; set 'timeout' to the longest a "
            "run may take (e.g. timeout: 1h)",
        )


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
    above: str | None = None  # the last entry that is a job or worker (a mapping)
    for key, body in section.items if section else ():
        what = f"{kind} '{key.value}'"
        errors_before = p.error_count()
        if not isinstance(body, Map) and key.value in JOB_KEYS | WORKER_KEYS:
            p.error(key.pos, _outdented(kind, key.value, key.value in table, above))
            continue
        if isinstance(body, Map):
            above = key.value
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
        _lint(what, body, p)
        unit = rules(key.value, values, seen, key.pos, p)
        if p.error_count() == errors_before and not seen.failed:
            out.append(unit)
    return tuple(sorted(out, key=lambda u: u.name))


def _outdented(kind: str, key: str, own: bool, above: str | None) -> str:
    """A key of a job written at the level of job names (`user: x` under `jobs:`): a
    job's body is a mapping, so a name with a plain value that is also a key is most
    likely a line that lost its indentation. ``own``: a key of this kind (not the other)."""
    owner = kind if own else ("worker" if kind == "job" else "job")
    where = f"under {kind} '{above}'" if above else f"under the {kind} it belongs to"
    return (
        f"{kind}s: '{key}' is a {owner} key, written at the level of {kind} names; "
        f"indent it {where}, level with that {kind}'s other keys"
    )


def validate(tree: Node, path: str, target_override: Target | None = None) -> tuple[Manifest, list[Diagnostic]]:
    """Return the model and its warnings, or raise ManifestError with every error (up to
    limits.PROBLEMS of them)."""
    p = _Problems()
    try:
        return _validate(tree, path, target_override, p)
    except _TooMany:
        stop = f"more than {limits.PROBLEMS:,} problems; stopped here (README: Limits)"
        raise ManifestError(sorted(p.items) + [Diagnostic(p.stopped_at or Pos(path, 1, 1), ERROR, stop)]) from None


def _validate(tree: Node, path: str, target_override: Target | None, p: _Problems) -> tuple[Manifest, list[Diagnostic]]:
    if not isinstance(tree, Map):
        raise ManifestError(
            [Diagnostic(tree.pos, ERROR, f"the manifest must be a mapping with jobgen: {MANIFEST_VERSION} and jobs:, got {_kind(tree)}")]
        )
    for problem in tree.problems:  # what load.py read past: reported with everything else
        p.add(problem)
    _manifest_name(path, p)
    for key, _ in tree.items:
        if key.value not in TOP_LEVEL_KEYS:
            p.error(key.pos, f"unknown top-level key '{key.value}'{_hint(key.value, TOP_LEVEL_KEYS)}")
    version = tree.get("jobgen")
    if version is None:
        p.error(tree.pos, f"missing 'jobgen: {MANIFEST_VERSION}' (the manifest format version)")
    elif not isinstance(version, Scalar) or version.value != MANIFEST_VERSION:
        p.error(version.pos, f"'jobgen' must be {MANIFEST_VERSION} (the manifest format this jobgen reads), got {_kind(version)}")
    target, target_pos = _target(tree, p)
    # No target: what is said about it (plan's "no target systemd given" note) is placed at
    # the top-level mapping, where 'target:' belongs: its first key (line 1 after any
    # leading comments), not at some job.
    target_pos = target_pos or tree.pos
    defaults = _section(tree, "defaults", p)
    if defaults:
        _check_defaults(defaults, p)
        _lint("defaults", defaults, p)
    taken: dict[str, tuple[str, Pos]] = {}
    jobs = _units("job", _section(tree, "jobs", p), defaults, JOB_KEYS, _job_rules, p, taken)
    workers = _units("worker", _section(tree, "workers", p), defaults, WORKER_KEYS, _worker_rules, p, taken)
    _host_lock_files(jobs, p)
    _cluster_jobs(jobs, p)
    _calendar_searches(tree, jobs, p)
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
        return None, section.pos
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
