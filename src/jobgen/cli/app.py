"""The typer app, the options commands share, and the table of command modules.

A new command is a module in this package with one row in ``COMMANDS``: the command is a
module-level function named for it, of typed arguments, that returns the exit code (what
tests call without the command line), and ``register(app)`` only declares its options and
calls it (tests/test_command_functions.py); options that mean the same thing everywhere
are defined once here.

Every outcome has an answer in the format asked for: with ``--format json`` stdout is one
JSON document (``"format": JSON_FORMAT``) whether the command succeeded, found problems in
a manifest, was called wrongly (click's usage errors, caught in ``run``) or could not
write; a human-readable line still goes to stderr.
"""

from __future__ import annotations

import errno
import gc
import importlib
import io
import os
import json
import subprocess
import sys
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Optional

import typer

from jobgen import __version__
from jobgen.contract.oneline import one_line
from jobgen.cli.exits import (EXIT_CODES, EXIT_DRIFT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, JSON_FORMAT,
                              STDOUT_PRODUCT, failure_document, json_asked, judged)

# command module (jobgen.cli.<name>) in the order `jobgen --help` lists them
COMMANDS = ("render", "check", "run", "apply", "queue", "plan", "status", "import_crontab", "schema", "lock", "directives", "completion")
# A command whose name is not its module's (every other command is the module's name).
OTHER_NAMES = {"import-crontab": "import_crontab", "enqueue": "queue"}
CONTEXT = {"help_option_names": ["-h", "--help"]}
# The click typer runs on: the click package up to typer 0.2x, its own copy since. Its
# exception classes are taken from there rather than from an `import click`.
_click = sys.modules[typer.BadParameter.__module__]
_EXIT = tuple({typer.Exit, getattr(_click, "Exit", typer.Exit)})
_ABORT = tuple({typer.Abort, getattr(_click, "Abort", typer.Abort)})
EPILOG = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + "."


class Format(str, Enum):
    text = "text"
    json = "json"


class CliError(Exception):
    """An outcome that ends the command: one line, one exit code (``run`` prints it)."""

    def __init__(self, message: str, code: int = EXIT_INVALID):
        self.message, self.code = message, code
        super().__init__(message)


class _Said:
    """What this process has answered so far, for ``run``'s --format json rule: every
    outcome is one JSON document on stdout, also one a command ended with only a line on
    stderr (an unreachable systemd, an unknown --job)."""

    json = False  # a JSON document went to stdout (emit_json, or a child given --format json)
    error = ""  # the last `jobgen: error: ...` line, without its prefix


_ERROR = "jobgen: error: "


def err(line: str) -> None:
    """One line on stderr, whatever it quotes: a value with a line break (`--job $'a\nb'`,
    a file name) cannot start a line that reads like jobgen's own (contract/oneline.py)."""
    line = one_line(line)
    if line.startswith(_ERROR):
        _Said.error = line[len(_ERROR):]
    typer.echo(line, err=True)


def emit_json(doc: dict) -> None:
    _Said.json = True
    typer.echo(json.dumps({"format": JSON_FORMAT, **doc}, indent=2, sort_keys=True))


def json_answered() -> None:
    """A child given --format json wrote the answer on this stdout (`jobgen queue MANIFEST JOB`)."""
    _Said.json = True


SystemdOpt = typer.Option(None, "--systemd", metavar="VERSION", help="Target systemd: a version (252), a range ('>=252,<258') or 'auto' (this host).")
PresetOpt = typer.Option(None, "--target", metavar="PRESET", help="Target distribution preset, e.g. debian-12, ubuntu-24.04, rhel-9.")
FormatOpt = typer.Option(Format.text, "--format", metavar="[text|json]", help="Output format; json answers every outcome on stdout.")
QuietOpt = typer.Option(False, "-q", "--quiet", help="Print only warnings and errors.")
StrictOpt = typer.Option(False, "--strict", help="Warnings fail: exit 2, nothing written.")
# Shown in the usage line and described in each command's help text: typer's argument
# table would add a Python type (`<list[Path]>`) beside the name.
ManifestsArg = typer.Argument(..., metavar="MANIFEST", hidden=True, show_default=False)


def recovery_notes(folder: Path, rec, dry: bool, what: str) -> list[str]:
    """What write.locked found left in ``folder`` by an earlier ``what`` (render, apply)
    that did not finish: one line each, for `jobgen: note:`."""
    says = []
    if rec.pending:
        says.append(f"{folder}: {_a(what)} was interrupted after its commit point; the next {what} completes it")
    if rec.completed:
        says.append(f"{folder}: completed an interrupted {what} ({rec.completed} files)")
    if rec.stale:
        says.append(f"{folder}: {'found' if dry else 'removed'} {rec.stale} temporary files of {_a(what)} killed before its commit point")
    return says


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def holder_option(default_help: str | None = None):
    """--holder; ``default_help``: the option has no fixed default (None) and says why."""
    from jobgen.contract.locks import DEFAULT_HOLDER

    text = "Path of jobgen on the target hosts (cluster-scope and queue jobs run it)."
    if default_help:
        return typer.Option(None, "--holder", metavar="PATH", help=f"{text} Default: {default_help}.", show_default=False)
    return typer.Option(DEFAULT_HOLDER, "--holder", metavar="PATH", help=text)


def resolve_target(systemd: Optional[str], preset: Optional[str]):
    if systemd and preset:
        raise CliError("give --systemd or --target, not both")
    text = preset or systemd
    if text is None:
        return None
    from jobgen.compiler.target import parse_systemctl_version, parse_target
    from jobgen.runtime import spawn

    if text == "auto":
        try:
            out = spawn.run(["systemctl", "--version"], capture_output=True, text=True, timeout=10).stdout
            text = str(parse_systemctl_version(out))
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise CliError(f"--systemd auto: cannot read `systemctl --version`: {exc}") from None
    try:
        return parse_target(text)
    except ValueError as exc:
        raise CliError(f"--{'target' if preset else 'systemd'} {text}: {exc}") from None


def build_all(manifests: list[Path], target, holder: str, fmt: Format, strict: bool = False, data: dict[Path, bytes] | None = None, more=None,
              errors=None):
    """Every manifest through the pure core; all problems of all manifests, then exit 2.
    With ``strict`` a warning is a problem too. ``data``: manifests already read.
    ``more``: result -> result with the command's own findings added (warnings about the
    host), counted by --strict like the compiler's. ``errors``: result -> the command's own
    errors about a manifest that compiled (what its output options cannot hold)."""
    from jobgen.compiler import pipeline
    from jobgen.compiler.diagnostics import WARNING, ManifestError

    results, problems = [], []
    for path in manifests:
        try:
            results.append(pipeline.build(str(path), target, holder, data=(data or {}).get(path)))
        except ManifestError as exc:
            problems += exc.diagnostics
            continue
        if errors is not None:
            problems += errors(results[-1])
    if more is not None:
        results = [more(r) for r in results]
    warnings = [d for r in results for d in r.diagnostics if d.severity == WARNING] if strict else []
    if problems or warnings:
        shown = sorted(problems + warnings) if warnings else problems
        n = sum(1 for d in problems if d.severity == "error")
        if n:
            summary = f"jobgen: {n} error{'s' if n != 1 else ''}; nothing written"
        else:
            summary = f"jobgen: {len(warnings)} warning{'s' if len(warnings) != 1 else ''} with --strict; nothing written"
        if fmt == Format.json:
            emit_json({"ok": False, "diagnostics": [d.as_json() for d in shown], "error": summary.removeprefix("jobgen: "), "exit_code": EXIT_INVALID})
        else:
            for d in shown:
                err(str(d))
        err(summary)
        raise typer.Exit(EXIT_INVALID)
    return results


def _version_cb(value: bool) -> None:
    if value:
        typer.echo(f"jobgen {__version__}")
        raise typer.Exit(EXIT_OK)


def command_module(argv: list[str]) -> str | None:
    """The module of the command ``argv`` names, or None (no command, --help, a typo).

    The root has no option that takes a value (--version, --help), so the first word that
    is not an option is the command."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None:
        return None
    name = OTHER_NAMES.get(word, word)
    return name if name in COMMANDS else None


@lru_cache(maxsize=None)
def app(only: str | None = None) -> typer.Typer:
    """The app with every command, or with ``only`` that command's module: `jobgen render`
    does not import the other commands' modules and what they import (bench/results.md);
    the same typer app parses it, so its options and help are the same."""
    the_app = typer.Typer(
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain help: readable metavars (MANIFEST..., DIR), no type column
        no_args_is_help=True,
        context_settings=CONTEXT,
        help="Compile a YAML job manifest into systemd units.",
        epilog=EPILOG,
    )

    @the_app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version_cb, is_eager=True, help="Print the version and exit."),
    ) -> None:
        pass

    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"jobgen.cli.{name}").register(the_app)
    return the_app


def _fewer_collections() -> None:
    """A compile allocates some ten objects per YAML node and frees almost none of them
    before it ends; at CPython's default threshold (700 allocations) the cycle collector
    runs hundreds of times over objects that are all still alive, a fifth of a 1,000-job
    render. Collect later, and never again over what importing made (gc.freeze); the
    collector stays on."""
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


def _given(option: str, words: list[str]) -> bool:
    short = len(option) == 2
    return any(w == option or w.startswith(f"{option}=") or (short and w.startswith(option) and not w.startswith("--")) for w in words)


def _product_is_stdout(argv: list[str]) -> bool:
    default, flips = STDOUT_PRODUCT.get(command_module(argv), (False, ()))
    words = argv[: argv.index("--")] if "--" in argv else argv
    return default != any(_given(o, words) for o in flips)


class _Stdout(io.RawIOBase):
    """File descriptor 1 under what a command prints: a write that fails (the reader left,
    `| head -1`; a full disk; a closed descriptor) loses the text, never the outcome. The
    first failure is kept for ``run`` to judge, and nothing is written after it."""

    def __init__(self, fd: int | None):
        self.fd, self.failure = fd, None

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.fd is not None and os.isatty(self.fd)

    def fileno(self) -> int:
        if self.fd is None:
            raise io.UnsupportedOperation("standard output is closed")
        return self.fd

    def write(self, data) -> int:
        if self.failure is None:
            try:
                if self.fd is None:
                    raise OSError(errno.EBADF, os.strerror(errno.EBADF))
                return os.write(self.fd, data)
            except OSError as exc:
                self.failure = exc
        return len(data)


def _guard_stdout() -> _Stdout:
    old = sys.stdout
    try:
        fd = old.fileno() if old is not None else None
    except (OSError, ValueError):
        fd = None
    raw = _Stdout(fd)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=getattr(old, "encoding", None) or "utf-8",
                                  errors=getattr(old, "errors", None) or "strict", line_buffering=bool(getattr(old, "line_buffering", False)))
    return raw


def _lost_output(raw: _Stdout, argv: list[str], code: int) -> int:
    """The exit code once what the command printed is flushed (exits.judged)."""
    sys.stdout.flush()  # cannot raise: _Stdout keeps the failure instead
    return judged(raw.failure, code, _product_is_stdout(argv))


def run_process(argv: list[str]) -> int:
    """``run`` as the console script runs it, on the process's own standard output: what
    could not be printed is judged (_lost_output) the same way for every command."""
    raw = _guard_stdout()
    return _lost_output(raw, argv, run(argv))


class _CtrlC:
    """Whether a Ctrl-C (SIGINT) reached this process. typer turns the KeyboardInterrupt
    into a silent ``return 130`` (typer/core.py _main: ``raise Exit(130)``), which a
    command that ends with a status of 130 of its own cannot be told from; so the handler
    notes it, then does what Python's default handler does."""

    seen = False

    @classmethod
    def watch(cls) -> None:
        import signal

        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored (nohup, `&` in sh)
            signal.signal(signal.SIGINT, cls._noted)

    @classmethod
    def _noted(cls, signum, frame):
        import signal

        cls.seen = True
        signal.default_int_handler(signum, frame)


def run(argv: list[str]) -> int:
    """Run a command; turn every outcome that is not a clean exit into one answer."""
    as_json = json_asked(argv)
    _Said.json, _Said.error = False, ""  # this call's answer, not an earlier one's in the same process
    try:
        the_app = app(command_module(argv))
        _fewer_collections()
        _CtrlC.watch()
        code = the_app(args=argv, prog_name="jobgen", standalone_mode=False)
        if code == EXIT_INTERRUPTED and _CtrlC.seen:
            raise KeyboardInterrupt
    except CliError as exc:
        err(f"jobgen: error: {exc.message}")
        if as_json:
            emit_json(failure_document(exc.message, exc.code))
        return exc.code
    except _click.UsageError as exc:
        exc.message = one_line(exc.message)
        if as_json:
            err(f"jobgen: error: {exc.format_message()}")
            emit_json(failure_document(f"usage: {exc.format_message()}", exc.exit_code))
        else:
            exc.show()
        return exc.exit_code
    except _click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except _EXIT as exc:  # raised outside click's main (e.g. by a callback)
        code = exc.exit_code
    except (*_ABORT, KeyboardInterrupt):
        # click turns Ctrl-C into Abort; either way it is the operator's choice, not a failure
        err("jobgen: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place every unforeseen failure ends
        return internal_error(exc, as_json)
    code = code if isinstance(code, int) else EXIT_OK
    if as_json and code not in (EXIT_OK, EXIT_DRIFT) and not _Said.json:
        emit_json(failure_document(_Said.error, code))
    return code


def internal_error(exc: BaseException, as_json: bool) -> int:
    """A failure no command foresaw is a bug: one line naming it and a reserved exit code,
    never a traceback an operator must read (and a pipeline must parse). JOBGEN_DEBUG=1
    shows the traceback for the bug report."""
    import os
    import traceback

    message = f"internal error in jobgen (please report it): {type(exc).__name__}: {exc}"
    if os.environ.get("JOBGEN_DEBUG") == "1":
        traceback.print_exception(exc, file=sys.stderr)
    err(f"jobgen: {message}")
    if as_json:
        emit_json(failure_document(message, EXIT_INTERNAL))
    return EXIT_INTERNAL
