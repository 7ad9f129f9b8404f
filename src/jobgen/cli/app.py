"""The typer app, the options commands share, and the table of command modules.

A new command is a module in this package with a ``register(app)`` function and one row
in ``COMMANDS``; options that mean the same thing everywhere are defined once here.
"""

from __future__ import annotations

import importlib
import json
import subprocess
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Optional

import typer

from jobgen import __version__
from jobgen.cli.exits import EXIT_INVALID, EXIT_OK

# command module (jobgen.cli.<name>) in the order `jobgen --help` lists them
COMMANDS = ("render", "check", "run", "apply", "directives")


class Format(str, Enum):
    text = "text"
    json = "json"


def err(line: str) -> None:
    typer.echo(line, err=True)


def emit_json(doc: dict) -> None:
    typer.echo(json.dumps(doc, indent=2, sort_keys=True))


SystemdOpt = typer.Option(None, "--systemd", help="Target systemd: a version (252), a range ('>=252,<258') or 'auto' (this host).")
PresetOpt = typer.Option(None, "--target", help="Target distribution preset, e.g. debian-12, ubuntu-24.04, rhel-9.")
FormatOpt = typer.Option(Format.text, "--format", help="Output format.")


def holder_option():
    from jobgen.compiler import plan

    return typer.Option(plan.DEFAULT_HOLDER, "--holder", help="Path of jobgen on the target hosts (cluster-scope jobs run `jobgen lock`).")


def resolve_target(systemd: Optional[str], preset: Optional[str]):
    from jobgen.compiler.target import parse_systemctl_version, parse_target

    if systemd and preset:
        err("jobgen: error: give --systemd or --target, not both")
        raise typer.Exit(EXIT_INVALID)
    text = preset or systemd
    if text is None:
        return None
    if text == "auto":
        try:
            out = subprocess.run(["systemctl", "--version"], capture_output=True, text=True, timeout=10).stdout
            text = str(parse_systemctl_version(out))
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            err(f"jobgen: error: --systemd auto: cannot read `systemctl --version`: {exc}")
            raise typer.Exit(EXIT_INVALID)
    try:
        return parse_target(text)
    except ValueError as exc:
        err(f"jobgen: error: --{'target' if preset else 'systemd'} {text}: {exc}")
        raise typer.Exit(EXIT_INVALID)


def build_all(manifests: list[Path], target, holder: str, fmt: Format):
    """Every manifest through the pure core; all problems of all manifests, then exit 2."""
    from jobgen.compiler import pipeline
    from jobgen.compiler.diagnostics import ManifestError

    results, problems = [], []
    for path in manifests:
        try:
            results.append(pipeline.build(str(path), target, holder))
        except ManifestError as exc:
            problems += exc.diagnostics
    if problems:
        if fmt == Format.json:
            emit_json({"ok": False, "diagnostics": [d.as_json() for d in problems]})
        else:
            for d in problems:
                err(str(d))
            n = sum(1 for d in problems if d.severity == "error")
            err(f"jobgen: {n} error{'s' if n != 1 else ''}; nothing written")
        raise typer.Exit(EXIT_INVALID)
    return results


def _version_cb(value: bool) -> None:
    if value:
        typer.echo(f"jobgen {__version__}")
        raise typer.Exit(EXIT_OK)


@lru_cache(maxsize=1)
def app() -> typer.Typer:
    the_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True, help="Compile a YAML job manifest into systemd units.")

    @the_app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_version_cb, is_eager=True, help="Print the version and exit."),
    ) -> None:
        pass

    for name in COMMANDS:
        importlib.import_module(f"jobgen.cli.{name}").register(the_app)
    return the_app
