"""`jobgen schema`: the manifest's JSON Schema, for editors and CI validators."""

from __future__ import annotations

import typer

from jobgen.cli.app import emit_json


def register(app: typer.Typer) -> None:
    @app.command()
    def schema() -> None:
        """Print the manifest's JSON Schema (generated from the keys validation knows)."""
        from jobgen.tools.schema import schema as build

        emit_json(build())
