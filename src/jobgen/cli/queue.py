"""`jobgen enqueue MANIFEST JOB` and `jobgen queue MANIFEST JOB`: the operator's forms.

They compile the manifest to the same plan the units came from and hand the job's store
arguments (plan.Plan.queues) to the runtime command the units call
(runtime/queue/command.py), as the job's user when run as root: the spool belongs to the
job's user, and a request written by root would be unreadable to its drainer.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer

from jobgen.cli import completion
from jobgen.cli.answer import Format, build_all, err, json_answered, resolve_target
from jobgen.cli.app import FormatOpt, SystemdOpt
from jobgen.cli.exits import EXIT_INVALID, judged
from jobgen.contract import outcomes
from jobgen.contract.oneline import one_line
from jobgen.runtime import spawn


def _queued_job(manifest: Path, job: str, systemd: Optional[str], fmt: Format = Format.text):
    (result,) = build_all([manifest], resolve_target(systemd, None), _self(), fmt)
    store = result.plan.queues.get(job)
    if store is None:
        queued = sorted(result.plan.queues)
        what = f"queued jobs: {', '.join(queued)}" if queued else "no job has 'overlap: queue'"
        err(f"jobgen: error: {manifest}: no queued job '{job}'; {what}")
        raise typer.Exit(EXIT_INVALID)
    return result.plan.runs[job], store


def _self() -> str:
    return spawn.console_script(sys.argv[0])


class _Answer:
    """Our stdout as the child's answer reaches it (runtime/run.py _relay writes here),
    unbuffered as job_stream's; the first write that fails is kept in ``lost``, and the
    relay stops copying. The relay alone would drop it: `queue MANIFEST JOB >/dev/full`
    ended 0 with nothing shown, where the --spool form says so and ends 73."""

    def __init__(self, stream) -> None:  # cli/run.py job_stream(sys.stdout)
        self.stream, self.lost = stream, None

    def write(self, data: bytes) -> None:
        try:
            if self.stream is None:  # closed before we started (`>&-`)
                raise OSError(errno.EBADF, os.strerror(errno.EBADF))
            self.stream.write(data)
        except OSError as exc:
            self.lost = exc
            raise

    def flush(self) -> None:
        pass


def _run_as_job(spec, args: list[str], product: bool) -> int:
    """The runtime command in the job's own process context (user, groups, environment and
    environment files, as `jobgen run` builds it): the spool is the job user's, and a cluster
    URL's ${VAR} comes from the job's environment file. It is this jobgen, isolated from the
    caller's working folder (spawn.jobgen_argv), started in '/': it needs no folder, and
    the operator's may hold anything. Its stdout lost is judged as the child judges its
    own (exits.judged, ``product`` as exits.STDOUT_PRODUCT says of the --spool form).
    runtime.RunError when it cannot be started."""
    from jobgen.cli.run import job_stream
    from jobgen.runtime import run as runtime

    child = spec._replace(argv=spawn.jobgen_argv(*args), working_directory=spawn.NEUTRAL_CWD)
    out = _Answer(job_stream(sys.stdout))
    code = runtime.start(runtime.build(child), out, job_stream(sys.stderr))
    return judged(out.lost, code, product)


def _not_started(exc) -> NoReturn:
    err(f"jobgen: error: {exc}")
    raise typer.Exit(exc.code)


def enqueue(manifest: Path, job: str, args: list[str], *, systemd: Optional[str] = None) -> int:
    """Record one request with ``args`` for ``job``, as the job's user; the exit code."""
    from jobgen.runtime.queue.command import EXIT_USAGE
    from jobgen.runtime.run import RunError

    spec, store = _queued_job(manifest, job, systemd)
    try:
        # The request is recorded whatever becomes of its id line: not the product.
        return _run_as_job(spec, ["enqueue", *store, "--by", "jobgen enqueue", "--", *args], product=False)
    except RunError as exc:
        if exc.errno != errno.E2BIG:
            _not_started(exc)
        # The arguments with the job's environment past what execve(2) takes: nothing was
        # recorded, said as the --spool form says arguments too big for one request, with
        # its code (runtime/queue/command.py TooBig). It was an internal error.
        err(f"jobgen enqueue: {one_line(job)}: {outcomes.REJECTED}: request not recorded (the arguments with "
            f"the job's environment are too long for one command line: {os.strerror(errno.E2BIG)})")
        raise typer.Exit(EXIT_USAGE)


def queue(manifest: Path, job: str, *, retry: Optional[str] = None, drop: Optional[str] = None,
          systemd: Optional[str] = None, fmt: Format = Format.text) -> int:
    """List ``job``'s requests, or retry or drop one, as the job's user; the exit code."""
    from jobgen.runtime.run import RunError

    spec, store = _queued_job(manifest, job, systemd, fmt)
    action = ["--retry", retry] if retry else ["--drop", drop] if drop else []
    try:
        # The listing is the product; --retry and --drop only confirm what they did.
        code = _run_as_job(spec, ["queue", *store, *action, "--format", fmt.value], product=not action)
    except RunError as exc:
        _not_started(exc)
    if fmt == Format.json:
        json_answered()  # the runtime verb answers every outcome itself (cli/__init__.py)
    return code


def register(app: typer.Typer) -> None:
    @app.command("enqueue", context_settings={"allow_extra_args": True})
    def _enqueue(
        ctx: typer.Context,
        manifest: Path = typer.Argument(..., metavar="MANIFEST", help="Manifest file."),
        job: str = typer.Argument(..., metavar="JOB", help="A job with overlap: queue.", autocompletion=completion.jobs(queued_only=True)),
        systemd: Optional[str] = SystemdOpt,
    ) -> None:
        """Record one request for a queued job (arguments after -- are passed to its command)."""
        raise typer.Exit(enqueue(manifest, job, ctx.args, systemd=systemd))

    @app.command("queue")
    def _queue(
        manifest: Path = typer.Argument(..., metavar="MANIFEST", help="Manifest file."),
        job: str = typer.Argument(..., metavar="JOB", help="A job with overlap: queue.", autocompletion=completion.jobs(queued_only=True)),
        retry: Optional[str] = typer.Option(None, "--retry", metavar="ID", help="Move a failed request back to pending."),
        drop: Optional[str] = typer.Option(None, "--drop", metavar="ID", help="Remove a pending or failed request."),
        systemd: Optional[str] = SystemdOpt,
        fmt: Format = FormatOpt,
    ) -> None:
        """List a queued job's pending, running and failed requests (age, attempts)."""
        raise typer.Exit(queue(manifest, job, retry=retry, drop=drop, systemd=systemd, fmt=fmt))
