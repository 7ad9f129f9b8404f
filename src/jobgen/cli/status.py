"""`jobgen status`: on a host, what each job did (from the journal) and when it runs next."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.app import Format, build_all, err
from jobgen.cli.exits import EXIT_INVALID


class StatusFormat(str, Enum):
    text = "text"
    json = "json"
    prometheus = "prometheus"


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _text(statuses, since: str) -> list[str]:
    from jobgen.host.status import OUTCOMES

    head = ["JOB", "LAST RUN", "LAST", *OUTCOMES, "NEXT", "TIMER"]
    rows = [head]
    for s in statuses:
        timer = "-" if s.timer_enabled is None else ("enabled" if s.timer_enabled else "disabled")
        if s.timer_enabled is not None and not s.timer_active:
            timer += ", inactive"
        rows.append([s.name, _when(s.last_run), s.last_outcome or "-", *(str(s.counts[o]) for o in OUTCOMES),
                     _when(s.next_elapse), timer])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"runs since {since}"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return lines


def _write(path: Path, text: str) -> None:
    """Atomically, so node_exporter never reads half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def register(app: typer.Typer) -> None:
    @app.command()
    def status(
        manifest: Optional[Path] = typer.Argument(None, help="Only this manifest's jobs (default: every job that logged)."),
        since: str = typer.Option("-24h", "--since", help="Window start, as journalctl --since takes it: -24h, today, 2026-12-01."),
        fmt: StatusFormat = typer.Option(StatusFormat.text, "--format", help="text, json, or prometheus (node_exporter textfile)."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE", help="Write here (atomically) instead of standard output."),
    ) -> None:
        """Per job on this host: last run and outcome, outcome counts, next elapse, timer enabled."""
        from jobgen.compiler import plan
        from jobgen.host import status as host

        jobs = None
        if manifest is not None:
            (result,) = build_all([manifest], None, plan.DEFAULT_HOLDER, Format.text)
            jobs = sorted(result.plan.runs)
        try:
            statuses = host.collect(jobs, since)
        except (OSError, RuntimeError) as exc:
            err(f"jobgen: error: {exc}")
            raise typer.Exit(EXIT_INVALID)
        if fmt == StatusFormat.json:
            import json

            text = json.dumps(host.as_json(statuses, since), indent=2, sort_keys=True) + "\n"
        elif fmt == StatusFormat.prometheus:
            text = host.as_prometheus(statuses)
        else:
            text = "\n".join(_text(statuses, since)) + "\n"
        if output is None:
            typer.echo(text, nl=False)
        else:
            _write(output, text)
