"""The drainer: run a spool's requests one at a time, in order, each to its end.

The caller already holds the job's lock (the drainer unit's ExecStart= is wrapped by the
same flock / `jobgen lock` as any run of the job), so one drainer works on a queue at a
time however it was started. For each request: count the attempt (spool.take), run the
job's argv plus the request's arguments with JOBGEN_REQUEST_ID in the environment, and
only then remove it (success) or put it back (failure). A failed request stays first in
line and ends this drain: the next trigger retries it, so a failing request does not burn
its attempts in a tight loop and later requests never overtake it.

An orderly stop (`systemctl stop`, a shutdown: systemd sends its stop signal to the whole
unit) that ends a request's command is not the request's failure: the request goes back to
pending first in line with its attempt given back (spool.put_back), logged as its own
outcome (contract/outcomes.py STOPPED), so poweroffs never use up max_attempts. Only a
drainer that cannot record it (SIGKILLed past TimeoutStopSec=) leaves the attempt counted.

Every step is one journal line with JOBGEN_OUTCOME (contract/outcomes.py QUEUE: started,
done, retry, failed, stopped, ...) and JOBGEN_REQUEST_ID, so `journalctl JOBGEN_JOB=x`
tells requests apart.
"""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from typing import Callable, Mapping

from jobgen.contract import outcomes
from jobgen.contract.outcomes import STOPPED
from jobgen.contract.policies import TIMEOUT_EXIT
from jobgen.contract.queue import EXIT_LEFT_WORK
from jobgen.runtime import tree
from jobgen.runtime.queue.spool import Request, Spool

Log = Callable[[str, Request | None, str], None]  # (outcome, request, message)

# ``timeout`` bounds each request, as `timeout` bounds each run of any other job (the
# drain unit itself has none: one drain runs many requests).
# Signals a stopping drainer passes to the request's whole process tree (systemd stop, Ctrl-C).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass(frozen=True)
class Summary:
    done: int = 0
    retry: int = 0
    failed: int = 0
    recovered: int = 0
    stopped: bool = False  # a stop signal ended the drain
    put_back: int = 0  # requests a stop interrupted, back to pending with the attempt given back

    @property
    def exit_code(self) -> int:
        # A drain that left work behind failed, so OnFailure= and `systemctl status` see it.
        return EXIT_LEFT_WORK if (self.retry or self.failed or self.stopped) else 0


# timeout(1)'s status for a command it had to stop (a request past the job's `timeout`),
# the same `jobgen run` gives a job past its timeout.
TIMED_OUT = TIMEOUT_EXIT
GRACE = 10.0  # seconds between SIGTERM and SIGKILL for a request past its timeout


def _wait(owned: tree.Tree, timeout: float | None) -> int | None:
    """The command's status, or None when it ran past ``timeout`` and was stopped."""
    proc = owned.proc
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    for sig, grace in ((signal.SIGTERM, GRACE), (signal.SIGKILL, None)):
        if not owned.signal(sig):
            break
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    proc.wait()
    return None


def drain(spool: Spool, argv: tuple[str, ...], env: Mapping[str, str], log: Log, limit: int | None = None,
          timeout: float | None = None) -> Summary:
    recovered = spool.recover()
    for req in recovered:
        log(outcomes.RECOVERED, req, f"request {req.id} was left running by a stopped drainer: back to {req.state}")
    counts = {outcomes.DONE: 0, outcomes.RETRY: 0, outcomes.FAILED: 0, STOPPED: 0}
    stopping: list[int] = []
    child: list[tree.Tree] = []

    def forward(signum, _frame) -> None:
        stopping.append(signum)
        if child:
            child[0].signal(signum)

    old = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        n = 0
        while not stopping and (limit is None or n < limit) and (req := spool.take()) is not None:
            n += 1
            log(outcomes.STARTED, req, f"request {req.id}: attempt {req.attempts} of {spool.max_attempts}")
            child_env = dict(env) | {"JOBGEN_REQUEST_ID": req.id, "JOBGEN_REQUEST_ATTEMPT": str(req.attempts)}
            # Owned as `jobgen lock` owns its command (tree.Tree): its own process group, the
            # drainer a subreaper, so a stop reaches everything the request started.
            try:
                owned = tree.Tree.start([*argv, *req.args], child_env)
            except OSError as exc:
                # The command cannot be started (gone after a deploy, not executable): this
                # request's failed attempt, with the status systemd gives an ExecStart= it
                # cannot exec (203/EXEC, as `jobgen run`), never a spool that cannot be used
                # nor a request left in running/ as if its drainer had been killed.
                from jobgen.runtime.run import EXIT as RUN_EXIT

                status = RUN_EXIT["exec"][0]
                outcome = spool.finish(req, status)
                counts[outcome] += 1
                log(outcome, req, f"request {req.id}: cannot start {argv[0]}: {exc.strerror or exc}: "
                    f"exit status {status}: {outcome}")
                break
            child[:] = [owned]
            for signum in list(stopping):  # a stop that came while it was starting
                owned.signal(signum)
            status = _wait(owned, timeout)
            # What the request left behind (in its group or not: setsid, double fork) must
            # not run on beside the next request (never two at once).
            owned.kill()
            owned.reap()
            child.clear()
            if status is None:
                log(outcomes.TIMEOUT, req, f"request {req.id}: ran past its timeout of {timeout:g}s: stopped (SIGTERM, SIGKILL after {GRACE:g}s)")
                status = TIMED_OUT
            status = 128 - status if status < 0 else status
            if stopping and status != 0 and hasattr(spool, "put_back"):
                back = spool.put_back(req)
                counts[STOPPED] += 1
                log(STOPPED, back, f"request {req.id}: interrupted by a stop (signal {signal.Signals(stopping[0]).name}, "
                    f"exit status {status}): back to pending, attempt not counted ({back.attempts} of {spool.max_attempts} used)")
                break
            outcome = spool.finish(req, status)
            counts[outcome] += 1
            log(outcome, req, f"request {req.id}: exit status {status}: {outcome}")
            if outcome != outcomes.DONE:
                break
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    return Summary(counts[outcomes.DONE], counts[outcomes.RETRY], counts[outcomes.FAILED], len(recovered), bool(stopping), counts[STOPPED])
