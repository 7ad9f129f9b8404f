"""`jobgen render` run again with the same words: typer's parse recalled, typer not imported.

A pipeline, a Makefile, a package build or a timer runs the same `jobgen render ...` line
again and again, and importing typer was most of such a render when nothing changed
(bench/results.md). click's parse of a render line is a function of its words alone: no
render option reads the environment or the terminal. So the first run records what
typer's parse handed the command function (``remembered``, on the typer command), and a
later run with the same words, the same jobgen and the same typer calls the function
with that record (``run``), on the same outcome path (answer.ended, answer.run_process).

Nothing here parses: a line never seen, seen with another jobgen or typer, or a record
that is not exactly what ``remembered`` writes goes to typer, as if there were no record.
Records live in the render cache's folder, under its trust rule, and go with it
(compiler/cache.py: `recall_read`, `recall_write`); `--no-cache` neither reads nor writes
one, and neither does shell completion. Only a console-script run records (``run``, which
main calls): a test calling app.run in-process leaves none behind.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from jobgen.cli import answer

FORMAT = 1  # of a record
# The commands whose parse is recalled: command -> (module, function). The typer command's
# keyword arguments are the function's (tests/test_command_functions.py: its body is one
# call of the function with them).
RECALLED = {"render": ("jobgen.cli.render", "render")}
# click's shell completion protocol: _{PROG}_COMPLETE, upper case, set by the scripts
# cli/completion.py prints. Such a run completes words, it does not render. Named here,
# typer-free, for completion.py too.
COMPLETE_VAR = "_JOBGEN_COMPLETE"
# Words after which the parse is never recorded, so never worth looking for.
_NEVER = ("--no-cache", "--help", "-h")


class _Armed:
    """The console script's words with no record yet (``run``), and their key: what the
    typer command records its parse under."""

    argv: list[str] | None = None
    key = ""


def usable(argv: list[str]) -> bool:
    """Whether ``argv`` may have a record: a command listed in RECALLED, no --no-cache
    (which neither reads nor writes the cache folder), no --help, not a completion."""
    return (bool(argv) and argv[0] in RECALLED and not any(word in _NEVER for word in argv)
            and COMPLETE_VAR not in os.environ)


def remembered(command: str):
    """Decorate the typer command of ``command``: what typer's parse passes it is recorded
    for the armed words before it runs (typer reads the wrapped function's signature)."""

    def wrap(function):
        @functools.wraps(function)
        def recording(**arguments):
            argv = _Armed.argv
            if argv is not None and argv[:1] == [command] and not arguments.get("no_cache"):
                _record(_Armed.key, command, arguments)
            return function(**arguments)

        return recording

    return wrap


def run(argv: list[str]) -> int | None:
    """The exit code of the command ``argv`` (the console script's words) names, run with
    its recorded parse; None when there is no usable record: then typer parses, and the
    typer command records its parse for the next run (``remembered``)."""
    from jobgen.compiler import cache

    command, key = argv[0], _key(argv)
    doc = cache.recall_read(key)
    module, name = RECALLED[command]
    arguments = None
    if doc is not None and doc.get("format") == FORMAT and doc.get("command") == command:
        function = getattr(importlib.import_module(module), name)
        arguments = _decoded(doc.get("arguments"), _parameters(function))
    if arguments is None:
        _Armed.argv, _Armed.key = list(argv), key
        return None
    return _recalled(argv, function, arguments)


def _recalled(argv: list[str], function, arguments: dict) -> int:
    def call() -> int:
        answer.fewer_collections()
        return function(**arguments)

    return answer.run_process(argv, lambda words: answer.ended(words, call))


def _record(key: str, command: str, arguments: dict) -> None:
    from jobgen.compiler import cache

    encoded = {name: _encoded(value) for name, value in arguments.items()}
    if any(value is _UNKNOWN for value in encoded.values()):
        return  # a value this record cannot hold: the next run is parsed by typer
    cache.recall_write(key, {"format": FORMAT, "command": command, "arguments": encoded})


def _key(argv: list[str]) -> str:
    """sha256 over the words and what decides their parse and their meaning: jobgen's code
    (resources.code_digest, with the interpreter and the libraries it renders with) and
    the installed typer and click."""
    import json

    from jobgen.compiler import resources
    from jobgen.contract.digest import sha256

    doc = {"format": FORMAT, "argv": argv, "code": resources.code_digest(), "parser": [_mark(n) for n in ("typer", "click")]}
    return sha256(json.dumps(doc, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()


def _mark(name: str) -> str:
    """Where ``name`` is installed and its __init__.py's size and mtime, found without
    importing it (an upgrade rewrites that file), as resources.py marks its libraries."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return f"{name}: not found"
    st = os.stat(spec.origin)
    return f"{name}: {spec.origin} {st.st_size} {st.st_mtime_ns}"


# --------------------------------------------------------------------------- values


_UNKNOWN = object()


def _encoded(value):
    """A parsed value as JSON: a path and an enum member tagged, lists item by item;
    _UNKNOWN for any other kind (never recorded)."""
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, Path):
        return {"path": os.fspath(value)}
    if isinstance(value, answer.Format):
        return {"format": value.value}
    if isinstance(value, (list, tuple)):
        items = [_encoded(v) for v in value]
        return _UNKNOWN if any(v is _UNKNOWN for v in items) else items
    return _UNKNOWN


def _decoded(arguments: object, names: tuple[str, ...]) -> dict | None:
    """The record's arguments as the function takes them, or None if they are not exactly
    ``names``, each of a kind ``_encoded`` writes."""
    if not isinstance(arguments, dict) or set(arguments) != set(names):
        return None
    out = {}
    for name, value in arguments.items():
        decoded = _value(value)
        if decoded is _UNKNOWN:
            return None
        out[name] = decoded
    return out


def _value(value, top: bool = True):
    if value is None or type(value) in (bool, str):
        return value
    if isinstance(value, list) and top:  # only an argument's own list (the manifests), never a list in one
        items = [_value(v, top=False) for v in value]
        return _UNKNOWN if any(v is _UNKNOWN for v in items) else items
    if isinstance(value, dict) and len(value) == 1:
        (tag, text), = value.items()
        if tag == "path" and isinstance(text, str) and text:
            return Path(text)
        if tag == "format" and text in {f.value for f in answer.Format}:
            return answer.Format(text)
    return _UNKNOWN


def _parameters(function) -> tuple[str, ...]:
    code = function.__code__
    return code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
