"""Outcome words: the JOBGEN_OUTCOME field of jobgen's journal lines, in one place.

The reporter of every job unit (compiler/plan.py REPORTER) writes one of RUN per run;
`jobgen status` (host/status.py) counts them in this order. The queue commands
(runtime/queue/) write the QUEUE words per request. A word is defined here once and
imported wherever it is written, matched or counted.
"""

SUCCESS, FAILED, TIMEOUT, DEFERRED = "success", "failed", "timeout", "deferred"
# An orderly stop (`systemctl stop`, a shutdown) ended the run: systemd's stop signal
# killed it (systemd.kill(5) KillSignal=, SIGTERM by default), not the job's own failure.
# A queued request interrupted this way goes back to pending without spending an attempt.
STOPPED = "stopped"
# A lock conflict's words come from the overlap policy (contract/policies.py OVERLAP).
SKIPPED, WAIT_EXPIRED = "skipped", "wait-expired"

# What the reporter can write, in the order `jobgen status` lists them.
RUN = (SUCCESS, FAILED, TIMEOUT, SKIPPED, WAIT_EXPIRED, DEFERRED, STOPPED)

# A run's word from systemd's account of it ($SERVICE_RESULT/$EXIT_CODE/$EXIT_STATUS,
# systemd.exec(5)), first match wins, '*' matches anything, no match is FAILED. The unit's
# reporter (compiler/plan.REPORTER) is a shell `case` made from these rows and `jobgen run`
# (runtime/run.outcome) reads them too. A lock conflict (success/exited/75: SuccessExitStatus=
# counts it) is the policy's conflict_outcome, tested before these rows.
BY_RESULT: tuple[tuple[tuple[str, str, str], str], ...] = (
    (("exec-condition", "*", "*"), DEFERRED),  # the overrun check deferred the activation
    (("success", "*", "*"), SUCCESS),
    (("timeout", "*", "*"), TIMEOUT),  # TimeoutStartSec= ran out, or a stop needed SIGKILL
    # An orderly stop (`systemctl stop`, a shutdown) sends KillSignal= (SIGTERM for jobs,
    # systemd.kill(5)); a oneshot killed by it ends 'signal', status TERM (seen on 252, 257).
    (("signal", "killed", "TERM"), STOPPED),
)


def by_result(result: str, exit_code: str, exit_status: str) -> str:
    """The BY_RESULT row that matches, as the reporter's `case` picks it."""
    for pattern, word in BY_RESULT:
        if all(p in ("*", v) for p, v in zip(pattern, (result, exit_code, exit_status))):
            return word
    return FAILED

# The queue commands' words (README "overlap: queue").
SET_ASIDE, REJECTED = "set-aside", "rejected"
ENQUEUED, COALESCED, STARTED, DONE, RETRY = "enqueued", "coalesced", "started", "done", "retry"
RECOVERED, RETRIED, DROPPED = "recovered", "retried", "dropped"
QUEUE: dict[str, str] = {
    ENQUEUED: "a request was recorded",
    COALESCED: "the queue was full and an equal request was already pending",
    REJECTED: "the queue was full or the request could not be written: not recorded",
    STARTED: "a drainer started a request (its attempt is counted first)",
    DONE: "the request's command exited 0: removed",
    RETRY: "the command failed: the request stays first in line for the next drain",
    FAILED: "the command failed for the max_attempts-th time: moved to failed/",
    TIMEOUT: "the request ran past the job's timeout and was stopped",
    RECOVERED: "a drainer found a request a killed drainer had left running",
    STOPPED: "the drainer was stopped while the request ran: back to pending, attempt not counted",
    SET_ASIDE: "a spool file that is not a complete request was moved aside (never run)",
    RETRIED: "an operator moved a failed request back to pending",
    DROPPED: "an operator removed a request",
}
# The queue words in the order `jobgen status` counts them (a queue event is never a run).
QUEUE_EVENTS = tuple(QUEUE)

# Which words a job's service writes to the journal (compiler/plan.Plan.journal_units,
# read by host/status.py): RUN words (the reporter's unit) or QUEUE words (enqueuer, drainer).
RUN_UNIT, QUEUE_UNIT = "run", "queue"
