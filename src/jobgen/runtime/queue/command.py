"""`jobgen enqueue`, `jobgen drain` and `jobgen queue` as the units call them.

    jobgen enqueue STORE --job JOB [--max-pending N] [--on-full reject|coalesce] [--by WHO] [-- ARG...]
    jobgen drain   STORE --job JOB [--max-attempts N] [--limit N] [--timeout S] -- COMMAND [ARG...]
    jobgen queue   STORE --job JOB [--max-attempts N] [--retry ID | --drop ID] [--format text|json]

    STORE is  --spool DIR                      (host scope: the job's spool folder)
          or  --backend URL --name NAME [--password-file PATH] [--connect-timeout S]
                                               (cluster scope: the job's lock server)

Like `jobgen lock`, these run on every trigger of a queued job, so they start without typer
or the compiler (cli/__init__.py dispatches them first) and take everything they need as
arguments: the units carry it, no manifest is read at run time. `jobgen enqueue MANIFEST
JOB` and `jobgen queue MANIFEST JOB` (the forms operators type) are turned into these by
jobgen.cli.queue, from the same plan the units were rendered from.

Exit codes (README "overlap: queue"): 0 enqueued / coalesced / drained; 1 a drain left a
request to retry or failed; 74 the queue is full (on_full: reject), the request was NOT
recorded; 65 --retry/--drop named no such request; 71 the spool cannot be used (for enqueue:
the request could not be written whole, e.g. a full disk, and was NOT recorded); 64 usage
(and enqueue arguments too big for one request);
69/77/78 as `jobgen lock` for the lock server.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from jobgen.runtime import journal
from jobgen.contract import outcomes
from jobgen.contract.locks import EXIT as LOCK_EXIT
from jobgen.contract.oneline import one_line
from jobgen.contract.queue import EXIT_FULL, EXIT_NO_SUCH, EXIT_SPOOL, ON_FULL, REJECT, SET_ASIDE
from jobgen.contract import policies
from jobgen.contract.policies import TIMEOUT_EXIT
from jobgen.runtime.queue.spool import STATES, NoSuchRequest, QueueFull, SetAside, Spool, TooBig

EXIT_OK = 0
EXIT_USAGE = LOCK_EXIT["usage"][0]  # a bad command line, as `jobgen lock` says it


class UsageError(Exception):
    pass


@dataclass
class Result:
    """What the command has to say; jobgen.cli writes it and exits with ``code``."""

    code: int = EXIT_OK
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    # The listing is what `jobgen queue` was run for: lost, it is exit 73 (cli/exits.py
    # STDOUT_PRODUCT), as `status` is. Other lines repeat what the journal records.
    out_is_product: bool = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def _positive(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 1")
    return int(text)


def _connect_timeout(text: str) -> float:
    # `jobgen lock`'s rule (a finite number > 0), loaded only when the option is given: the
    # host form, on every trigger, does not pay for the holder's modules.
    from jobgen.runtime.lock import CONNECT_TIMEOUT

    return CONNECT_TIMEOUT(text)


def _parser(verb: str) -> _Parser:
    p = _Parser(prog=f"jobgen {verb}", exit_on_error=False)
    store = p.add_mutually_exclusive_group(required=True)
    store.add_argument("--spool", metavar="DIR", help="host scope: the job's spool folder")
    store.add_argument("--backend", metavar="URL", help="cluster scope: the job's lock server (${VAR} expanded)")
    p.add_argument("--name", help="cluster scope: the queue's name (the job's lock name)")
    p.add_argument("--password-file", metavar="PATH")
    p.add_argument("--connect-timeout", type=_connect_timeout, default=5.0, metavar="SECONDS")
    p.add_argument("--job", required=True, help="job name, for journal lines")
    p.add_argument("--max-pending", type=_positive, default=100, metavar="N")
    p.add_argument("--on-full", choices=ON_FULL, default=REJECT)
    p.add_argument("--max-attempts", type=_positive, default=3, metavar="N")
    if verb == "enqueue":
        p.add_argument("--by", default="jobgen enqueue", help="what asked for the run (journal field)")
    if verb == "drain":
        p.add_argument("--limit", type=_positive, default=None, metavar="N", help="stop after N requests")
        p.add_argument("--timeout", type=_positive, default=None, metavar="SECONDS", help=f"stop a request that runs longer (exit status {TIMEOUT_EXIT})")
    if verb == "queue":
        action = p.add_mutually_exclusive_group()
        action.add_argument("--retry", metavar="ID", help="move a failed request back to pending")
        action.add_argument("--drop", metavar="ID", help="remove a pending or failed request")
        p.add_argument("--format", choices=("text", "json"), default="text")
    return p


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    cut = argv.index("--") if "--" in argv else len(argv)
    return argv[:cut], argv[cut + 1:]


def open_store(args: argparse.Namespace):
    if args.spool == "":
        # Not the cluster form (which said '--backend needs --name'), nor the working folder.
        raise UsageError("--spool needs a folder")
    if args.spool:
        _as_spool_owner(Path(args.spool))

        def report(bad: SetAside) -> None:
            # Journal, or stderr where there is none: a set-aside file is never silent.
            where = f"moved to {one_line(bad.moved_to)}" if bad.moved_to else "skipped where it is"
            _log(args.job, outcomes.SET_ASIDE, f"{bad.state}/{one_line(bad.name)} is not a complete request ({bad.reason}): "
                 f"{where}, never run", priority=4, fallback=True)

        return Spool(Path(args.spool), args.max_pending, args.on_full, args.max_attempts, report=report)
    if not args.name:
        raise UsageError("--backend needs --name")
    from jobgen.runtime import backends
    from jobgen.runtime.queue.cluster import Limits, open_queue

    env = dict(os.environ)
    target = backends.parse_url(args.backend, env)
    if args.password_file:
        target = backends.with_password(target, backends.read_password(args.password_file, env))
    opts = backends.Options(wait=0.0, ttl=60.0, connect_timeout=args.connect_timeout)
    return open_queue(target, args.name, Limits(args.max_pending, args.on_full, args.max_attempts), opts)


def _as_spool_owner(root: Path) -> None:
    """Root acting on a user's spool (the units' form typed as root) acts as that user, as
    the units and `jobgen queue|enqueue MANIFEST JOB` do. The folder tree is the user's, who
    can make any sub-folder a symbolic link, also between a check and a rename: as root,
    `pending -> /etc` had every file of /etc moved into the user's malformed/, and
    `malformed -> /etc/profile.d` a file of the user's renamed into it. As the user, every
    step is one the user could take anyway."""
    if os.geteuid() != 0:
        return
    try:
        st = os.stat(root)
    except OSError:
        return  # not there: the command says so in its own words
    if st.st_uid == 0:
        return
    import pwd

    try:
        user = pwd.getpwuid(st.st_uid)
        os.initgroups(user.pw_name, user.pw_gid)
        gid = user.pw_gid
    except KeyError:  # a uid without a name (DynamicUser=): no supplementary groups
        os.setgroups([])
        gid = st.st_gid
    os.setgid(gid)
    os.setuid(st.st_uid)


def _log(job: str, outcome: str, message: str, request_id: str = "", priority: int = 6, fallback: bool = False) -> None:
    fields = {
        "MESSAGE": f"{job}: {outcome}: {message}",
        "PRIORITY": str(priority),
        "SYSLOG_IDENTIFIER": "jobgen",
        "JOBGEN_JOB": job,
        "JOBGEN_OUTCOME": outcome,
        "JOBGEN_POLICY": policies.QUEUE,
    }
    if request_id:
        fields["JOBGEN_REQUEST_ID"] = request_id
    if inv := os.environ.get("INVOCATION_ID"):
        fields["JOBGEN_INVOCATION_ID"] = inv
    journal.send(fields, fallback=fallback)


def enqueue(args: argparse.Namespace, extra: list[str]) -> Result:
    store = open_store(args)
    try:
        got = store.enqueue(tuple(extra), by=args.by)
    except QueueFull as exc:
        _log(args.job, outcomes.REJECTED, f"queue full, request not recorded: {exc}", priority=4)
        return Result(EXIT_FULL, err=[f"jobgen enqueue: {args.job}: {outcomes.REJECTED}: queue full, request not recorded ({exc})"])
    except TooBig as exc:
        _log(args.job, outcomes.REJECTED, f"request not recorded: {exc}", priority=4)
        return Result(EXIT_USAGE, err=[f"jobgen enqueue: {args.job}: {outcomes.REJECTED}: request not recorded ({exc})"])
    except OSError as exc:
        # A full disk, a read-only spool: the request was not written (no partial file is
        # left), so it must not be reported as enqueued.
        why = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else (exc.strerror or str(exc))
        _log(args.job, outcomes.REJECTED, f"request not recorded: cannot write the spool: {why}", priority=3)
        return Result(EXIT_SPOOL, err=[f"jobgen enqueue: {args.job}: {outcomes.REJECTED}: request not recorded: cannot write the spool: {why}"])
    req = got.request
    _log(args.job, got.outcome, f"request {req.id} by {args.by} ({got.pending} pending)", req.id)
    return Result(out=[req.id], err=[f"jobgen enqueue: {args.job}: {got.outcome}: {req.id} ({got.pending} pending)"])


def drain_cmd(args: argparse.Namespace, command: list[str]) -> Result:
    from jobgen.runtime.queue.drain import drain

    if not command:
        raise UsageError("no command after `--`")
    store = open_store(args)
    if isinstance(store, Spool):
        store.require()
    levels = {outcomes.RETRY: 4, outcomes.FAILED: 3, outcomes.RECOVERED: 4, outcomes.TIMEOUT: 4}

    def log(outcome: str, req, message: str) -> None:
        _log(args.job, outcome, message, req.id if req else "", levels.get(outcome, 6), fallback=True)

    return Result(drain(store, tuple(command), dict(os.environ), log, args.limit, args.timeout).exit_code)


def _json_text(text: str) -> str | list[int]:
    """An argument or a file name in the JSON listing: the text when it is UTF-8; else, as
    `journalctl -o json` gives such a field, the array of its bytes. (A byte that is not
    UTF-8 is a lone surrogate here; JSON escapes it as one, which strict parsers refuse.)"""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return list(text.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:  # a surrogate that stands for no byte (a planted request)
            return list(text.encode("utf-8", "surrogatepass"))


def queue_cmd(args: argparse.Namespace) -> Result:
    store = open_store(args)
    if isinstance(store, Spool):
        store.require()
    try:
        if args.retry:
            req = store.retry(args.retry)
            _log(args.job, outcomes.RETRIED, f"request {req.id} moved from failed back to pending by an operator", req.id)
            return Result(out=[f"{req.id}: back to pending"])
        if args.drop:
            req = store.drop(args.drop)
            _log(args.job, outcomes.DROPPED, f"request {req.id} ({req.state}) dropped by an operator", req.id, 4)
            return Result(out=[f"{req.id}: dropped ({req.state})"])
    except NoSuchRequest as exc:
        return Result(EXIT_NO_SUCH, err=[f"jobgen queue: no such request: {exc}"])
    now = time.time_ns() // 1000
    rows = [(state, r) for state in STATES for r in store.list(state)]
    # Files set aside (host spool only): listed with why, until an operator removes them.
    aside = store.malformed() if isinstance(store, Spool) else []
    if args.format == "json":
        doc = {
            "format": 1,
            "job": args.job,
            "requests": [
                {"id": r.id, "state": s, "age_seconds": max(0, (now - r.enqueued_usec) // 1_000_000), "attempts": r.attempts,
                 "last_status": r.last_status, "args": [_json_text(a) for a in r.args], "by": _json_text(r.by)}
                for s, r in rows
            ],
            SET_ASIDE: [{"file": _json_text(f"{store.root / SET_ASIDE / name}"), "why": why} for name, why in aside],
        }
        return Result(out=[json.dumps(doc, indent=2, sort_keys=True)], out_is_product=True)
    counts = ", ".join(f"{sum(1 for s, _ in rows if s == state)} {state}" for state in STATES)
    out = [f"# {args.job}: {counts}" + (f", {len(aside)} {SET_ASIDE}" if aside else "")]
    for state, r in rows:
        age = max(0, (now - r.enqueued_usec) // 1_000_000)
        status = "" if r.last_status is None else f" last exit {r.last_status}"
        # Arguments are whoever enqueued's: escaped, so one cannot print a row of its own.
        out.append(f"{state:8} {r.id}  age {age}s  attempts {r.attempts}{status}  {' '.join(map(one_line, r.args))}".rstrip())
    for name, why in aside:
        out.append(f"{SET_ASIDE:9} {one_line(str(store.root / SET_ASIDE / name))}  ({why}; never run: inspect it, then remove it)")
    return Result(out=out, out_is_product=True)


def main(verb: str, argv: list[str]) -> Result:
    from jobgen.runtime.backends import LockError

    options, rest = _split(argv)
    try:
        args = _parser(verb).parse_args(options)
        if verb == "enqueue":
            return enqueue(args, rest)
        if verb == "drain":
            return drain_cmd(args, rest)
        return queue_cmd(args)
    except (UsageError, argparse.ArgumentError) as exc:
        return Result(EXIT_USAGE, err=[f"jobgen {verb}: usage error: {exc}"])
    except LockError as exc:
        from jobgen.runtime.lock import ERROR_OUTCOME, EXIT

        outcome = next((o for cls, o in ERROR_OUTCOME if isinstance(exc, cls)), "internal-error")
        return Result(EXIT[outcome][0], err=[f"jobgen {verb}: {outcome}: {exc}"])
    except OSError as exc:
        # The spool folder is missing or not ours (systemd-tmpfiles makes it): not a traceback.
        return Result(EXIT_SPOOL, err=[f"jobgen {verb}: cannot use the queue: {exc.strerror}: {exc.filename}"])
