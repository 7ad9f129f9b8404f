"""`jobgen status`: on a host, what each job did (from the journal) and when it runs next."""

from __future__ import annotations

import errno
import os
import signal
import stat
import tempfile
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from jobgen.cli.answer import Format, build_all, err
from jobgen.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_OUTPUT, EXIT_REFUSED

# host.StatusError.kind -> exit code (README "Exit codes")
EXITS = {"since": EXIT_INVALID, "systemd": EXIT_REFUSED, "journal": EXIT_REFUSED}


class StatusFormat(str, Enum):
    text = "text"
    json = "json"
    prometheus = "prometheus"


def _when(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _text(statuses, since: str) -> list[str]:
    from jobgen.contract.outcomes import RUN

    head = ["JOB", "LAST RUN", "LAST", *RUN, "NEXT", "TIMER", "QUEUE"]
    rows = [head]
    for s in statuses:
        timer = "-" if s.timer_enabled is None else ("enabled" if s.timer_enabled else "disabled")
        if s.timer_enabled is not None and not s.timer_active:
            timer += ", inactive"
        queue = "-" if not s.queued else f"{s.last_queue_event or '-'} ({sum(s.queue_counts.values())} events)"
        rows.append([s.name, _when(s.last_run), s.last_outcome or "-", *(str(s.counts[o]) for o in RUN),
                     _when(s.next_elapse), timer, queue])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = [f"runs since {since}"]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return lines


class _Textfile:
    """The -o file, written atomically so node_exporter's textfile collector never reads half
    of it: a temporary file in the same folder, made before the host is asked (a folder that
    cannot be written fails at once), then filled, flushed and renamed over the old file. On
    any failure the old file stays as it was and the temporary file is removed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # The rename replaces whatever has the name: as root, `-o /dev/null` made /dev/null a
        # regular file, and `-o /dev/stdout` replaced that link. Only a regular file (or
        # nothing) is replaced; a link, device, FIFO or folder is refused.
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISREG(st.st_mode):
                what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                raise OSError(errno.EINVAL, f"{what}; -o replaces a regular file by renaming a new one over it", str(path))
        fd, self.tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        self.file = os.fdopen(fd, "w", encoding="utf-8")

    def commit(self, text: str) -> None:
        try:
            self.file.write(text)
            self.file.flush()
            os.fchmod(self.file.fileno(), 0o644)
            os.fsync(self.file.fileno())
            self.file.close()
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        # The temporary file goes first: closing flushes what is still buffered, and on a
        # full disk that fails again (ENOSPC), which left one more file at every run.
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
        try:
            self.file.close()
        except OSError:
            pass


def _cannot_write(path: Path, exc: OSError) -> int:
    err(f"jobgen: error: cannot write {path}: {exc.strerror or exc}")
    return EXIT_OUTPUT


class _Terminated(BaseException):
    """SIGTERM (systemd stopping a status service) while the -o file's temporary file exists."""


def _terminated(signum, _frame) -> None:
    raise _Terminated()


def status(manifest: Path, *, since: str, fmt: StatusFormat = StatusFormat.text, output: Optional[Path] = None) -> int:
    """Report ``manifest``'s jobs on this host since ``since``, to stdout or ``output``; the exit code."""
    from jobgen.compiler import plan
    from jobgen.host import status as host

    # A manifest's problems in the format asked for (JSON diagnostics with --format json).
    (result,) = build_all([manifest], None, plan.DEFAULT_HOLDER, Format.json if fmt == StatusFormat.json else Format.text)
    users = {job: run.user for job, run in result.plan.runs.items()}
    sources = host.sources_of(result.plan.journal_units, users)
    if output is None:
        return _report(host, sources, since, fmt, None, None)
    try:
        textfile = _Textfile(output)
    except OSError as exc:
        return _cannot_write(output, exc)
    # The temporary file must not outlive an interrupted run: each Ctrl-C, or each stop of a
    # status service (systemd's SIGTERM, e.g. while journalctl reads), left one more in the
    # textfile collector's folder. A SIGTERM still ends the process by SIGTERM, as without -o.
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _report(host, sources, since, fmt, output, textfile)
    except _Terminated:
        textfile.discard()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        raise SystemExit(128 + signal.SIGTERM) from None  # not reached: the signal ends us
    except BaseException:
        textfile.discard()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report(host, sources, since: str, fmt: StatusFormat, output: Optional[Path], textfile: Optional[_Textfile]) -> int:
    try:
        statuses = host.collect(sources, since)
    except host.StatusError as exc:
        if textfile is not None:
            textfile.discard()
        err(f"jobgen: error: {exc}")
        return EXITS[exc.kind]
    if fmt == StatusFormat.json:
        import json

        text = json.dumps(host.as_json(statuses, since), indent=2, sort_keys=True) + "\n"
    elif fmt == StatusFormat.prometheus:
        text = host.as_prometheus(statuses)
    else:
        text = "\n".join(_text(statuses, since)) + "\n"
    if textfile is None:
        typer.echo(text, nl=False)
        return EXIT_OK
    try:
        textfile.commit(text)
    except OSError as exc:
        return _cannot_write(output, exc)
    return EXIT_OK


def register(app: typer.Typer) -> None:
    from jobgen.cli.app import a_path

    @app.command("status")
    def _command(
        manifest: Path = typer.Argument(..., metavar="MANIFEST", help="The manifest whose jobs to report (their units and users come from it)."),
        since: str = typer.Option("-24h", "--since", help="Window start, as journalctl --since takes it: -24h, today, 2026-12-01."),
        fmt: StatusFormat = typer.Option(StatusFormat.text, "--format", help="text, json, or prometheus (node_exporter textfile)."),
        output: Optional[Path] = typer.Option(None, "-o", "--output", metavar="FILE", parser=a_path, help="Write here (atomically) instead of standard output."),
    ) -> None:
        """Per job on this host: last run and outcome, outcome counts, queue events, next elapse, timer enabled."""
        raise typer.Exit(status(manifest, since=since, fmt=fmt, output=output))
