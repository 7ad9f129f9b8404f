"""The typer app and the options commands share.

A new command is a module in this package with one row in ``COMMANDS`` (answer.py): the command is a
module-level function named for it, of typed arguments, that returns the exit code (what
tests call without the command line), and ``register(app)`` only declares its options and
calls it (tests/test_command_functions.py); options that mean the same thing everywhere
are defined once here.

Every outcome has an answer in the format asked for: with ``--format json`` stdout is one
JSON document (``"format": JSON_FORMAT``) whether the command succeeded, found problems in
a manifest, was called wrongly (click's usage errors, caught in ``run``) or could not
write; a human-readable line still goes to stderr. How a command ends and what it says is
answer.py's, which needs no typer: a render recalled by recall.py runs without it.
"""

from __future__ import annotations

import importlib
import sys
from functools import lru_cache
from pathlib import Path

import typer

from jobgen import __version__
from jobgen.contract.oneline import one_line
from jobgen.cli.exits import EXIT_CODES, EXIT_INTERRUPTED, EXIT_OK, failure_document, json_asked
from jobgen.cli.answer import COMMANDS, Format, command_module, emit_json, ended, err
from jobgen.cli import answer

CONTEXT = {"help_option_names": ["-h", "--help"]}
# The click typer runs on: the click package up to typer 0.2x, its own copy since. Its
# exception classes are taken from there rather than from an `import click`.
_click = sys.modules[typer.BadParameter.__module__]
_EXIT = tuple({typer.Exit, getattr(_click, "Exit", typer.Exit)})
_ABORT = tuple({typer.Abort, getattr(_click, "Abort", typer.Abort)})
EPILOG = "Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES) + "."


SystemdOpt = typer.Option(None, "--systemd", metavar="VERSION", help="Target systemd: a version (252), a range ('>=252,<258') or 'auto' (this host).")
PresetOpt = typer.Option(None, "--target", metavar="PRESET", help="Target distribution preset, e.g. debian-12, ubuntu-24.04, rhel-9.")
FormatOpt = typer.Option(Format.text, "--format", metavar="[text|json]", help="Output format; json answers every outcome on stdout.")
QuietOpt = typer.Option(False, "-q", "--quiet", help="Print only warnings and errors.")
StrictOpt = typer.Option(False, "--strict", help="Warnings fail: exit 2, nothing written.")
# Shown in the usage line and described in each command's help text: typer's argument
# table would add a Python type (`<list[Path]>`) beside the name.
ManifestsArg = typer.Argument(..., metavar="MANIFEST", hidden=True, show_default=False)


def a_path(text: str) -> Path:
    """A folder or file option's value (``parser=``), '' refused: Path('') is '.', so an
    unset variable (`-o "$OUT"`, `--root "$IMAGE"`) would name the working folder, and
    render would fill it, apply install into it."""
    if not text:
        raise typer.BadParameter("an empty path names no folder (an unset variable?); give the path")
    return Path(text)


def holder_option(default_help: str | None = None):
    """--holder; ``default_help``: the option has no fixed default (None) and says why."""
    from jobgen.contract.locks import DEFAULT_HOLDER

    text = "Path of jobgen on the target hosts (cluster-scope and queue jobs run it)."
    if default_help:
        return typer.Option(None, "--holder", metavar="PATH", help=f"{text} Default: {default_help}.", show_default=False)
    return typer.Option(DEFAULT_HOLDER, "--holder", metavar="PATH", help=text)


def _version_cb(value: bool) -> None:
    if value:
        typer.echo(f"jobgen {__version__}")
        raise typer.Exit(EXIT_OK)


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


def run_process(argv: list[str]) -> int:
    """``run`` as the console script runs it, on the process's own standard output
    (answer.run_process)."""
    return answer.run_process(argv, run)


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
    """Parse ``argv`` with the typer app and run the command it names; every outcome ends
    in answer.ended, click's own (a usage error, --help's exit, an abort) turned into codes
    here first."""
    as_json = json_asked(argv)

    def call() -> int | None:
        try:
            the_app = app(command_module(argv))
            answer.fewer_collections()
            _CtrlC.watch()
            code = the_app(args=argv, prog_name="jobgen", standalone_mode=False)
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
            return exc.exit_code
        except _ABORT:
            # click turns Ctrl-C into Abort
            raise KeyboardInterrupt from None
        if code == EXIT_INTERRUPTED and _CtrlC.seen:
            raise KeyboardInterrupt
        return code

    return ended(argv, call)
