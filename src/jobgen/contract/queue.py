"""The queue contract (`overlap: queue`): what `jobgen check` accepts for `queue:` and what
`jobgen enqueue|drain|queue` do with it and answer, in one place."""

from jobgen.contract.locks import BOOKKEEPING, NAMESPACE

# queue.on_full: what a trigger does when max_pending requests are waiting: refuse it, or
# fold it into an equal pending request. The first is the default.
REJECT, COALESCE = "reject", "coalesce"
ON_FULL = (REJECT, COALESCE)

# Exit codes of the queue commands (README "Exit codes"). Not 73 (render's "cannot write")
# nor 75 (a lock conflict, which units count as success): a rejected request is a failure
# the unit must show.
# What asked for a request, as `enqueue --by` records it in the journal: the job's own timer unit.
BY_UNIT = "unit"
EXIT_FULL = 74  # enqueue: the queue is full; the request was not recorded
EXIT_NO_SUCH = 65  # EX_DATAERR: queue --retry/--drop named no such request
EXIT_SPOOL = 71  # EX_OSERR: the spool folder is missing or not the job user's
# drain: a request failed (retry or failed) or a stop ended the drain: work is left, and the
# drain unit must show it (OnFailure=, `systemctl status`).
EXIT_LEFT_WORK = 1

# The host-scope spool (runtime/queue/spool.py; tmpfiles.d lines from compiler/plan.py): one
# folder per job under SPOOL_DIR, on disk (/var/lib, not /run) so that a request reported as
# enqueued survives a crash or a reboot, with these sub-folders.
SPOOL_DIR = "/var/lib/jobgen/queue"
TMP, PENDING, RUNNING, FAILED = "tmp", "pending", "running", "failed"
# A file in the spool that is not a request jobgen wrote completely (truncated, not JSON, the
# wrong shape, a name that is not its id, a symlink, another owner, too big) is moved here,
# never read again and never run; `jobgen queue` lists it, the operator removes it.
SET_ASIDE = "malformed"
SPOOL_FOLDERS = (TMP, PENDING, RUNNING, FAILED, SET_ASIDE)
# A request file is JSON of its id, arguments and counters; past this size it is set aside
# unread, and `enqueue` refuses arguments that would make one this big.
MAX_REQUEST_BYTES = 1 << 20

# The cluster queue's keys on Redis (runtime/queue/cluster.py), under `jobgen:#queue:NAME:`:
# '#' is in no lock name (contract.locks.BOOKKEEPING), so no lock's lease or fencing counter
# is one of a queue's keys. Releases before kept them under `jobgen:queue:NAME:`, the lease
# keys of locks named `queue:...` too (the lock `queue:x:seq` was queue x's counter); the
# first drain after an upgrade moves what it finds there (RedisQueue.recover).
REDIS_QUEUE_PREFIX = "queue:"
REDIS_QUEUE_SEQ, REDIS_QUEUE_REQ = "seq", "req:"  # the id counter; one hash per request id


def redis_queue_keys(name: str, legacy: bool = False) -> dict[str, str]:
    """The Redis keys of queue `name`: a list per state, the id counter ("seq") and the
    prefix of the request hashes ("req"); legacy: where releases before kept them."""
    base = NAMESPACE + ("" if legacy else BOOKKEEPING) + REDIS_QUEUE_PREFIX + name + ":"
    keys = {state: base + state for state in (PENDING, RUNNING, FAILED)}
    return keys | {"seq": base + REDIS_QUEUE_SEQ, "req": base + REDIS_QUEUE_REQ}
