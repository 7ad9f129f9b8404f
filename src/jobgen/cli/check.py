"""`jobgen check`: validate and lint manifests; writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.answer import Format, build_all, emit_json, err, resolve_target
from jobgen.cli.app import EPILOG, FormatOpt, ManifestsArg, PresetOpt, QuietOpt, StrictOpt, SystemdOpt
from jobgen.cli.exits import EXIT_OK
from jobgen.contract.oneline import one_line


def check(manifests: list[Path], *, systemd: Optional[str] = None, preset: Optional[str] = None,
          fmt: Format = Format.text, quiet: bool = False, strict: bool = False) -> int:
    """Compile ``manifests`` and show what was found; the exit code."""
    from jobgen.compiler import plan
    from jobgen.compiler.diagnostics import NOTE

    results = build_all(manifests, resolve_target(systemd, preset), plan.DEFAULT_HOLDER, fmt, strict)
    notes = [d for r in results for d in r.diagnostics]
    if fmt == Format.json:
        emit_json({"ok": True, "diagnostics": [d.as_json() for d in notes]})
        return EXIT_OK
    for d in notes:
        if not (quiet and d.severity == NOTE):
            err(str(d))
    if not quiet:
        for path, r in zip(manifests, results):
            # One line per manifest, whatever its folder's name holds: a line break there
            # printed a line that read as another manifest's "ok".
            typer.echo(one_line(f"{path}: ok ({len(r.files)} files for {r.plan.target.describe()})"))
    return EXIT_OK


def register(app: typer.Typer) -> None:
    @app.command("check", epilog=EPILOG)
    def _command(
        manifests: list[Path] = ManifestsArg,
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
        quiet: bool = QuietOpt,
        strict: bool = StrictOpt,
    ) -> None:
        """Validate and lint MANIFEST files; writes nothing."""
        raise typer.Exit(check(manifests, systemd=systemd, preset=preset, fmt=fmt, quiet=quiet, strict=strict))
