"""`jobgen run`: run a job now, through the same lock and argv as its unit, in the process
context systemd would give it (runtime/run.py builds and starts it), and say how it ended
in the words of the unit's reporter."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli import completion
from jobgen.cli.app import Format, PresetOpt, SystemdOpt, build_all, err, resolve_target
from jobgen.cli.exits import EXIT_INVALID


def run(manifest: Path, job: str, *, holder: str, systemd: Optional[str] = None, preset: Optional[str] = None) -> int:
    """Run ``job`` of ``manifest`` as its unit would, its output on ours; its exit status."""
    from jobgen.runtime import run as runtime

    (result,) = build_all([manifest], resolve_target(systemd, preset), holder, Format.text)
    spec = result.plan.runs.get(job)
    if spec is None:
        err(f"jobgen: error: {manifest}: no job '{job}'; jobs: {', '.join(sorted(result.plan.runs)) or 'none'}")
        return EXIT_INVALID
    try:
        ended = runtime.execute(runtime.build(spec), sys.stdout.buffer, sys.stderr.buffer)
    except runtime.RunError as exc:
        err(f"jobgen: error: job '{job}': {exc}")
        return exc.code
    # The unit's reporter's line (its MESSAGE=), with the same outcome word.
    line = f"jobgen: {job}: {ended.outcome} (result={ended.result}, {ended.exit_code}={ended.exit_status})"
    err(line + (f": {ended.why}" if ended.why else ""))
    return ended.status


def register(app: typer.Typer) -> None:
    from jobgen.runtime import spawn

    @app.command("run")
    def _command(
        manifest: Path = typer.Argument(..., help="Manifest file."),
        job: str = typer.Argument(..., help="Job name.", autocompletion=completion.jobs()),
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        holder: str = typer.Option(spawn.console_script(sys.argv[0]), "--holder", help="jobgen executable for cluster locks."),
    ) -> None:
        """Run a job now: the unit's lock and argv in the unit's process context (user, environment, folder, umask, limits, timeout); ends with the unit's outcome line."""
        raise typer.Exit(run(manifest, job, holder=holder, systemd=systemd, preset=preset))
