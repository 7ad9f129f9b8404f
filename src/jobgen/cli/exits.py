"""jobgen's own exit codes (README "Exit codes"); a job's or a lock holder's codes pass through.

``EXIT_CODES`` is the table `jobgen --help` prints and the README repeats.
"""

EXIT_OK = 0
EXIT_DRIFT = 1  # render --check: something would change
EXIT_INVALID = 2  # invalid manifest, bad usage or bad target; with --strict, a warning
EXIT_PARTIAL = 3  # apply: applied, but a unit failed to start or stop (named)
EXIT_REFUSED = 4  # apply: not root, no running systemd, or a file jobgen did not write; nothing changed
EXIT_OUTPUT = 73  # the output folder cannot be written (sysexits.h EX_CANTCREAT); it is left as it was

from jobgen.contract.queue import EXIT_FULL, EXIT_NO_SUCH, EXIT_SPOOL  # noqa: E402
from jobgen.contract.policies import TIMEOUT_EXIT  # noqa: E402

EXIT_CODES = (
    (EXIT_OK, "ok"),
    (EXIT_DRIFT, "render --check: something would change"),
    (EXIT_INVALID, "invalid manifest, usage or target (with --strict: a warning); nothing written"),
    (EXIT_PARTIAL, "apply: applied, but a unit failed to start or stop (named)"),
    (EXIT_REFUSED, "apply: not root, no running systemd, or a file jobgen did not write; nothing changed"),
    (EXIT_OUTPUT, "render: the output folder cannot be written; it is left as it was"),
    (EXIT_FULL, "enqueue: the queue is full; the request was not recorded"),
    (EXIT_NO_SUCH, "queue --retry/--drop: no such request"),
    (EXIT_SPOOL, "enqueue/drain/queue: the spool folder cannot be used"),
    (75, "run/lock: another run holds the lock (EX_TEMPFAIL)"),
    (TIMEOUT_EXIT, "run: the job ran past its timeout and was stopped"),
    (64, "lock: usage; 69, 76, 77, 78: see README 'Cluster locks'"),
)
