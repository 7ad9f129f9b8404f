"""Outcome words: what a job's journal lines say happened (README "What a run logs",
"overlap: queue"), in one place, so the reporter, the queue commands and `jobgen status`
cannot disagree on a word.

Two vocabularies, kept apart on purpose: a run's outcome (one line per activation of the
job's service, written by the reporter, compiler/plan.py REPORTER) and a queue event (a
request recorded, run or put back by `jobgen enqueue|drain`, runtime/queue/). "failed" and
"timeout" exist in both with different subjects (a run; one request), so a reader must
know which unit a line came from before it reads the word.
"""

# JOBGEN_OUTCOME of the reporter, in the order `jobgen status` lists them. skipped and
# wait-expired are the lock conflict outcomes of policies.OVERLAP; deferred is an
# activation the DeferReactivation emulation turned away (ExecCondition=).
RUN_OUTCOMES = ("success", "failed", "timeout", "skipped", "wait-expired", "deferred")

# JOBGEN_OUTCOME of `jobgen enqueue` (enqueued, coalesced, rejected) and `jobgen drain`
# (recovered, started, timeout, then done, retry or failed per request).
QUEUE_EVENTS = ("enqueued", "coalesced", "rejected", "recovered", "started", "timeout", "done", "retry", "failed")
