"""`jobgen run`: run a job now, through the same lock and argv as its unit, in the process
context systemd would give it (runtime/run.py builds and starts it), and say how it ended
in the words of the unit's reporter."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli import completion
from jobgen.cli.answer import Format, build_all, check_holder, err, resolve_target
from jobgen.cli.app import PresetOpt, SystemdOpt
from jobgen.cli.exits import EXIT_INVALID


def run(manifest: Path, job: str, *, holder: str, systemd: Optional[str] = None, preset: Optional[str] = None) -> int:
    """Run ``job`` of ``manifest`` as its unit would, its output on ours; its exit status."""
    from jobgen.runtime import run as runtime

    check_holder(holder)
    (result,) = build_all([manifest], resolve_target(systemd, preset), holder, Format.text)
    spec = result.plan.runs.get(job)
    if spec is None:
        err(f"jobgen: error: {manifest}: no job '{job}'; jobs: {', '.join(sorted(result.plan.runs)) or 'none'}")
        return EXIT_INVALID
    out, diag = job_stream(sys.stdout), job_stream(sys.stderr)
    try:
        ended = runtime.execute(runtime.build(spec), out, diag)
    except runtime.RunError as exc:
        _say(diag, f"jobgen: error: job '{job}': {exc}")
        return exc.code
    # The unit's reporter's line (its MESSAGE=), with the same outcome word.
    line = f"jobgen: {job}: {ended.outcome} (result={ended.result}, {ended.exit_code}={ended.exit_status})"
    _say(diag, line + (f": {ended.why}" if ended.why else ""))
    return ended.status


class _Fd:
    """One of our output descriptors, written without a buffer. A caller that closed the
    stream (`2>&-`), a full disk or a reader gone away must not change the exit code, which
    is then the job's only word: a write that fails is dropped where it fails (the relay
    stops copying), and no buffered rest is left for the interpreter's exit to fail on
    again (it would exit 120 instead of the job's status)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # a signal may cut a write short; the rest is written, not lost
            view = view[os.write(self.fd, view):]

    def flush(self) -> None:
        pass


def job_stream(std) -> Optional[_Fd]:
    """Where the job's output goes: our stdout's or stderr's descriptor, None when closed."""
    try:
        std.flush()
        return _Fd(std.fileno())
    except (AttributeError, OSError, ValueError):  # None (closed at start), no descriptor
        return None


def _say(stream: Optional[_Fd], line: str) -> None:
    """jobgen's own line after the job's output, on the same descriptor; dropped if it cannot be written."""
    if stream is None:
        return
    try:
        stream.write(f"{line}\n".encode("utf-8", "surrogateescape"))
    except OSError:
        pass


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
