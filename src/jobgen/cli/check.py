"""`jobgen check`: validate and lint manifests; writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.app import Format, FormatOpt, PresetOpt, SystemdOpt, build_all, emit_json, err, resolve_target


def register(app: typer.Typer) -> None:
    @app.command()
    def check(
        manifests: list[Path] = typer.Argument(..., help="Manifest files."),
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
    ) -> None:
        """Validate and lint manifests; writes nothing."""
        from jobgen.compiler import plan

        results = build_all(manifests, resolve_target(systemd, preset), plan.DEFAULT_HOLDER, fmt)
        notes = [d for r in results for d in r.diagnostics]
        if fmt == Format.json:
            emit_json({"ok": True, "diagnostics": [d.as_json() for d in notes]})
        else:
            for d in notes:
                err(str(d))
            for path, r in zip(manifests, results):
                typer.echo(f"{path}: ok ({len(r.files)} files for {r.plan.target.describe()})")
