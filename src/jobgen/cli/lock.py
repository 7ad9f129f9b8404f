"""`jobgen lock`: listed in `jobgen --help` only.

The holder runs in front of every cluster-scope job, so cli/__init__.py dispatches it
before typer, jinja2 or the compiler are imported; this entry documents it in the help
and forwards anything that still reaches typer.
"""

from __future__ import annotations

import typer


def lock(args: list[str]) -> int:
    """The holder (runtime/lock.py) with ``args``; its exit code."""
    from jobgen.runtime import lock as holder

    return holder.main(list(args))


def register(app: typer.Typer) -> None:
    @app.command(
        "lock",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
        add_help_option=False,
    )
    def _command(ctx: typer.Context) -> None:
        """Hold a cluster lock while a command runs: jobgen lock --backend URL --name NAME [--wait S] [--ttl S] -- ARGV... (the units call it; `jobgen lock --help` for every option)."""
        raise typer.Exit(lock(ctx.args))
