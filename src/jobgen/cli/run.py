"""`jobgen run`: run a job now, through the same lock and argv as its unit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.app import Format, SystemdOpt, build_all, err, resolve_target
from jobgen.cli.exits import EXIT_INVALID


def register(app: typer.Typer) -> None:
    from jobgen.compiler import plan

    @app.command()
    def run(
        manifest: Path = typer.Argument(..., help="Manifest file."),
        job: str = typer.Argument(..., help="Job name."),
        systemd: Optional[str] = SystemdOpt,
        holder: str = typer.Option(sys.argv[0] if os.path.isabs(sys.argv[0]) else plan.DEFAULT_HOLDER, "--holder", help="jobgen executable for cluster locks."),
    ) -> None:
        """Run a job now, through the same lock and argv as its unit."""
        (result,) = build_all([manifest], resolve_target(systemd, None), holder, Format.text)
        spec = result.plan.runs.get(job)
        if spec is None:
            err(f"jobgen: error: {manifest}: no job '{job}'; jobs: {', '.join(sorted(result.plan.runs)) or 'none'}")
            raise typer.Exit(EXIT_INVALID)
        argv = list(spec.argv)
        if os.geteuid() == 0 and spec.user:
            # The unit runs as User=/Group=; a root shell gets the same identity.
            ids = [f"--reuid={spec.user}", f"--regid={spec.group or spec.user}", "--init-groups"]
            argv = ["/usr/bin/setpriv", *ids, "--", *argv]
        env = dict(os.environ) | dict(spec.environment)
        try:
            code = subprocess.call(argv, env=env, cwd=spec.working_directory)
        except OSError as exc:
            err(f"jobgen: error: cannot start {argv[0]}: {exc.strerror}")
            raise typer.Exit(127)
        if code == plan.CONFLICT_EXIT:
            err(f"jobgen: {job}: skipped: another run holds the lock (exit {code})")
        elif code < 0:
            code = 128 - code  # killed by a signal: the shell's convention
        raise typer.Exit(code)
