"""jobgen's own exit codes (README "Exit codes"); a job's or a lock holder's codes pass through.

``EXIT_CODES`` is the table `jobgen --help` prints and the README repeats.
"""

from jobgen.contract.locks import CONFLICT_EXIT, EXIT as LOCK_EXIT
from jobgen.contract.policies import TIMEOUT_EXIT
from jobgen.contract.queue import EXIT_FULL, EXIT_NO_SUCH, EXIT_SPOOL

EXIT_OK = 0
EXIT_DRIFT = 1  # render --check: something would change
EXIT_INVALID = 2  # invalid manifest, bad usage (status: a --since journalctl cannot read) or bad target; with --strict, a warning
EXIT_PARTIAL = 3  # apply: applied, but a unit failed to start or stop (named)
EXIT_REFUSED = 4  # apply: not root, no running systemd, or a file jobgen did not write; nothing changed. status: systemd or the journal cannot be reached
EXIT_OUTPUT = 73  # the output folder (apply: the unit files; status: the -o file; plan, schema...: standard output) cannot be written (sysexits.h EX_CANTCREAT); it is left as it was

# A failure jobgen did not foresee (a bug): one line and the code `jobgen lock` gives its
# own (sysexits.h EX_SOFTWARE).
EXIT_INTERNAL = LOCK_EXIT["internal-error"][0]
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C), as a shell reports it: 128 + 2

# What each exit code of `jobgen apply` means, in its --format json answer ("outcome"): the
# Ansible module and pipelines relay these words rather than keep a table of their own.
APPLY_OUTCOMES = {
    EXIT_OK: "ok",
    EXIT_DRIFT: "--check: something would change",
    EXIT_INVALID: "invalid manifest, usage or target (with --strict: a warning); nothing written",
    EXIT_PARTIAL: "applied, but a unit failed to start or stop (named)",
    EXIT_REFUSED: "not root, no running systemd, or a file jobgen did not write; nothing changed",
    EXIT_OUTPUT: "the unit files cannot be written, none is changed",
}

EXIT_CODES = (
    (EXIT_OK, "ok"),
    (EXIT_DRIFT, "render --check: something would change"),
    (EXIT_INVALID, APPLY_OUTCOMES[EXIT_INVALID]),
    (EXIT_PARTIAL, f"apply: {APPLY_OUTCOMES[EXIT_PARTIAL]}"),
    (EXIT_REFUSED, f"apply: {APPLY_OUTCOMES[EXIT_REFUSED]}; status: systemd or the journal cannot be reached"),
    (EXIT_OUTPUT, "render, import-crontab: the output folder cannot be written; it is left as it was; "
                  f"apply: {APPLY_OUTCOMES[EXIT_OUTPUT]}; status: the -o file cannot be written; "
                  "plan, status, schema, directives, render --diff: standard output cannot be written"),
    (EXIT_INTERNAL, "internal error in jobgen (a bug: the line says what failed; JOBGEN_DEBUG=1 shows where)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_FULL, "enqueue: the queue is full; the request was not recorded"),
    (EXIT_NO_SUCH, "queue --retry/--drop: no such request"),
    (EXIT_SPOOL, "enqueue/drain/queue: the spool folder cannot be used"),
    (CONFLICT_EXIT, "run/lock: another run holds the lock (EX_TEMPFAIL)"),
    (TIMEOUT_EXIT, "run: the job ran past its timeout and was stopped"),
    (LOCK_EXIT["usage"][0], "lock: usage; 69, 76, 77, 78: see README 'Cluster locks'"),
)
