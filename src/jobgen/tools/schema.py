"""`jobgen schema`: the manifest's JSON Schema, generated from the tables validation uses.

Not a second copy that can drift: the keys come from validate.JOB_KEYS, WORKER_KEYS, _LOCK_KEYS,
_QUEUE_KEYS, TOP_LEVEL_KEYS and _SCHEDULE_FORMS; what each key is and writes from its row
(Key.writes, REQUIRED_*_KEYS); each value's shape from its converter through CONVERTERS below
(a converter missing there is an error here, which tests/test_schema.py turns into a failing
test), whose patterns are built from the tables the converters read (names.py, timespec.py's
units, weekdays and shorthands, shellwords.py's operators, the lock contract's name rules and
URL schemes, escape.CONTROL); the rules between keys from the policy and scope tables
(contract/policies.py). `jobgen check` stays the authority: it also knows calendar ranges,
time zones, rules across jobs and what the target systemd supports (tests/test_schema.py
measures which of tests/errors/ the schema cannot reject).

Editors read YAML with its usual coercions (`30` is a number, `true` a boolean), while jobgen
reads every scalar as the text written. So a key takes the YAML types whose text jobgen
accepts there (a time span `30` is 30s), and patterns (which apply to strings only) say the rest.
"""

from __future__ import annotations

import inspect
import signal
from typing import Any, Callable

from jobgen.compiler import escape, limits, names, notify, shellwords, timespec, validate
from jobgen.compiler.model import HARDENING_PROFILES, LOCK_SCOPES
from jobgen.contract import locks
from jobgen.contract import queue as queue_contract
from jobgen.contract.outcomes import QUEUE
from jobgen.contract.policies import DEFAULT_OVERLAP, DEFAULT_SCOPE, OVERLAP, SCOPES

SCHEMA_ID = "https://jobgen.invalid/manifest-1.schema.json"


# --------------------------------------------------------------------------- patterns


# Patterns are read by Python's re (jsonschema, check-jsonschema) and by ECMA-262 with the 'u'
# flag (editors), which refuses escapes of characters that are not syntax ('\\-', '\\&'):
# escape only what is syntax in both.
_SYNTAX = set("\\^$.|?*+()[]{}/")


def _lit(text: str) -> str:
    return "".join("\\" + c if c in _SYNTAX else c for c in text)


def _class(chars: str, negate: bool = False) -> str:
    body = "".join("\\" + c if c in "\\]^-[" else c for c in chars)
    return f"[{'^' if negate else ''}{body}]"


def _any_case(word: str) -> str:
    """``word`` matched in any case (ECMA-262 has no inline flags)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else _lit(c) for c in word)


def _one_of(words) -> str:
    return "(?:" + "|".join(_lit(w) for w in sorted(words, key=lambda w: (-len(w), w))) + ")"


# escape.CONTROL without the planes above the BMP (a class of astral characters needs the
# 'u' flag in ECMA-262): a line break, control character or BMP noncharacter.
_CONTROL = escape.CONTROL.pattern.split(r"\U", 1)[0] + "]"
_ONE_LINE = f"^[^{_CONTROL[1:]}*$"

_NUMBER = r"(?:[0-9]{1,20}(?:\.[0-9]*)?|\.[0-9]+)(?![0-9])"  # validate._LONG_NUMBER: 21 digits are too many
_SPAN_UNIT = _one_of(unit for unit, _ in timespec._TIMESPAN_UNITS)
SPAN = rf"^\s*(?:{_NUMBER}\s*{_SPAN_UNIT}?\s*)+$"

_ZONE = timespec._ZONE_NAME.pattern
_WEEKDAY = "(?:" + "|".join(_any_case(d) for d in timespec._WEEKDAY_ABBR) + ")[A-Za-z]*"
_WEEKDAYS = rf"{_WEEKDAY}(?:(?:,|\.\.|-){_WEEKDAY})*"
_DATE = r"[0-9*,./~-]+"
_TIME = r"[0-9*,./]*:[0-9*,./:]*"
_SHORTHAND = "(?:" + "|".join(_any_case(s) for s in timespec._SHORTHANDS) + ")"
# The shape of systemd.time(7)'s CALENDAR EVENTS: a shorthand, @epoch, or
# [weekdays] [date] [time] with an optional zone. Which numbers are in range is check's.
CALENDAR = (
    rf"^\s*(?:{_SHORTHAND}|@[0-9]+|(?:{_WEEKDAYS}(?: +{_DATE})?(?: +{_TIME})?|{_DATE}(?: +{_TIME})?|{_TIME}))"
    rf"(?: +{_ZONE})?\s*$"
)

# A command as one string: words by sh's quoting, without the shell syntax shellwords.py
# refuses (operators, globs, `...`, and '$' before what the shell would expand).
_EXPANDS = shellwords._EXPANDS.pattern.replace('\\"', '"')  # what makes '$' an expansion
_EXPANDS_QUOTED = _EXPANDS.replace("'\"", "")  # in double quotes, $' and $" are a literal '$'
_BARE = _class(shellwords._OPERATOR_CHARS + "`*?$'\"\\", negate=True)
_DOUBLE = rf'"(?:[^"\\$`]|\\.|\$(?!{_EXPANDS_QUOTED}))*"'
_WORDS = rf"(?:{_BARE}|\\.|'[^']*'|{_DOUBLE}|\$(?!{_EXPANDS}))*"
COMMAND = rf"^(?=\s*['\"]?/){_WORDS}$".replace('\\"', '"')

_VARIABLE = locks.VARIABLE.pattern
_SECRETS = [w for w in locks._SECRET_KEY.pattern.split("|") if not w.startswith("^")]
_SECRET_KEYS = [w.strip("^$") for w in locks._SECRET_KEY.pattern.split("|") if w.startswith("^")]
_NOT_SECRET = "".join(rf"(?!{_lit(k)}=)" for k in sorted(locks._NOT_SECRET))
# A literal secret in the query (a value that is not exactly one ${VARIABLE}).
_QUERY_SECRET = (
    rf"[?&]{_NOT_SECRET}(?:[^=&#]*{_one_of(_SECRETS)}[^=&#]*|{_one_of(_SECRET_KEYS)})=(?!{_VARIABLE}(?:[&#]|$))[^&#]"
)
# scheme://[user[:${VARIABLE}]@]host[:port][/path][?query]: a host, and no literal password.
BACKEND = (
    rf"^(?:{'|'.join(_any_case(s) for s in locks.SCHEMES)})://"
    rf"(?:[^:@/?#$]*(?::(?:{_VARIABLE})?)?@)?(?:\[[0-9A-Fa-f:.%a-z]+\]|[^\[\]:/?#@]+)(?::(?:[0-9]+|{_VARIABLE}))?(?:[/?#][^\s]*)?$"
)

_SIGNALS = sorted(s for s in signal.Signals.__members__ if s.startswith("SIG") and not s.startswith("SIG_") and s not in ("SIGKILL", "SIGSTOP"))
_LOCK_SUFFIX = names.lock_file("").rpartition("/")[2]  # ".lock"
_MEMORY = r"^0*(?:[1-9][0-9]*[KMGT]|(?:[1-9][0-9]?|100)%)$"  # validate.memory_size: a unit, not 0, at most 100%


# --------------------------------------------------------------------------- value shapes


def _text(description: str, pattern: str = _ONE_LINE, types: tuple[str, ...] = ("string", "number")) -> dict:
    return {"type": list(types) if len(types) > 1 else types[0], "description": description, "pattern": pattern}


def _span(description: str = "a time span (systemd.time(7)): 30s, 5min, 1h 30min; a bare number is seconds") -> dict:
    return {"description": description, "anyOf": [{"type": "string", "pattern": SPAN}, {"type": "integer", "minimum": 1}]}


def _whole(top: int) -> dict:
    return {"description": f"a whole number from 1 to {top}",
            "anyOf": [{"type": "integer", "minimum": 1, "maximum": top}, {"type": "string", "pattern": "^[0-9]+$"}]}  # fmt: skip


# No '.' or '..' component (systemd's path_is_normalized; validate refuses them too).
_NORMALIZED = r"(?!(?:[^/]*/)*\.{1,2}(?:/|$))"
_PATH = {"type": "string", "description": "an absolute, normalized path", "pattern": "^" + _NORMALIZED + "/" + _ONE_LINE[1:]}
_USER = {"description": f"a user or group name (at most {limits.USER_NAME_MAX} characters) or number", "anyOf": [
    {"type": "string", "pattern": f"^(?:{names.USER_NAME.pattern})$", "maxLength": limits.USER_NAME_MAX},
    {"type": "integer", "minimum": 0, "maximum": limits.UID_MAX}]}  # fmt: skip
_UNIT = {"type": "string", "pattern": f"^{names.UNIT_REF.pattern}$", "maxLength": limits.UNIT_NAME_MAX}
_UNITS = {"description": "a unit name, or a list of them (alert@%n.service)", "anyOf": [_UNIT, {"type": "array", "items": _UNIT}]}
_ARGV = {
    "description": "the program and its arguments: a list, or one string split by POSIX shell rules "
    "(no shell runs it: no operators, globs or expansions); the program is an absolute path",
    "anyOf": [{"type": "string", "pattern": COMMAND},
              {"type": "array", "minItems": 1, "maxItems": limits.COMMAND_ARGS,
               "prefixItems": [{"type": "string", "pattern": "^/"}], "items": {"type": ["string", "number", "boolean"]}}],
}  # fmt: skip
_BOOLEAN = {"description": "true or false", "anyOf": [
    {"type": "boolean"}, {"enum": sorted(w for word in validate._TRUE | validate._FALSE for w in {word, word.title(), word.upper()})}]}  # fmt: skip
_CALENDAR = {"type": "string", "pattern": CALENDAR,
             "description": "an OnCalendar= expression (systemd.time(7)): daily, 'Mon..Fri 02:30', '*:0/15', '*-*-* 02:30 Europe/Berlin'"}  # fmt: skip


def _schedule() -> dict:
    forms = {name: (_CALENDAR if conv is validate.calendar else _span()) for name, conv in validate._SCHEDULE_FORMS.items()}
    return {"description": f"when the job runs: a calendar expression, a list of them, or a mapping with one of {', '.join(forms)}", "anyOf": [
        _CALENDAR,
        # validate.calendar_list: one OnCalendar= line each, no two alike (the same text is
        # what JSON Schema can see; validate.py also compares the normalized forms).
        {"type": "array", "minItems": 1, "uniqueItems": True, "items": _CALENDAR,
         "description": "several calendar expressions: the job runs at each one's elapses"},
        {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False, "properties": forms},
    ]}  # fmt: skip


def _documentation() -> dict:
    # validate.documentation_uris: one of systemd's URI types, no white space
    uri = _text("a URI", f"^(?:{'|'.join(_lit(p) for p in validate.DOCUMENTATION_SCHEMES)})\\S*$", ("string",))
    return {"description": f"documentation URIs ({', '.join(validate.DOCUMENTATION_SCHEMES)}): one Documentation= line each",
            "oneOf": [uri, {"type": "array", "minItems": 1, "items": uri}]}


# What each overlap policy and lock scope does, said from their rows (contract/policies.py).
def _policy_text(name: str) -> str:
    p = OVERLAP[name]
    if not p.locks:
        what = "no lock: runs may overlap"
    elif p.waits:
        what = f"a run waits for the lock up to wait_timeout; logged '{p.conflict_outcome}' when it runs out"
    elif p.queues:
        what = "each trigger records a request (queue: settings); one drainer at a time runs them in order"
    else:
        what = f"a run that finds the lock held does not run its command; logged '{p.conflict_outcome}'"
    return f"{name}: {what}" + (" (default)" if name == DEFAULT_OVERLAP else "")


def _scope_text(name: str) -> str:
    s = SCOPES[name]
    if s.server:
        what = "a lock server (jobgen lock): every host; needs lock.backend and lock.name"
    elif s.lock_file:
        what = f"a lock file on the host (flock(1), {names.LOCK_DIR}/NAME{_LOCK_SUFFIX}): every runner on this host"
    else:
        what = "only systemd's one running instance per unit (cannot wait)"
    return f"{name}: {what}" + (" (default)" if name == DEFAULT_SCOPE else "")


def _choice(allowed: tuple[str, ...], explain: Callable[[str], str] | None = None) -> dict:
    out: dict[str, Any] = {"type": "string", "enum": list(allowed), "description": "one of " + ", ".join(allowed)}
    if explain:
        out["description"] = "; ".join(map(explain, allowed))
        out["enumDescriptions"] = [explain(v) for v in allowed]  # VS Code's hover per value
    return out


_EXPLAIN: dict[tuple[str, ...], Callable[[str], str]] = {
    tuple(OVERLAP): _policy_text,
    LOCK_SCOPES: _scope_text,
    queue_contract.ON_FULL: lambda v: f"{v}: " + next(t for e, t in QUEUE.items() if e.startswith(v)),
}


def _hardening_text(profile: str) -> str:
    from jobgen.compiler.hardening import HARDENING

    written = ", ".join(f"{key}={value}" for _, key, value in HARDENING[profile]) or "nothing"
    return f"{profile}: writes {written}"


_EXPLAIN[HARDENING_PROFILES] = _hardening_text


def _lock() -> dict:
    properties = {key: _convert(conv, f"lock.{key}") for key, conv in validate._LOCK_KEYS.items()}
    properties["path"] = {**properties["path"], "pattern": f"^/.*{_lit(_LOCK_SUFFIX)}$",
                          "description": f"scope host: the lock file, an absolute path ending in {_LOCK_SUFFIX}"}  # fmt: skip
    scope = properties["scope"]
    # Per scope: what its row needs and refuses (the keys that only a lock server reads).
    server_keys = ("backend", "ttl", "password_file", "credential")
    rules = []
    for name, s in SCOPES.items():
        is_scope = {"properties": {"scope": {"const": name}}, **({"required": ["scope"]} if name != DEFAULT_SCOPE else {})}
        then: dict[str, Any] = {"properties": {"name": {"pattern": f"^(?:{locks.NAME_RULES[name].pattern.pattern})$",
                                                        "maxLength": locks.NAME_RULES[name].max_len}}}  # fmt: skip
        if s.server:
            then["required"] = ["backend", "name"]
        else:
            then["properties"] |= {key: False for key in server_keys}
        if not s.lock_file:
            then["properties"]["path"] = False
        rules.append({"if": is_scope, "then": then})
    return {"description": "the lock: a scope, or a mapping of " + ", ".join(properties), "anyOf": [
        {**scope, "description": scope["description"]},
        {"type": "object", "additionalProperties": False, "properties": properties, "allOf": rules},
    ]}  # fmt: skip


def _queue() -> dict:
    properties = {key: _convert(conv, f"queue.{key}") for key, conv in validate._QUEUE_KEYS.items()}
    return {"description": "overlap: queue: max_pending, on_full, max_attempts", "anyOf": [
        {"type": "null"},
        {"type": "object", "additionalProperties": False, "properties": properties},
    ]}  # fmt: skip


def _environment() -> dict:
    value = {"anyOf": [{"type": "string", "pattern": _ONE_LINE}, {"type": ["number", "boolean"]}]}
    return {"type": "object", "description": "environment variables: NAME: value",
            "propertyNames": {"pattern": f"^{names.ENV_NAME.pattern}$"}, "additionalProperties": value}  # fmt: skip


# converter -> the JSON Schema of its values. Functions the key tables use directly.
CONVERTERS: dict[Callable[..., Any], Callable[[], dict]] = {
    validate.text_line: lambda: _text("one line of text"),
    validate.argv: lambda: _ARGV,
    validate.user_name: lambda: _USER,
    validate.abs_path: lambda: _PATH,
    validate.optional_abs_path: lambda: {**_PATH, "description": "an absolute path ('-/path': ignored if missing)", "pattern": "^-?" + _NORMALIZED + "/" + _ONE_LINE[1:]},
    validate.environment: _environment,
    validate.timespan: _span,
    validate.boolean: lambda: _BOOLEAN,
    validate.memory_size: lambda: _text("a size: 512M, 2G (K, M, G, T: base 1024) or a percentage of the host's memory, 1% to 100%", _MEMORY, ("string",)),
    validate.stop_signal: lambda: {"description": "a signal name: " + ", ".join(_SIGNALS), "anyOf": [
        {"enum": _SIGNALS}, {"type": "string", "pattern": f"^(?:{_any_case('SIG')})?(?:{'|'.join(_any_case(s[3:]) for s in _SIGNALS)})$"}]},  # fmt: skip
    validate.timezone: lambda: _text("an IANA time zone such as Europe/Berlin, or UTC", f"^{_ZONE}$", ("string",)),
    validate.schedule: _schedule,
    validate.lock: _lock,
    validate.queue_settings: _queue,
    validate.unit_names: lambda: _UNITS,
    validate.mail_address: lambda: _text(notify.ADDRESS_RULE, f"^(?:{notify.ADDRESS.pattern})$"),
    validate.documentation_uris: lambda: _documentation(),
}

# Lock keys whose converter is an inline lambda in validate._LOCK_KEYS.
_INLINE = {
    "lock.name": lambda: _text("the lock's name, shared by every host that runs the job (default: the job's name)", types=("string",)),
    "lock.backend": lambda: {**_text(f"the lock server's URL ({locks.SCHEME_LIST}); a password only as ${{VARIABLE}}", BACKEND, ("string",)),
                             "not": {"pattern": _QUERY_SECRET}},
    # contract/locks.credential_problem: printable ASCII without '/', ':', quotes or '\\', not '.' or '..'
    "lock.credential": lambda: _text("a credential as NAME:/path (LoadCredential=)",
                                     r"^(?!\.{1,2}:)[ !#-&(-.0-9;-\[\]-~]{1,255}:" + _NORMALIZED + "/" + _ONE_LINE[1:], ("string",)),
}


def _convert(conv: Callable[..., Any], key: str) -> dict:
    if conv in CONVERTERS:
        return CONVERTERS[conv]()
    closure = inspect.getclosurevars(conv).nonlocals
    if "allowed" in closure:  # validate.choice(...)
        allowed = tuple(closure["allowed"])
        return _choice(allowed, _EXPLAIN.get(allowed))
    if "maximum" in closure:  # validate.whole_number(...)
        return _whole(closure["maximum"])
    if key in _INLINE:
        return _INLINE[key]()
    raise KeyError(f"no JSON Schema for the converter of '{key}' ({conv.__qualname__}): add it to CONVERTERS")


def _describe(key: str, spec: validate.Key, shape: dict, required: dict[str, str]) -> dict:
    parts = [required[key] + " (required)"] if key in required else []
    parts.append(shape.get("description", ""))
    if spec.writes:
        parts.append(f"writes [{spec.writes.section}] {spec.writes.directive}=")
    return {**shape, "description": "; ".join(p for p in parts if p)}


def _section(table: dict[str, validate.Key], what: str, required: dict[str, str]) -> dict:
    return {key: _describe(key, spec, _convert(spec.convert, f"{what}.{key}"), required) for key, spec in table.items()}


# --------------------------------------------------------------------------- rules between keys
# Each is one of check's refusals (validate._job_rules / _worker_rules), said in terms of the
# policy and scope rows; tests/test_schema.py holds each to a tests/errors/ case.

_WAITS = [n for n, p in OVERLAP.items() if p.waits]
_NO_LOCK = [n for n, p in OVERLAP.items() if not p.locks]
_QUEUES = [n for n, p in OVERLAP.items() if p.queues]
_NOT_WAITING_SCOPES = [n for n, s in SCOPES.items() if not s.can_wait]
_NO_DRAINER_LOCK = [n for n, s in SCOPES.items() if not s.lock_file and not s.server]
_CALENDAR_ONLY = ("persistent", "randomized_offset", "fixed_random_delay", "timezone")  # systemd.timer(5): act on OnCalendar= only


def _overlap_is(words: list[str]) -> dict:
    default = {"required": ["overlap"]} if DEFAULT_OVERLAP not in words else {}
    return {"properties": {"overlap": {"enum": words}}, **default}


def _scope_is(words: list[str]) -> dict:
    scope = {"enum": words}
    if DEFAULT_SCOPE in words:
        return {"properties": {"lock": {"anyOf": [scope, {"type": "object", "properties": {"scope": scope}}]}}}
    as_map = {"type": "object", "required": ["scope"], "properties": {"scope": scope}}
    return {"required": ["lock"], "properties": {"lock": {"anyOf": [scope, as_map]}}}


JOB_RULES: list[dict] = [
    {"if": _overlap_is(_WAITS), "then": {"required": ["wait_timeout"]}, "else": {"properties": {"wait_timeout": False}}},
    {"if": _overlap_is(_NO_LOCK), "then": {"properties": {"lock": False}}},
    {"if": {"not": _overlap_is(_QUEUES)}, "then": {"properties": {"queue": False}}},
    {"if": {"allOf": [_overlap_is(_WAITS), _scope_is(_NOT_WAITING_SCOPES)]}, "then": False},
    {"if": {"allOf": [_overlap_is(_QUEUES), _scope_is(_NO_DRAINER_LOCK)]}, "then": False},
    {"if": {"required": ["schedule"], "properties": {"schedule": {"type": "object", "not": {"required": ["calendar"]}}}},
     "then": {"properties": dict.fromkeys(_CALENDAR_ONLY, False)}},
]  # fmt: skip
WORKER_RULES: list[dict] = [
    {"if": {"required": ["watchdog"]}, "then": {"required": ["type"], "properties": {"type": {"const": "notify"}}}},
    {"if": {"required": ["recycle_after", "restart"]}, "then": {"properties": {"restart": {"not": {"const": "no"}}}}},
    {"dependentRequired": {"restart_steps": ["restart_max_delay"], "restart_max_delay": ["restart_steps"]}},
]  # fmt: skip


def _keys_in(rules: list[dict]) -> set[str]:
    """Every job or worker key a rule reads: a rule holds only where defaults sets none of them."""
    text = repr(rules)
    return {key for key in {*validate.JOB_KEYS, *validate.WORKER_KEYS} if f"'{key}'" in text}


def _when_defaults_leave(keys: set[str], section: str, unit: dict) -> dict:
    """``unit`` applied to every entry of ``section`` unless `defaults:` sets one of ``keys``
    (a default is read as if the entry wrote it: check knows, the schema does not merge)."""
    sets_one = {"required": ["defaults"], "properties": {"defaults": {"type": "object", "anyOf": [{"required": [k]} for k in sorted(keys)]}}}
    return {"if": {"not": sets_one}, "then": {"properties": {section: {"additionalProperties": unit}}}}


def _required_unless_defaulted(required: dict[str, str], section: str) -> list[dict]:
    out = []
    for key in required:
        defaulted = {"required": ["defaults"], "properties": {"defaults": {"type": "object", "required": [key]}}}
        out.append({"if": {"not": defaulted}, "then": {"properties": {section: {"additionalProperties": {"required": [key]}}}}})
    return out


# --------------------------------------------------------------------------- the schema


def _unit_names() -> dict:
    """A job or worker name: the unit name stem names.job_name_problem allows."""
    suffixes = "|".join(_lit(s) for s in names._UNIT_SUFFIXES)
    stems = sorted(names._SYSTEM_STEMS)
    prefixes = "|".join(_lit(p) for p in names.SYSTEM_PREFIXES)
    return {"pattern": f"^{names.JOB_NAME.pattern}$", "maxLength": limits.NAME,
            "not": {"anyOf": [{"pattern": f"(?:{suffixes})$"}, {"enum": stems}, {"pattern": f"^(?:{prefixes})"}]}}  # fmt: skip


def schema(schema_id: str = SCHEMA_ID) -> dict:
    job = _section(validate.JOB_KEYS, "job", validate.REQUIRED_JOB_KEYS)
    worker = _section(validate.WORKER_KEYS, "worker", validate.REQUIRED_WORKER_KEYS)

    def units(props: dict, what: str) -> dict:
        return {"type": ["object", "null"], "description": what, "propertyNames": _unit_names(),
                "additionalProperties": {"type": "object", "additionalProperties": False, "properties": props}}  # fmt: skip

    target = {"type": ["string", "integer"], "description": "a systemd version (252), a range ('>=252,<258') or a preset: " + ", ".join(_presets()),
              "anyOf": [{"type": "integer"}, {"enum": _presets()}, {"type": "string", "pattern": r"^\s*(?:(?:===|>=|<=|==|!=|~=|>|<)?\s*[0-9][0-9a-z.~+-]*\s*(?:,\s*|$))+$"}]}  # fmt: skip
    top: dict[str, dict] = {
        "jobgen": {"description": "the manifest format version", "enum": [int(validate.MANIFEST_VERSION), validate.MANIFEST_VERSION]},
        "target": {"type": ["object", "null"], "description": "the systemd the units are for", "additionalProperties": False,
                   "properties": {"systemd": target}},
        "defaults": {"type": ["object", "null"], "description": "keys every job and worker takes unless it sets them itself",
                     "additionalProperties": False, "properties": {**worker, **job}},
        "jobs": units(job, "scheduled jobs: name -> settings (.service + .timer)"),
        "workers": units(worker, "long-running workers: name -> settings (.service)"),
    }  # fmt: skip
    missing = set(validate.TOP_LEVEL_KEYS) ^ set(top)
    if missing:
        raise KeyError(f"top-level keys without a schema (or with one but not in validate): {sorted(missing)}")
    rules = [
        *_required_unless_defaulted(validate.REQUIRED_JOB_KEYS, "jobs"),
        *_required_unless_defaulted(validate.REQUIRED_WORKER_KEYS, "workers"),
        _when_defaults_leave(_keys_in(JOB_RULES), "jobs", {"allOf": JOB_RULES}),
        _when_defaults_leave(_keys_in(WORKER_RULES), "workers", {"allOf": WORKER_RULES}),
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id,
        "title": "jobgen manifest",
        "type": "object",
        "required": ["jobgen"],
        "additionalProperties": False,
        "properties": {key: top[key] for key in validate.TOP_LEVEL_KEYS},
        "allOf": rules,
    }


def _presets() -> list[str]:
    from jobgen.compiler.target import PRESETS

    return list(PRESETS)
