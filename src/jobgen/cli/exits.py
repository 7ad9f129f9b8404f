"""jobgen's own exit codes (README "Exit codes"); a job's or a lock holder's codes pass through.

``EXIT_CODES`` is the table `jobgen --help` prints and the README repeats.
"""

import errno
import sys

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

# Whether a command's product is what it prints, so that it cannot have succeeded when
# standard output could not be written (a full disk, a closed descriptor): its module ->
# (the answer without options, the options that turn it the other way). Such a command ends
# EXIT_OUTPUT; any other (render -o, apply, run: the product is on disk or on the host)
# keeps its own outcome code, and only the text is lost. `render --check` answers with its
# code, `render --diff` on stdout. A module not listed never has stdout for its product. `jobgen --version` is one
# too (cli/__init__.py answers it before any command module).
STDOUT_PRODUCT = {
    "render": (False, ("--diff",)),
    "status": (True, ("-o", "--output")),
    "import_crontab": (True, ("-o", "--output")),
    "plan": (True, ()),
    # The listing (runtime/queue/command.py Result.out_is_product, which judges the verbs'
    # output); --retry and --drop only confirm what they did.
    "queue": (True, ("--retry", "--drop")),
    "schema": (True, ()),
    "directives": (True, ()),
    "completion": (True, ()),
}


def _stdout_products() -> str:
    """STDOUT_PRODUCT as EXIT_CODES names it: "plan, schema, ..., render --diff"."""
    said = []
    for module, (default, flips) in STDOUT_PRODUCT.items():
        command = module.replace("_", "-")
        said.append(command if default else f"{command} {flips[0]}")
    return ", ".join(sorted(said, key=lambda c: (" " in c, c)) + ["--version"])


def output_lost(exc: OSError) -> str:
    """The one line for standard output that could not be written (EXIT_OUTPUT, or the
    command's own code when stdout was not its product)."""
    return f"jobgen: error: cannot write the output: {exc.strerror or exc}"


def judged(lost: OSError | None, code: int, product: bool) -> int:
    """The exit code once a command's standard output was written, for every command (the
    typer ones, the queue verbs, --version): its own, unless ``lost`` (the first write
    that failed) took its ``product``, which cannot then have succeeded (EXIT_OUTPUT). A
    reader that left (EPIPE, `| head -1`) had what it wanted: no word, the command's own
    code. Any other loss (a full disk, a closed descriptor) is one line on stderr, if
    stderr can take it."""
    if lost is None or lost.errno == errno.EPIPE:
        return code
    if sys.stderr is not None:
        try:
            print(output_lost(lost), file=sys.stderr)
        except (OSError, ValueError):
            pass
    return EXIT_OUTPUT if product and code == EXIT_OK else code


EXIT_CODES = (
    (EXIT_OK, "ok"),
    (EXIT_DRIFT, "render --check: something would change"),
    (EXIT_INVALID, APPLY_OUTCOMES[EXIT_INVALID]),
    (EXIT_PARTIAL, f"apply: {APPLY_OUTCOMES[EXIT_PARTIAL]}"),
    (EXIT_REFUSED, f"apply: {APPLY_OUTCOMES[EXIT_REFUSED]}; status: systemd or the journal cannot be reached"),
    (EXIT_OUTPUT, "render, import-crontab: the output folder cannot be written; it is left as it was; "
                  f"apply: {APPLY_OUTCOMES[EXIT_OUTPUT]}; status: the -o file cannot be written; "
                  f"{_stdout_products()}: standard output cannot be written"),
    (EXIT_INTERNAL, "internal error in jobgen (a bug: the line says what failed; JOBGEN_DEBUG=1 shows where)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_FULL, "enqueue: the queue is full; the request was not recorded"),
    (EXIT_NO_SUCH, "queue --retry/--drop: no such request"),
    (EXIT_SPOOL, "enqueue/drain/queue: the spool folder cannot be used"),
    (CONFLICT_EXIT, "run/lock: another run holds the lock (EX_TEMPFAIL)"),
    (TIMEOUT_EXIT, "run: the job ran past its timeout and was stopped"),
    (LOCK_EXIT["usage"][0], "lock: usage; 69, 76, 77, 78: see README 'Cluster locks'"),
)


# "format" in every JSON document jobgen prints; raised when a field changes meaning.
JSON_FORMAT = 1


def failure_document(error: str, code: int) -> dict:
    """The answer of `--format json` to an outcome that is not a success and that the
    command did not answer itself: what its stderr line says, or the table's meaning of
    the code. One shape for every command, the typer commands and the queue verbs alike."""
    return {"format": JSON_FORMAT, "ok": False, "error": error or meaning(code), "exit_code": code, "diagnostics": []}


def meaning(code: int) -> str:
    """EXIT_CODES' words for ``code`` ("exit N" for a code jobgen does not name)."""
    return next((text for c, text in EXIT_CODES if c == code), f"exit {code}")


def json_asked(argv: list[str]) -> bool:
    """Whether the command line asks for --format json. Not after `--`: there the words are
    a job's own (`jobgen run M JOB -- --format json`, `jobgen enqueue ... -- ARG...`)."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return "--format=json" in words or any(a == "--format" and b == "json" for a, b in zip(words, words[1:]))
