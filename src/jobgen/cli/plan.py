"""`jobgen plan`: when each job runs and what can go wrong, from the manifest alone."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.answer import Format, build_all, emit_json, err, resolve_target
from jobgen.cli.app import FormatOpt, PresetOpt, SystemdOpt
from jobgen.cli.exits import EXIT_INVALID, EXIT_OK, failure_document


def _parse_from(text: Optional[str]) -> datetime:
    if text is None:
        return datetime.now(timezone.utc).replace(microsecond=0)
    from jobgen.compiler.timespec import MAX_YEAR, MIN_YEAR

    try:
        when = datetime.fromisoformat(text.replace(" UTC", "Z"))
    except ValueError:
        err(f"jobgen: error: --from {text}: expected an ISO 8601 time such as 2026-03-29T00:00:00Z")
        raise typer.Exit(EXIT_INVALID)
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    # systemd's calendar knows MIN_YEAR to MAX_YEAR (calendarspec.c) and its clock nothing
    # before 1970: outside, the engine would answer elapses before --from or fail on a year
    # Python's datetime cannot hold (0001 with an offset east of UTC, 9999 west of it).
    first, end = datetime(MIN_YEAR, 1, 1, tzinfo=timezone.utc), datetime(MAX_YEAR + 1, 1, 1, tzinfo=timezone.utc)
    try:
        inside = first <= when < end
    except OverflowError:
        inside = False
    if not inside:
        err(f"jobgen: error: --from {text}: outside the times systemd's calendar covers "
            f"({first:%Y-%m-%d} to {MAX_YEAR}-12-31 UTC)")
        raise typer.Exit(EXIT_INVALID)
    return when


def plan(manifest: Path, *, job: Optional[str], next_: int, start: Optional[str], local_zone: str,
         systemd: Optional[str] = None, preset: Optional[str] = None, fmt: Format = Format.text) -> int:
    """Print the plan report of ``manifest`` (only ``job`` if given); the exit code."""
    from jobgen.compiler import plan as compiler_plan
    from jobgen.compiler.timespec import timezone_is_valid
    from jobgen.tools import plan as tool

    when = _parse_from(start)
    if not timezone_is_valid(local_zone):
        err(f"jobgen: error: --local-zone {local_zone}: not a time zone (e.g. Europe/Berlin, UTC)")
        return EXIT_INVALID
    target = resolve_target(systemd, preset)
    (result,) = build_all([manifest], target, compiler_plan.DEFAULT_HOLDER, fmt)
    model = tool.model(str(manifest), target)
    if job is not None and job not in {j.name for j in model.jobs}:
        err(f"jobgen: error: {manifest}: no job '{job}'; jobs: {', '.join(j.name for j in model.jobs) or 'none'}")
        return EXIT_INVALID
    try:
        report = tool.report(model, result.plan, when, next_, local_zone, job)
    except tool.Uncomputable as exc:
        err(str(exc.diagnostic))
        if fmt == Format.json:
            emit_json(failure_document(exc.diagnostic.message, EXIT_INVALID) | {"diagnostics": [exc.diagnostic.as_json()]})
        return EXIT_INVALID
    if fmt == Format.json:
        emit_json(report.as_json())
    else:
        for line in tool.as_text(report):
            typer.echo(line)
    return EXIT_OK


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def _command(
        manifest: Path = typer.Argument(..., help="Manifest file."),
        job: Optional[str] = typer.Option(None, "--job", help="Only this job."),
        next_: int = typer.Option(5, "--next", min=0, max=1000, metavar="N", help="How many elapses to list per job."),
        start: Optional[str] = typer.Option(None, "--from", metavar="TIMESTAMP", help="Start time, ISO 8601 (naive = UTC); default now."),
        local_zone: str = typer.Option("UTC", "--local-zone", metavar="ZONE", help="The hosts' local time zone, for schedules without one."),
        systemd: Optional[str] = SystemdOpt,
        preset: Optional[str] = PresetOpt,
        fmt: Format = FormatOpt,
    ) -> None:
        """When each job will run, every path that can run it, and the risks."""
        raise typer.Exit(plan(manifest, job=job, next_=next_, start=start, local_zone=local_zone, systemd=systemd, preset=preset, fmt=fmt))
