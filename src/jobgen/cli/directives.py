"""`jobgen directives`: the directives jobgen emits and whether the target supports them."""

from __future__ import annotations

from typing import Optional

import typer

from jobgen.cli.answer import Format, emit_json, resolve_target
from jobgen.cli.app import FormatOpt, PresetOpt, SystemdOpt
from jobgen.cli.exits import EXIT_OK


def directives(*, systemd: Optional[str] = None, preset: Optional[str] = None, fmt: Format = Format.text) -> int:
    """Print the directive table for the target; the exit code."""
    from jobgen.compiler.plan import DEFAULT_TARGET, EMITTED, FALLBACKS
    from jobgen.compiler.target import parse_target, supported_directives

    target = resolve_target(systemd, preset) or parse_target(DEFAULT_TARGET)
    rows = [
        (*row, "" if row.status == "ok" else FALLBACKS.get((row.section, row.directive), "error if a manifest asks for it"))
        for row in supported_directives(target, EMITTED)
    ]
    if fmt == Format.json:
        keys = ("section", "directive", "since", "status", "when_missing")
        emit_json({"ok": True, "target": target.describe(), "directives": [dict(zip(keys, r)) for r in rows]})
        return EXIT_OK
    typer.echo(f"# {target.describe()}")
    typer.echo("# section\tdirective\tsince\tstatus\twhen missing")
    for row in rows:
        typer.echo("\t".join(str(x) for x in row).rstrip("\t"))
    return EXIT_OK


def register(app: typer.Typer) -> None:
    @app.command("directives")
    def _command(
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
    ) -> None:
        """List the directives jobgen emits and whether the target supports them."""
        raise typer.Exit(directives(systemd=systemd, preset=preset, fmt=fmt))
