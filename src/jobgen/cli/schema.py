"""`jobgen schema`: the manifest's JSON Schema, for editors and CI validators."""

from __future__ import annotations

import json

import typer

from jobgen.cli.exits import EXIT_OK


def schema(schema_id: str) -> int:
    """Print the schema whose $id is ``schema_id``; the exit code."""
    from jobgen.tools.schema import schema as build

    # The schema itself, not a jobgen answer: no "format" field (it would be a key of the schema).
    typer.echo(json.dumps(build(schema_id), indent=2, sort_keys=True))
    return EXIT_OK


def register(app: typer.Typer) -> None:
    from jobgen.tools.schema import SCHEMA_ID

    @app.command("schema")
    def _command(
        schema_id: str = typer.Option(SCHEMA_ID, "--id", metavar="URL", help="The schema's $id: the URL it is published at (for a schema catalogue)."),
    ) -> None:
        """Print the manifest's JSON Schema (generated from the keys and rules validation knows)."""
        raise typer.Exit(schema(schema_id))
