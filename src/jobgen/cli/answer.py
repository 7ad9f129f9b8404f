"""What every command says and how it ends, without typer: the one outcome path.

A command's answer is lines on stderr (``err``), its product on stdout (``echo``) and, with
``--format json``, one JSON document on stdout (``emit_json``), whatever the outcome.
``ended`` turns every outcome of a command into one exit code and that answer: the typer
app's dispatch (app.run) and a render recalled without typer (recall.py) both end there,
and ``run_process`` judges what could not be printed the same way for both.

No typer here: the commands' own functions and this module are what a render recalled by
recall.py imports (bench/results.md: typer's import was 60% of an unchanged render).
"""

from __future__ import annotations

import errno
import gc
import io
import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Callable, Optional

from jobgen.contract.oneline import one_line, to_stderr
from jobgen.cli.exits import EXIT_DRIFT, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OK, JSON_FORMAT, STDOUT_PRODUCT, failure_document, json_asked, judged

# command module (jobgen.cli.<name>) in the order `jobgen --help` lists them
COMMANDS = ("render", "check", "run", "apply", "queue", "plan", "status", "import_crontab", "schema", "lock", "directives", "completion")
# A command whose name is not its module's (every other command is the module's name).
OTHER_NAMES = {"import-crontab": "import_crontab", "enqueue": "queue"}


class Format(str, Enum):
    text = "text"
    json = "json"


class CliError(Exception):
    """An outcome that ends the command: one line, one exit code (``ended`` prints it)."""

    def __init__(self, message: str, code: int = EXIT_INVALID):
        self.message, self.code = message, code
        super().__init__(message)


class Ended(Exception):
    """The command has said everything (its problems, its summary): end with ``code``."""

    def __init__(self, code: int):
        self.code = code
        super().__init__(code)


class _Said:
    """What this process has answered so far, for ``ended``'s --format json rule: every
    outcome is one JSON document on stdout, also one a command ended with only a line on
    stderr (an unreachable systemd, an unknown --job)."""

    json = False  # a JSON document went to stdout (emit_json, or a child given --format json)
    error = ""  # the last `jobgen: error: ...` line, without its prefix


_ERROR = "jobgen: error: "


def err(line: str) -> None:
    """One line on stderr, whatever it quotes: a value with a line break (`--job $'a\nb'`,
    a file name) cannot start a line that reads like jobgen's own (contract/oneline.py).
    A stderr that is closed (`2>&-`) or cannot be written loses the line, nothing else:
    the exit code still says the outcome."""
    line = one_line(line)
    if line.startswith(_ERROR):
        _Said.error = line[len(_ERROR):]
    to_stderr(line + "\n")


def echo(text: str, nl: bool = True) -> None:
    """``text`` on stdout, flushed (so it keeps its order with what goes to stderr)."""
    sys.stdout.write(text + "\n" if nl else text)
    sys.stdout.flush()


def emit_json(doc: dict) -> None:
    _Said.json = True
    echo(json.dumps({"format": JSON_FORMAT, **doc}, indent=2, sort_keys=True))


def json_answered() -> None:
    """A child given --format json wrote the answer on this stdout (`jobgen queue MANIFEST JOB`)."""
    _Said.json = True


def command_module(argv: list[str]) -> str | None:
    """The module of the command ``argv`` names, or None (no command, --help, a typo).

    The root has no option that takes a value (--version, --help), so the first word that
    is not an option is the command."""
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is None:
        return None
    name = OTHER_NAMES.get(word, word)
    return name if name in COMMANDS else None


def recovery_notes(folder: Path, rec, dry: bool, what: str) -> list[str]:
    """What write.locked found left in ``folder`` by an earlier ``what`` (render, apply)
    that did not finish: one line each, for `jobgen: note:`."""
    says = []
    if rec.pending:
        says.append(f"{folder}: {_a(what)} was interrupted after its commit point; the next {what} completes it")
    if rec.completed:
        says.append(f"{folder}: completed an interrupted {what} ({rec.completed} files)")
    if rec.stale:
        says.append(f"{folder}: {'found' if dry else 'removed'} {rec.stale} temporary files of {_a(what)} killed before its commit point")
    return says


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def holder_problem(holder: str) -> str | None:
    """Why ``holder`` (--holder) cannot be what the units exec, or None: systemd runs an
    Exec*= command by its absolute path (systemd.service(5), "Command lines"), and a path
    with a line break or another control character names no jobgen an operator installed."""
    from jobgen.compiler.escape import search_control

    if (m := search_control(holder)) is not None:
        return f"--holder {holder}: holds the control character U+{ord(m.group()):04X}; give the path of jobgen on the target hosts"
    if not holder.startswith("/"):
        return f"--holder {holder}: the units run it by its path, which must be absolute (e.g. /usr/bin/jobgen)"
    return None


def check_holder(holder: str) -> None:
    """CliError when ``holder`` cannot be what the units exec (holder_problem)."""
    if (why := holder_problem(holder)) is not None:
        raise CliError(why)


def resolve_target(systemd: Optional[str], preset: Optional[str]):
    # `is not None`, not truth: --target '' (an unset variable) is a value, refused below
    # by parse_target, never taken for no option and the default target.
    if systemd is not None and preset is not None:
        raise CliError("give --systemd or --target, not both")
    text = preset if preset is not None else systemd
    if text is None:
        return None
    from jobgen.compiler.target import parse_systemctl_version, parse_target
    from jobgen.runtime import spawn

    if text == "auto":
        import subprocess

        try:
            out = spawn.run(["systemctl", "--version"], capture_output=True, text=True, timeout=10).stdout
            text = str(parse_systemctl_version(out))
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise CliError(f"--systemd auto: cannot read `systemctl --version`: {exc}") from None
    try:
        return parse_target(text)
    except ValueError as exc:
        raise CliError(f"--{'target' if preset is not None else 'systemd'} {text or repr('')}: {exc}") from None


def build_all(manifests: list[Path], target, holder: str, fmt: Format, strict: bool = False, data: dict[Path, bytes] | None = None, more=None,
              errors=None):
    """Every manifest through the pure core; all problems of all manifests, then exit 2.
    With ``strict`` a warning is a problem too. ``data``: manifests already read.
    ``more``: result -> result with the command's own findings added (warnings about the
    host), counted by --strict like the compiler's. ``errors``: result -> the command's own
    errors about a manifest that compiled (what its output options cannot hold)."""
    from jobgen.compiler import pipeline
    from jobgen.compiler.diagnostics import WARNING, ManifestError

    results, problems = [], []
    for path in manifests:
        try:
            results.append(pipeline.build(str(path), target, holder, data=(data or {}).get(path)))
        except ManifestError as exc:
            problems += exc.diagnostics
            continue
        if errors is not None:
            problems += errors(results[-1])
    if more is not None:
        results = [more(r) for r in results]
    warnings = [d for r in results for d in r.diagnostics if d.severity == WARNING] if strict else []
    if problems or warnings:
        shown = sorted(problems + warnings) if warnings else problems
        n = sum(1 for d in problems if d.severity == "error")
        if n:
            summary = f"jobgen: {n} error{'s' if n != 1 else ''}; nothing written"
        else:
            summary = f"jobgen: {len(warnings)} warning{'s' if len(warnings) != 1 else ''} with --strict; nothing written"
        if fmt == Format.json:
            emit_json({"ok": False, "diagnostics": [d.as_json() for d in shown], "error": summary.removeprefix("jobgen: "), "exit_code": EXIT_INVALID})
        else:
            for d in shown:
                err(str(d))
        err(summary)
        raise Ended(EXIT_INVALID)
    return results


def fewer_collections() -> None:
    """A compile allocates some ten objects per YAML node and frees almost none of them
    before it ends; at CPython's default threshold (700 allocations) the cycle collector
    runs hundreds of times over objects that are all still alive, a fifth of a 1,000-job
    render. Collect later, and never again over what importing made (gc.freeze); the
    collector stays on."""
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)


# --------------------------------------------------------------------------- the outcome


def ended(argv: list[str], call: Callable[[], int | None]) -> int:
    """Run a command (``call``, its exit code); turn every outcome that is not a clean exit
    into one answer: a CliError's line, the operator's Ctrl-C, a bug's one line (never a
    traceback), and with --format json always one JSON document on stdout."""
    as_json = json_asked(argv)
    _Said.json, _Said.error = False, ""  # this call's answer, not an earlier one's in the same process
    try:
        code = call()
    except CliError as exc:
        err(f"jobgen: error: {exc.message}")
        if as_json:
            emit_json(failure_document(exc.message, exc.code))
        return exc.code
    except Ended as exc:
        code = exc.code
    except KeyboardInterrupt:
        # Ctrl-C: the operator's choice, not a failure
        err("jobgen: interrupted")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one place every unforeseen failure ends
        return internal_error(exc, as_json)
    code = code if isinstance(code, int) else EXIT_OK
    if as_json and code not in (EXIT_OK, EXIT_DRIFT) and not _Said.json:
        emit_json(failure_document(_Said.error, code))
    return code


def internal_error(exc: BaseException, as_json: bool) -> int:
    """A failure no command foresaw is a bug: one line naming it and a reserved exit code,
    never a traceback an operator must read (and a pipeline must parse). JOBGEN_DEBUG=1
    shows the traceback for the bug report."""
    message = f"internal error in jobgen (please report it): {type(exc).__name__}: {exc}"
    if os.environ.get("JOBGEN_DEBUG") == "1":
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    err(f"jobgen: {message}")
    if as_json:
        emit_json(failure_document(message, EXIT_INTERNAL))
    return EXIT_INTERNAL


# --------------------------------------------------------------------------- standard output


def _given(option: str, words: list[str]) -> bool:
    short = len(option) == 2
    return any(w == option or w.startswith(f"{option}=") or (short and w.startswith(option) and not w.startswith("--")) for w in words)


def _product_is_stdout(argv: list[str]) -> bool:
    default, flips = STDOUT_PRODUCT.get(command_module(argv), (False, ()))
    words = argv[: argv.index("--")] if "--" in argv else argv
    return default != any(_given(o, words) for o in flips)


class _Stdout(io.RawIOBase):
    """File descriptor 1 under what a command prints: a write that fails (the reader left,
    `| head -1`; a full disk; a closed descriptor) loses the text, never the outcome. The
    first failure is kept for ``run_process`` to judge, and nothing is written after it."""

    def __init__(self, fd: int | None):
        self.fd, self.failure = fd, None

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.fd is not None and os.isatty(self.fd)

    def fileno(self) -> int:
        if self.fd is None:
            raise io.UnsupportedOperation("standard output is closed")
        return self.fd

    def write(self, data) -> int:
        if self.failure is None:
            try:
                if self.fd is None:
                    raise OSError(errno.EBADF, os.strerror(errno.EBADF))
                return os.write(self.fd, data)
            except OSError as exc:
                self.failure = exc
        return len(data)


def _guard_stdout() -> _Stdout:
    old = sys.stdout
    try:
        fd = old.fileno() if old is not None else None
    except (OSError, ValueError):
        fd = None
    raw = _Stdout(fd)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding=getattr(old, "encoding", None) or "utf-8",
                                  errors=getattr(old, "errors", None) or "strict", line_buffering=bool(getattr(old, "line_buffering", False)))
    return raw


def run_process(argv: list[str], run: Callable[[list[str]], int]) -> int:
    """``run(argv)`` on the process's own standard output: what could not be printed is
    judged (exits.judged) the same way for every command, however it was dispatched."""
    raw = _guard_stdout()
    code = run(argv)
    sys.stdout.flush()  # cannot raise: _Stdout keeps the failure instead
    return judged(raw.failure, code, _product_is_stdout(argv))
