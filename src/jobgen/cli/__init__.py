"""The command line: the only package that prints or exits.

``main`` is the console script. ``jobgen lock`` runs in front of every cluster-scope job,
so it is dispatched before typer, jinja2 or the compiler are imported, and so is a render
line typer has parsed before (recall.py); every other
command lives in its own module here and is registered on one typer app by
``COMMANDS`` (answer.py), where ``lock`` has an entry too so that `jobgen --help` lists it. A command module parses options, calls the pure core or the host
layer, and turns what comes back into output and an exit code (exits.py).
"""

from __future__ import annotations

import errno
import os
import sys


# Runtime verbs the units call on every trigger: started without typer or the compiler.
# `enqueue`/`queue` with a manifest (what an operator types) go to the typer command.
RUNTIME_QUEUE_VERBS = ("enqueue", "drain", "queue")


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:
        # Answered before typer and the compiler are imported (a version check in a pipeline
        # or a package's postinst pays the interpreter's start-up only); the same line as
        # the typer app's --version.
        from jobgen import __version__

        sys.exit(_product(f"jobgen {__version__}\n"))
    if argv[:1] == ["lock"]:
        from jobgen.runtime import lock

        code = lock.main(argv[1:])
        _leave(code, lock.ended_by())
    if argv[:1] and argv[0] in RUNTIME_QUEUE_VERBS and (argv[0] == "drain" or _store_form(argv[1:])):
        from jobgen.runtime.queue import command

        try:
            result = command.main(argv[0], argv[1:])
        except KeyboardInterrupt:
            # Ctrl-C (an enqueue waiting for another one's lock, a long listing): the
            # operator's choice, said as the other commands say it. Not "not recorded": the
            # request may have been renamed into pending/ just before.
            from jobgen.cli.exits import EXIT_INTERRUPTED

            print(f"jobgen {argv[0]}: interrupted", file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        from jobgen.cli.exits import failure_document, json_asked, judged

        if result.code != 0 and not result.out and json_asked(argv):
            # --format json answers every outcome on stdout, as the typer commands' does.
            import json

            error = result.err[-1].split(": ", 1)[-1] if result.err else ""
            result.out = [json.dumps(failure_document(error, result.code), indent=2, sort_keys=True)]
        lost = _say(sys.stdout, result.out)
        _say(sys.stderr, result.err)
        sys.exit(judged(lost, result.code, result.out_is_product))
    from jobgen.cli import recall

    # The same render line as an earlier one: its parse recalled, typer not imported.
    if recall.usable(argv) and (code := recall.run(argv)) is not None:
        sys.exit(code)
    try:
        from jobgen.cli.app import run_process
    except ModuleNotFoundError as exc:
        if exc.name != "typer":
            raise
        # Debian's package of jobgen has no typer (Debian's is older than the floor):
        # what runs without it is dispatched above, the rest says what is missing.
        from jobgen.cli.exits import EXIT_INVALID

        print(NO_TYPER, file=sys.stderr)
        sys.exit(EXIT_INVALID)

    sys.exit(run_process(argv))


def _say(stream, lines: list[str]) -> OSError | None:
    """Write a runtime verb's lines, with no traceback whatever happens to the stream;
    what could not be written is returned for exits.judged (None: all of it went)."""
    if stream is None:  # the caller closed it (`>&-`): lost as a write to it would be
        return OSError(errno.EBADF, os.strerror(errno.EBADF)) if lines else None
    try:
        for line in lines:
            print(line, file=stream)
        stream.flush()
    except (OSError, ValueError) as exc:
        from jobgen.contract.oneline import silence

        silence(stream)  # what is still buffered would fail again when the interpreter exits
        return exc if isinstance(exc, OSError) else OSError(errno.EBADF, os.strerror(errno.EBADF))
    return None


def _product(text: str) -> int:
    """Write a command's only product, judged as every command's output is (exits.judged),
    with no traceback."""
    data = text.encode()
    try:
        while data:
            data = data[os.write(1, data):]
    except OSError as exc:
        from jobgen.cli.exits import judged

        return judged(exc, 0, True)
    return 0


def _leave(code: int, signum: int | None) -> None:
    """End `jobgen lock` at once, by `signum` when the stop that ended its command should
    end it too (lock.ended_by), else with `code`. At once (os._exit): the lock is released
    and the command reaped; what may remain is a daemon thread abandoned inside a client
    call (backends.bounded, a stop signal during --wait), and interpreter shutdown with such
    a thread mid-call can crash (seen: SIGSEGV on a SIGTERM while waiting on MariaDB)."""
    import signal

    for stream in (sys.stdout, sys.stderr):
        # None when the caller closed it (`2>&-`): the exit code is then the only word, and
        # must still be the outcome's, not a crash's 1. A broken pipe loses only the text.
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    if signum is not None:
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        os.kill(os.getpid(), signum)
    os._exit(code)


NO_TYPER = (
    "jobgen: error: this command needs typer >= 0.18, which is not installed; without it only "
    "jobgen-generator, `jobgen lock`, `jobgen drain`, `jobgen enqueue|queue --spool|--backend` and "
    "`jobgen --version` work (install jobgen with pipx for every command: README, Install)"
)


def _store_form(args: list[str]) -> bool:
    """`jobgen enqueue --spool DIR ...` (the units' form) rather than `enqueue MANIFEST JOB`."""
    options = args[: args.index("--")] if "--" in args else args
    return any(a in ("--spool", "--backend") or a.startswith(("--spool=", "--backend=")) for a in options)
