"""The queue contract (`overlap: queue`): what `jobgen check` accepts for `queue:` and what
`jobgen enqueue|drain|queue` do with it and answer, in one place."""

# queue.on_full: what a trigger does when max_pending requests are waiting.
ON_FULL = ("reject", "coalesce")

# Exit codes of the queue commands (README "Exit codes"). Not 73 (render's "cannot write")
# nor 75 (a lock conflict, which units count as success): a rejected request is a failure
# the unit must show.
EXIT_FULL = 74  # enqueue: the queue is full; the request was not recorded
EXIT_NO_SUCH = 65  # EX_DATAERR: queue --retry/--drop named no such request
EXIT_SPOOL = 71  # EX_OSERR: the spool folder is missing or not the job user's
