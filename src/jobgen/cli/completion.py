"""`jobgen completion SHELL`: the shell's completion script on stdout, as `ruff` and
`kubectl` print theirs (typer's `--show-completion` guesses the shell from the parent
process and fails under `sh`, e.g. in a Dockerfile or a package's postinst).

The script calls jobgen back with ``_JOBGEN_COMPLETE`` set (click's completion protocol);
the callbacks below answer what click cannot know: the layouts a command takes and the job
names of the manifest already typed on the line. A completion answer is never an error: a
missing or broken manifest completes to nothing.
"""

from __future__ import annotations

from enum import Enum
from typing import Callable, Iterable

import typer

from jobgen.cli.recall import COMPLETE_VAR  # click's _{PROG}_COMPLETE, upper case; a render never recalls under it

PROG = "jobgen"


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def layouts(names: Iterable[str] | None = None) -> Callable[[str], list[str]]:
    """--layout: the layout names the command accepts; None: every layout of
    compiler/layout.py (imported when completing, not when the command is defined)."""

    def complete(incomplete: str) -> list[str]:
        if names is None:
            from jobgen.compiler.layout import LAYOUTS

            return [name for name in LAYOUTS if name.startswith(incomplete)]
        return [name for name in names if name.startswith(incomplete)]

    return complete


def _job_names(manifest: object, queued_only: bool) -> list[str]:
    from jobgen.compiler import load
    from jobgen.compiler.diagnostics import ManifestError
    from jobgen.compiler.load import Map, Scalar

    try:
        root = load.load_file(str(manifest))
    except (ManifestError, OSError, ValueError):
        return []
    jobs, defaults = (root.get("jobs"), root.get("defaults")) if isinstance(root, Map) else (None, None)
    if not isinstance(jobs, Map):
        return []

    def overlap(body: object) -> str | None:
        node = body.get("overlap") if isinstance(body, Map) else None
        return node.value if isinstance(node, Scalar) else None

    from jobgen.contract.policies import DEFAULT_OVERLAP, OVERLAP

    def queues(body: object) -> bool:
        policy = OVERLAP.get(overlap(body) or overlap(defaults) or DEFAULT_OVERLAP)
        return policy is not None and policy.queues

    return [key.value for key, body in jobs.items if not queued_only or queues(body)]


def jobs(queued_only: bool = False) -> Callable[[typer.Context, str], list[str]]:
    """JOB: the names under `jobs:` of the MANIFEST argument before it (queued_only: those
    with overlap: queue, the only ones `jobgen queue` and `jobgen enqueue` take)."""

    def complete(ctx: typer.Context, incomplete: str) -> list[str]:
        manifest = ctx.params.get("manifest")
        if manifest is None:
            return []
        return [name for name in _job_names(manifest, queued_only) if name.startswith(incomplete)]

    return complete


def completion(shell: Shell) -> int:
    """Print ``shell``'s completion script; the exit code."""
    # typer's own script for the shell (the one --show-completion prints), named here
    # rather than guessed from the parent process.
    from typer._completion_shared import get_completion_script

    from jobgen.cli.exits import EXIT_OK

    typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell.value))
    return EXIT_OK


def register(app: typer.Typer) -> None:
    @app.command("completion")
    def _command(shell: Shell = typer.Argument(..., metavar="SHELL", help="bash, zsh or fish.")) -> None:
        """Print the shell completion script: eval "$(jobgen completion bash)" in ~/.bashrc."""
        raise typer.Exit(completion(shell))
