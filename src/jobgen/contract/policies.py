"""Overlap policies and lock scopes as tables of behaviour.

What a policy or a scope *does* is answered here, once: the model lists the names, the
validator asks which keys make sense, the planner asks what to write, and the unit's
reporter gets the outcome word for a lock conflict from here (an argument, not a shell
`case` on the policy name). A new policy is a row plus its code; nothing else compares
policy or scope names. tests/test_policy_commands.py takes every row here and fails for a
row that check, render, plan, status, run or schema has no behaviour for.

`queue` keeps every requested run as durable work (runtime/queue/): a trigger records a
request and returns, and one drainer at a time (under the job's lock) runs them in order.
"""

from __future__ import annotations

from typing import NamedTuple

from jobgen.contract import outcomes
from jobgen.contract.locks import CLUSTER, HOST, UNIT  # the lock scopes' names



# The overlap policies' names, as the manifest spells them (the lock scopes' names,
# UNIT, HOST and CLUSTER, are the lock contract's).
SKIP, WAIT, ALLOW, QUEUE = "skip", "wait", "allow", "queue"


class OverlapPolicy(NamedTuple):
    """What happens when a run starts while the previous one is still going."""

    name: str
    locks: bool  # runs take the job's lock (False: no lock at all; `lock:` is refused)
    waits: bool  # a run waits for the lock up to `wait_timeout` (required; refused otherwise)
    # JOBGEN_OUTCOME of a run that ended with the lock conflict exit (75): it never ran its command.
    conflict_outcome: str
    # A calendar elapse that falls during a run is deferred to the next slot
    # (DeferReactivation=, 257, or its emulation) instead of a back-to-back catch-up run.
    defers_overrun: bool
    # `every:` schedules count the interval from the end of the previous run
    # (OnUnitInactiveSec=), so an overrun never triggers an immediate second run.
    every_from_end: bool
    # `jobgen plan`: what follows when a run can last longer than the time to the next
    # elapse (risk timeout-exceeds-interval), and what a run that hangs does to later ones
    # ("" when nothing more than the hung run itself).
    overrun_consequence: str
    hung_run_consequence: str
    # Each trigger records a request (`jobgen enqueue`) and a drainer unit runs them one at
    # a time under the lock (`jobgen drain`); the job gets a NAME-drain.service beside it.
    queues: bool = False


OVERLAP: dict[str, OverlapPolicy] = {
    p.name: p
    for p in (
        OverlapPolicy(SKIP, locks=True, waits=False, conflict_outcome=outcomes.SKIPPED, defers_overrun=True, every_from_end=True,
                      overrun_consequence="runs that last that long make the following elapses be skipped every time",
                      hung_run_consequence="every later run is skipped until it ends"),
        OverlapPolicy(WAIT, locks=True, waits=True, conflict_outcome=outcomes.WAIT_EXPIRED, defers_overrun=False, every_from_end=False,
                      overrun_consequence="runs queue behind each other and pile up; each waits up to wait_timeout, then gives up (wait-expired)",
                      hung_run_consequence=""),
        # No lock, so no conflict exit: a 75 from the command itself is the command's own failure.
        OverlapPolicy(ALLOW, locks=False, waits=False, conflict_outcome=outcomes.FAILED, defers_overrun=False, every_from_end=False,
                      overrun_consequence="runs overlap, with no lock, as many at once as elapses fall inside one run",
                      hung_run_consequence=""),
        # A conflict is a second drainer finding the lock held: the first one drains for both.
        OverlapPolicy(QUEUE, locks=True, waits=False, conflict_outcome=outcomes.SKIPPED, defers_overrun=False, every_from_end=False, queues=True,
                      overrun_consequence="requests arrive faster than the drainer runs them: the queue grows to max_pending, "
                                          "then triggers are handled by on_full (reject or coalesce)",
                      hung_run_consequence="requests wait in the queue until it ends"),
    )
}
DEFAULT_OVERLAP = SKIP

# `jobgen run`'s exit status when TimeoutStartSec= ran out and the job was stopped:
# timeout(1)'s, so a caller tells it from the job's own failure.
TIMEOUT_EXIT = 124


class LockScope(NamedTuple):
    """Who a lock keeps out, and what the unit needs for it (README "Overlap and lock scope")."""

    name: str
    # What stands in front of the command: "none" (systemd's own one-instance-per-unit rule),
    # "flock" (flock(1) on a host lock file), "holder" (`jobgen lock` on a lock server).
    wrapper: str
    can_wait: bool  # a run can wait for the lock (systemd never queues a second start of a unit)
    lock_file: bool  # a lock file on the host, created by tmpfiles.d; `lock.path` may name it
    server: bool  # a lock server: lock.backend and an explicit lock.name are required
    # SuccessExitStatus=75: a conflict is an outcome (skipped / wait-expired), not a failure.
    conflict_is_success: bool
    # KillMode= for the service: the holder forwards SIGTERM to the command itself, so
    # systemd signals the holder only, and SIGKILLs everything at the end (systemd.kill(5)).
    kill_mode: str | None
    # `jobgen plan`: what keeps a second timer/systemctl start out ({identity}: the lock's
    # identity), whether `jobgen run` outside the unit is covered, and whether the same
    # unit on another host is.
    guard: str
    covers_manual_run: bool
    covers_other_hosts: bool


SCOPES: dict[str, LockScope] = {
    s.name: s
    for s in (
        LockScope(UNIT, wrapper="none", can_wait=False, lock_file=False, server=False, conflict_is_success=False, kill_mode=None,
                  guard="systemd never starts a second instance of an active unit", covers_manual_run=False, covers_other_hosts=False),
        LockScope(HOST, wrapper="flock", can_wait=True, lock_file=True, server=False, conflict_is_success=True, kill_mode=None,
                  guard="{identity}", covers_manual_run=True, covers_other_hosts=False),
        LockScope(CLUSTER, wrapper="holder", can_wait=True, lock_file=False, server=True, conflict_is_success=True, kill_mode="mixed",
                  guard="{identity}", covers_manual_run=True, covers_other_hosts=True),
    )
}
DEFAULT_SCOPE = HOST
