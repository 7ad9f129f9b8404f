"""`jobgen schema`: the manifest's JSON Schema, for editors and CI validators."""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def schema() -> None:
        """Print the manifest's JSON Schema (generated from the keys validation knows)."""
        from jobgen.tools.schema import schema as build

        # The schema itself, not a jobgen answer: no "format" field (it would be a key of the schema).
        typer.echo(json.dumps(build(), indent=2, sort_keys=True))
