"""`jobgen schema`: the manifest's JSON Schema, generated from the key tables validation uses.

Not a second copy that can drift: the keys come from validate.JOB_KEYS, WORKER_KEYS, _LOCK_KEYS,
TOP_LEVEL_KEYS and _SCHEDULE_FORMS, and each key's shape from its converter through CONVERTERS
below (a converter missing there is an error here, which tests/test_schema.py turns into a
failing test). The schema is what an editor needs (key names, value kinds, allowed values);
`jobgen check` stays the authority: it also checks time spans, calendars, paths and the rules
between keys.

Editors read YAML with its usual coercions (`30` is a number, `yes` a boolean, `12:30` may be a
number), while jobgen reads every scalar as the text written. So a scalar key accepts strings,
numbers and booleans, and patterns (which JSON Schema applies to strings only) say the rest.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from jobgen.compiler import names, validate
from jobgen.compiler.model import LOCK_SCOPES

SCHEMA_ID = "https://jobgen.invalid/manifest-1.schema.json"

_SCALAR: dict = {"type": ["string", "number", "boolean"]}


def _text(description: str, pattern: str | None = None) -> dict:
    out = {**_SCALAR, "description": description}
    if pattern:
        out["pattern"] = pattern
    return out


_SPAN = _text("a time span (systemd.time(7)): 30s, 5min, 1h 30min")
_PATH = _text("an absolute path", "^/")
_USER = _text("a user or group name", f"^(?:{names.USER_NAME.pattern})$")
_UNITS = {"oneOf": [_text("a unit name", f"^{names.UNIT_REF.pattern}$"),
                    {"type": "array", "items": _text("a unit name", f"^{names.UNIT_REF.pattern}$")}]}  # fmt: skip
_ARGV = {
    "description": "argv list, or one string split by POSIX shell rules (no shell runs it); the program is an absolute path",
    "oneOf": [_text("a command line", "^\\s*/"),
              {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}}],
}  # fmt: skip
_BOOLEAN = {"description": "true or false", "anyOf": [
    {"type": "boolean"}, {"enum": sorted(validate._TRUE | validate._FALSE)}]}  # fmt: skip
_CALENDAR = _text("an OnCalendar= expression (systemd.time(7)): daily, 'Mon..Fri 02:30', '*:0/15'")


def _schedule() -> dict:
    forms = {name: (_CALENDAR if conv is validate.calendar else _SPAN) for name, conv in validate._SCHEDULE_FORMS.items()}
    return {"description": "when the job runs", "oneOf": [
        _CALENDAR,
        {"type": "object", "minProperties": 1, "maxProperties": 1, "additionalProperties": False, "properties": forms},
    ]}  # fmt: skip


def _lock() -> dict:
    properties = {key: _convert(conv, f"lock.{key}") for key, conv in validate._LOCK_KEYS.items()}
    return {"description": "the lock: a scope, or a mapping", "oneOf": [
        {"enum": list(LOCK_SCOPES)},
        {"type": "object", "additionalProperties": False, "properties": properties},
    ]}  # fmt: skip


def _queue() -> dict:
    properties = {key: _convert(conv, f"queue.{key}") for key, conv in validate._QUEUE_KEYS.items()}
    return {"description": "overlap: queue: max_pending, on_full, max_attempts", "oneOf": [
        {"type": "null"},
        {"type": "object", "additionalProperties": False, "properties": properties},
    ]}  # fmt: skip


# converter -> the JSON Schema of its values. Functions the key tables use directly.
CONVERTERS: dict[Callable[..., Any], Callable[[], dict]] = {
    validate.text_line: lambda: _text("one line of text"),
    validate.argv: lambda: _ARGV,
    validate.user_name: lambda: _USER,
    validate.abs_path: lambda: _PATH,
    validate.optional_abs_path: lambda: _text("an absolute path ('-/path': optional)", "^-?/"),
    validate.environment: lambda: {"type": "object", "description": "NAME: value",
                                   "propertyNames": {"pattern": f"^{names.ENV_NAME.pattern}$"},
                                   "additionalProperties": _SCALAR},
    validate.timespan: lambda: _SPAN,
    validate.boolean: lambda: _BOOLEAN,
    validate.positive_int: lambda: {"description": "a whole number >= 1",
                                    "anyOf": [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": "^[0-9]+$"}]},
    validate.memory_size: lambda: _text("a size: 512M, 2G, 50%", "^[0-9]+[KMGT%]?$"),
    validate.stop_signal: lambda: _text("a signal name: SIGTERM, SIGINT, ..."),
    validate.timezone: lambda: _text("an IANA time zone such as Europe/Berlin"),
    validate.schedule: _schedule,
    validate.lock: _lock,
    validate.queue_settings: _queue,
    validate.unit_names: lambda: _UNITS,
    validate.documentation_uris: lambda: {"description": "documentation URIs: man:, info:, file:, http://, https://",
                                          "oneOf": [_text("a URI"), {"type": "array", "items": _text("a URI")}]},
}

# Lock keys whose converter is an inline lambda in validate._LOCK_KEYS (plain text).
_INLINE = {"lock.name": "the lock's name", "lock.backend": "the lock server's URL (redis://, mariadb://, postgresql://)",
           "lock.credential": "a credential as NAME:/path"}  # fmt: skip


def _convert(conv: Callable[..., Any], key: str) -> dict:
    if conv in CONVERTERS:
        return CONVERTERS[conv]()
    closure = inspect.getclosurevars(conv).nonlocals
    if "allowed" in closure:  # validate.choice(...)
        return {"enum": list(closure["allowed"])}
    if "maximum" in closure:  # validate.whole_number(...)
        top = closure["maximum"]
        return {"description": f"a whole number from 1 to {top}",
                "anyOf": [{"type": "integer", "minimum": 1, "maximum": top}, {"type": "string", "pattern": "^[0-9]+$"}]}
    if key in _INLINE:
        return _text(_INLINE[key])
    raise KeyError(f"no JSON Schema for the converter of '{key}' ({conv.__qualname__}): add it to CONVERTERS")


def _section(table: dict[str, validate.Key], what: str) -> dict:
    return {key: _convert(spec.convert, f"{what}.{key}") for key, spec in table.items()}


def schema() -> dict:
    job = _section(validate.JOB_KEYS, "job")
    worker = _section(validate.WORKER_KEYS, "worker")
    name = {"pattern": f"^{names.JOB_NAME.pattern}$"}

    def units(props: dict, what: str) -> dict:
        return {"type": ["object", "null"], "description": what, "propertyNames": name,
                "additionalProperties": {"type": "object", "additionalProperties": False, "properties": props}}  # fmt: skip

    top: dict[str, dict] = {
        "jobgen": {"description": "the manifest format version", "enum": [1, validate.MANIFEST_VERSION]},
        "target": {"type": ["object", "null"], "additionalProperties": False,
                   "properties": {"systemd": _text("a systemd version (252), a range ('>=252,<258') or a preset (debian-12)")}},
        "defaults": {"type": ["object", "null"], "description": "any job or worker key", "additionalProperties": False,
                     "properties": {**worker, **job}},
        "jobs": units(job, "scheduled jobs: name -> settings"),
        "workers": units(worker, "long-running workers: name -> settings"),
    }  # fmt: skip
    missing = set(validate.TOP_LEVEL_KEYS) ^ set(top)
    if missing:
        raise KeyError(f"top-level keys without a schema (or with one but not in validate): {sorted(missing)}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "jobgen manifest",
        "type": "object",
        "required": ["jobgen"],
        "additionalProperties": False,
        "properties": {key: top[key] for key in validate.TOP_LEVEL_KEYS},
    }
