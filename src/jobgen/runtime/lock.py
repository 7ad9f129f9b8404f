"""`jobgen lock`: hold a cluster lock for exactly as long as a command runs.

    jobgen lock --backend URL --name NAME [--wait S] [--ttl S] [--grace S]
                [--password-file PATH] [--connect-timeout S] [--job JOB] -- COMMAND [ARG...]

Take the lock, start the command (same stdio; JOBGEN_LOCK_TOKEN in its environment when the
backend gives a fencing token), forward SIGTERM/SIGINT/SIGHUP to it, wait, release, and exit
with the command's status. The command never runs without the lock: every failure to take
it has its own exit code (contract.locks.EXIT) and one log line on stderr, which journald
records for a unit. This module prints nothing else and never calls sys.exit (jobgen/cli does).

The holder owns the whole process tree it starts (tree.py): the command runs in its own
process group, the holder is a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER) so every
orphaned descendant becomes its child, signals go to every descendant, and the lock is
released only after the last descendant is gone, so a `sh -c "step1; step2"` wrapper
cannot leave step1 running under a lock the next holder already has. A keeper process
(tree.Lifeline), which neither the holder's stop nor its death reaches, kills the tree if
the holder dies (even by SIGKILL) and, for a Redis lease, before the lease from the last
renewal runs out if no later renewal succeeded (a SIGSTOPped or hung holder).

Job control: Ctrl-Z (SIGTSTP, SIGTTIN, SIGTTOU) stops the command's processes, then the
holder; SIGCONT continues them, unless the Redis lease ran out meanwhile (another holder
may have the lock): then they are killed where they stand and the holder exits 76.

Signals during start-up: from main()'s first line on, SIGTERM/SIGINT/SIGHUP are recorded,
never lost: one that arrives before the lock is asked for ends the holder with 128+N and
the command never runs (the log line says "before acquiring"). Before main() runs (the
interpreter starting, ~50 ms) the kernel's default action applies: the process ends by
the signal, with nothing taken and nothing run.
"""

from __future__ import annotations

import argparse
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping

from jobgen.contract import locks
from jobgen.contract.oneline import one_line
from jobgen.runtime import backends, tree
from jobgen.runtime.backends import AuthFailed, ConfigError, LockError, ServerError, Unreachable

EXIT = locks.EXIT  # outcome -> (exit code, meaning): the lock contract owns the table
# Which LockError subclass becomes which outcome (most specific first).
ERROR_OUTCOME: tuple[tuple[type[LockError], str], ...] = (
    (ConfigError, "config-error"),
    (AuthFailed, "auth-failed"),
    (Unreachable, "unreachable"),
    (ServerError, "server-error"),
)

# Signals the holder passes on to the command (systemd stop, Ctrl-C, reload/hangup).
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

DEFAULTS = {"wait": 0.0, "ttl": 60.0, "grace": 10.0, "connect_timeout": 5.0}
MIN_TTL = 1.0  # renewal runs every ttl/3; below a second it would mostly measure latency



class _Log:
    """The holder's log: one line per event on stderr (journald records it for a unit),
    greppable: `jobgen-lock[<job>]: <event> key=value ...`. Not the logging module, whose
    import (traceback, string, ...) the holder would pay on every run for three calls."""

    def __init__(self) -> None:
        self.prefix = "jobgen-lock[-]: "
        # Re-entrant: a signal handler that logs runs in the main thread, maybe mid-line.
        self._lock = threading.RLock()

    def _emit(self, msg: str, args: tuple) -> None:
        line = f"{self.prefix}{msg % args if args else msg}\n"
        with self._lock:
            try:
                sys.stderr.write(line)
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):  # stderr closed or gone (None)
                pass

    def info(self, msg: str, *args) -> None:
        self._emit(msg, args)

    warning = error = info


log = _Log()


class UsageError(Exception):
    pass


class _HelpShown(Exception):
    pass


class _FixedWidth(argparse.HelpFormatter):
    """argparse makes a formatter for every add_argument (to check its metavar); the
    default one asks the terminal's width through shutil, whose import (bz2, lzma, zlib,
    fnmatch) every run would pay. Only --help needs the width: _Parser.format_help."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=80)


class _Parser(argparse.ArgumentParser):
    """argparse that reports instead of exiting: main() returns, jobgen.cli exits."""

    def format_help(self) -> str:
        self.formatter_class = argparse.HelpFormatter  # the terminal's width, for --help
        return super().format_help()

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None):  # type: ignore[override]
        if message:
            sys.stderr.write(message)
        raise _HelpShown()


def _seconds(minimum: float, inclusive: bool = True, maximum: float | None = None):
    def conv(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < minimum or (not inclusive and value == minimum):
            op = ">=" if inclusive else ">"
            raise argparse.ArgumentTypeError(f"{text!r}: must be {op} {minimum:g} seconds")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text!r}: must be at most {maximum:g} seconds")
        return value

    return conv


# --connect-timeout's rule, for the queue commands' cluster form too (runtime/queue/command.py).
# At most an hour: it bounds each round trip to the server, and the client libraries' socket
# timeouts overflow near 1e10 s (an internal error, exit 70, before the bound).
CONNECT_TIMEOUT = _seconds(0, inclusive=False, maximum=3600)


def _lock_name(text: str) -> str:
    if problem := locks.name_problem(locks.CLUSTER, text):
        raise argparse.ArgumentTypeError(problem)
    return text


def _parser() -> _Parser:
    p = _Parser(prog="jobgen lock", exit_on_error=False, formatter_class=_FixedWidth,
                usage="jobgen lock --backend URL --name NAME [options] -- COMMAND [ARG...]",
                description="Run COMMAND while holding a cluster lock.")
    p.add_argument("--backend", required=True, metavar="URL",
                   help="redis[s]://, mariadb://, mysql://, postgres[ql]://; ${VAR} is expanded "
                        "from the environment")
    p.add_argument("--name", required=True, type=_lock_name, help="lock identity")
    p.add_argument("--wait", type=_seconds(0), default=DEFAULTS["wait"], metavar="SECONDS",
                   help="wait up to this long for a held lock (0: do not wait)")
    p.add_argument("--ttl", type=_seconds(MIN_TTL), default=DEFAULTS["ttl"], metavar="SECONDS",
                   help="Redis lease length, renewed every ttl/3")
    p.add_argument("--grace", type=_seconds(0), default=DEFAULTS["grace"], metavar="SECONDS",
                   help="SIGTERM to SIGKILL delay after the lock is lost")
    p.add_argument("--password-file", metavar="PATH",
                   help="read the password from this file (${VAR} expanded)")
    p.add_argument("--connect-timeout", type=CONNECT_TIMEOUT,
                   default=DEFAULTS["connect_timeout"], metavar="SECONDS",
                   help="bound on each network call")
    p.add_argument("--job", help="job name for log lines (default: the lock name)")
    return p


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Options before `--`, the command after it (the command's own options stay its own)."""
    cut = argv.index("--") if "--" in argv else len(argv)
    options, command = argv[:cut], argv[cut + 1:]
    try:
        # Options first, so --help works without `--`; without `--`, a stray word is most
        # likely the command, and "missing --" is the useful message. One parser, one
        # pass: parse_args is parse_known_args plus the refusal of a stray word, and each
        # parser built costs argparse's gettext look-ups on every run.
        parser = _parser()
        if cut < len(argv):
            args = parser.parse_args(options)
        else:
            args, _ = parser.parse_known_args(options)
    except argparse.ArgumentError as e:
        raise UsageError(str(e)) from None
    if cut == len(argv):
        raise UsageError("missing `-- COMMAND [ARG...]`")
    if not command:
        raise UsageError("no command after `--`")
    return args, command


def _setup_logging(tag: str) -> None:
    # A --job given by hand may hold a line break: the journal must get one line per event.
    log.prefix = f"jobgen-lock[{one_line(tag)}]: "


def main(argv: list[str]) -> int:
    # First: a stop signal from here on is recorded, never lost and never fatal halfway.
    early = _EarlySignals()
    try:
        try:
            args, command = parse(argv)
        except _HelpShown:
            return 0
        except UsageError as e:
            _setup_logging("-")
            code = EXIT["usage"][0]
            log.error("usage-error %s exit=%d", e, code)
            return code
        _setup_logging(args.job or args.name)
        holder = Holder(args, command, os.environ)
        holder.pending = early.take_over(holder._on_signal)
        code = holder.run()
        _END_BY[:] = [holder.end_by] if holder.end_by else []
        return code
    finally:
        early.restore()


# The stop signal the holder ends by instead of an exit status (Holder.end_by).
_END_BY: list[int] = []


def ended_by() -> int | None:
    """The signal the holder process should end by instead of main()'s exit status: the
    stop signal that ended its command when the holder itself was stopped with it. A shell
    ends so; for jobgen it means systemd sees a stopped unit (`systemctl stop`, a shutdown;
    KillMode=mixed signals the holder only) as result 'signal', status TERM, which the
    unit's reporter logs as `stopped` (contract/outcomes.BY_RESULT), not as a failure
    with status 143."""
    return _END_BY[0] if _END_BY else None


class _EarlySignals:
    """Handlers installed before anything else: signals are queued until the Holder
    takes them over (then it sees them as pending), so start-up has one defined outcome."""

    def __init__(self) -> None:
        self.queue: list[int] = []
        self.saved = {s: signal.signal(s, self._record) for s in FORWARDED}

    def _record(self, signum: int, _frame) -> None:
        self.queue.append(signum)

    def take_over(self, handler) -> list[int]:
        for s in FORWARDED:
            signal.signal(s, handler)
        return self.queue

    def restore(self) -> None:
        for s, h in self.saved.items():
            signal.signal(s, h)


class _Interrupted(BaseException):  # not swallowed by any `except Exception`
    def __init__(self, signum: int) -> None:
        self.signum = signum


class _Child:
    def __init__(self, owned: tree.Tree) -> None:
        self.tree = owned
        self.exited = False  # waitid saw it exit; its pid is not reused until we reap it

    @property
    def proc(self) -> subprocess.Popen:
        return self.tree.proc


# Signals after which the command must be gone within --grace (a stop, not a reload).
STOPPING = (signal.SIGTERM, signal.SIGINT)
# Job-control stops (Ctrl-Z, a background read or write on the terminal): the command's
# processes stop with the holder and continue with it, so a stopped holder, which renews
# nothing, never leaves its command running past the lease.
JOB_STOPS = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)
# After the server ends a SQL lock session, the keeper kills the command if it still runs
# --grace + this much later: the holder's own detection (at once: the watcher wakes on the
# socket) and its SIGKILL come first unless it is stopped or hung.
KEEPER_SLACK = 1.0
KEEPER_VERDICT = {"lease-expiring": "lease-lost", "session-ended": "connection-lost"}


class Holder:
    def __init__(self, args: argparse.Namespace, command: list[str], env: Mapping[str, str]):
        self.args = args
        self.command = command
        self.env = env
        self.pid = os.getpid()
        self.phase = "setup"  # setup -> acquiring -> starting -> running -> draining -> done
        self.pending: list[int] = []
        self.child: _Child | None = None
        # child / lost / killer, shared with the watcher and grace threads. Re-entrant: the
        # signal handler runs in the main thread, possibly while the main thread holds it.
        self.state_lock = threading.RLock()
        self.gone = threading.Event()  # every descendant has exited
        self.killer: threading.Thread | None = None
        self.lost: str | None = None
        self.held = None  # the lock, once taken
        self.stopped = False  # the command's processes were stopped with the holder
        self.stop_received: int | None = None  # the first STOPPING signal the holder got
        self.end_by: int | None = None  # see leave()

    # -- outcomes ---------------------------------------------------------------------------

    def _finish(self, outcome: str, detail: str) -> int:
        code = EXIT[outcome][0]
        log.error("%s name=%s %s exit=%d", outcome, self.args.name, detail, code)
        return code

    # -- main line --------------------------------------------------------------------------

    def run(self) -> int:
        saved = {s: signal.signal(s, self._on_job_stop) for s in JOB_STOPS}
        saved[signal.SIGCONT] = signal.signal(signal.SIGCONT, self._on_continue)
        self.wake = _SignalWake()
        try:
            return self._run()
        finally:
            self.wake.close()
            for s, h in saved.items():
                signal.signal(s, h)

    def _run(self) -> int:
        try:
            target = backends.parse_url(self.args.backend, self.env)
            if self.args.password_file:
                target = backends.with_password(target, self._read_password())
            backend = backends.load(target.scheme)
        except ConfigError as e:
            return self._finish("config-error", str(e))
        except _Interrupted as e:  # stopped while its password file was awaited
            self.phase = "done"
            return self._finish_signal(e.signum, "before acquiring")
        self._warn_lease(target)
        opts = backends.Options(wait=self.args.wait, ttl=self.args.ttl,
                                connect_timeout=self.args.connect_timeout)
        if self.pending:  # a stop signal during start-up: never ask for the lock
            self.phase = "done"
            return self._finish_signal(self.pending[0], "before acquiring")
        return self._locked_run(backend, target, opts)

    def _read_password(self) -> str:
        """--password-file's secret. Reading it may wait (a FIFO whose writer has not come):
        a stop signal then ends the wait (_on_signal raises in this phase, read(2) returns
        EINTR), as it ends a wait for the lock; queued, it was never seen, and the holder
        could not be stopped. One that lands between open(2) and read(2) interrupts nothing:
        it raises once the read returns, still in this phase (tests/cluster/test_holder_cli.py)."""
        self.phase = "reading"
        try:
            return backends.read_password(self.args.password_file, self.env)
        finally:
            self.phase = "setup"

    def _warn_lease(self, target: backends.Target) -> None:
        # A failed renewal is noticed up to one renewal interval + connect-timeout after the
        # last good one; the command must be gone (grace) before the remaining lease runs out.
        if backends.SCHEMES[target.scheme].module != "redis":
            return
        from jobgen.runtime.backends.redis import renew_interval

        margin = self.args.ttl - renew_interval(self.args.ttl) - self.args.connect_timeout
        if self.args.grace >= margin:
            log.warning("config-warning name=%s --grace %gs >= --ttl minus the renewal interval "
                        "and --connect-timeout (%gs): after a failed renewal the command may "
                        "get SIGKILL before --grace ends (the keeper ends it before the lease runs out)",
                        self.args.name, self.args.grace, margin)

    def _locked_run(self, backend, target: backends.Target, opts: backends.Options) -> int:
        where = target.display()
        started = time.monotonic()
        held = None
        self.phase = "acquiring"  # a stop signal now abandons the attempt
        if opts.wait:  # a run that may wait says so (and that it now handles stop signals)
            log.info("waiting name=%s backend=%s up to --wait %gs", self.args.name, where,
                     opts.wait)
        try:
            held = backend.acquire(target, self.args.name, opts)
            self.phase = "starting"  # from here signals queue until the command exists
        except _Interrupted as e:
            self.phase = "done"
            if held is not None:  # the signal landed between acquire() and the line above
                self._release(held)
            return self._finish_signal(e.signum, "while acquiring")
        except LockError as e:
            self.phase = "done"
            outcome = next(o for cls, o in ERROR_OUTCOME if isinstance(e, cls))
            return self._finish(outcome, f"backend={where} {e}")
        except Exception as e:  # one line and a code rather than a traceback in the journal
            self.phase = "done"
            return self._finish("internal-error", f"backend={where} {backends.describe(e)}")
        waited = time.monotonic() - started
        if held is None:
            self.phase = "done"
            bound = f"--wait {opts.wait:g}s ran out" if opts.wait else "held elsewhere"
            return self._finish("conflict", f"backend={where} {bound}")
        token = f" token={held.token}" if held.token else ""
        log.info("acquired name=%s backend=%s%s waited=%.3fs", self.args.name, where, token, waited)
        lifeline = None
        self.held = held
        try:
            # After the lock is taken, so the keeper shares the lock session (tree.Lifeline);
            # before becoming a subreaper (tree.Tree.start), so it is never our child.
            lifeline = tree.Lifeline(f"jobgen-lock[{self.args.job or self.args.name}]: ")
            if held.deadline is not None:  # a lease: the keeper enforces it if we cannot
                lifeline.lease(held.deadline)
                held.on_deadline = lifeline.lease
            session = getattr(held, "socket_fd", lambda: None)()
            if session is not None:  # a SQL session: the keeper notices the server end it
                lifeline.session(session, self.args.grace + KEEPER_SLACK)
            tree.become_subreaper()  # here, so a refusal is not taken for the command's
            code = self._run_command(held, lifeline)
        except OSError as e:  # fork or prctl refused: never run the command unowned
            self.phase = "done"
            code = self._finish("internal-error", f"cannot own the command's processes: {e}")
        finally:
            self._release(held)
            if lifeline is not None:
                lifeline.done()
        return code

    def _release(self, held) -> None:
        try:
            ours = held.release()
        except Exception as e:
            log.warning("release-failed name=%s %s (the server frees it at session end or TTL)",
                        self.args.name, e if isinstance(e, LockError) else backends.describe(e))
        else:
            if ours:
                log.info("released name=%s", self.args.name)
            else:
                log.warning("release-not-ours name=%s the lock was no longer held by us",
                            self.args.name)
        finally:
            held.close()

    def _run_command(self, held, lifeline: tree.Lifeline) -> int:
        env = dict(self.env)
        env.pop("JOBGEN_LOCK_TOKEN", None)  # never pass on an outer holder's token
        if held.token:
            env["JOBGEN_LOCK_TOKEN"] = held.token
        if self.pending:  # asked to stop before the command started: do not start it
            self.phase = "done"
            return self._finish_signal(self.pending[0], "before the command started")
        if self._lease_ran_out():  # the holder was stopped between acquiring and here
            self.phase = "done"
            return self._finish("lease-lost", "the lease ran out before the command started; "
                                              "command not run")
        try:
            # The keeper kills the tree if we die: till then the command only freezes.
            owned = tree.Tree.start(self.command, env, death=signal.SIGSTOP)
        except FileNotFoundError as e:
            self.phase = "done"
            return self._finish("not-found", f"command={self.command[0]!r}: {e.strerror}")
        except OSError as e:
            self.phase = "done"
            return self._finish("not-executable", f"command={self.command[0]!r}: {e.strerror}")
        proc = owned.proc
        lifeline.guard(proc.pid)
        with self.state_lock:
            self.child = _Child(owned)
        self.phase = "running"
        log.info("started name=%s pid=%d command=%s", self.args.name, proc.pid, self.command[0])
        for signum in self.pending:
            self._forward(signum)
        held.watch(self._on_lost)
        t0 = time.monotonic()
        _wait_exited(proc.pid, self.wake.fd)  # not reaped: its pid (= the group id) stays ours
        self._keeper_verdict(lifeline)
        status = proc.wait()
        code = 128 - status if status < 0 else status
        self.phase = "draining"
        self._drain()
        with self.state_lock:
            self.child.exited = True
            lost = self.lost
        self.gone.set()
        self.phase = "done"
        log.info("exited name=%s pid=%d status=%d ran=%.3fs", self.args.name, proc.pid, code,
                 time.monotonic() - t0)
        if lost:
            return self._finish(lost, f"command status was {code}")
        if status < 0 and -status == self.stop_received:
            self.end_by = self.stop_received  # the stop ended the command: it ends the holder too
        return code

    def _drain(self) -> None:
        """The command has exited: its leftover descendants are stopped (SIGTERM, SIGKILL
        after --grace) and reaped before the lock is released."""
        left = self.child.tree.members()
        if left:
            log.warning("leftover name=%s processes=%d after the command exited; SIGTERM, "
                        "SIGKILL in %gs", self.args.name, len(left), self.args.grace)
            self._stop_tree(signal.SIGTERM)
        self.child.tree.reap()

    # -- signals and loss -------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame) -> None:
        # Runs in the main thread between bytecodes (Python signal semantics).
        if os.getpid() != self.pid:  # a forked child between fork and exec: not ours to handle
            return
        if self.phase in ("acquiring", "reading"):
            raise _Interrupted(signum)
        if self.phase in ("setup", "starting"):
            self.pending.append(signum)
        elif self.phase in ("running", "draining"):
            self._forward(signum)

    def _forward(self, signum: int) -> None:
        if signum in STOPPING:
            self.stop_received = self.stop_received or signum
            sent = self._stop_tree(signum)
        else:
            sent = self._signal_tree(signum)
        if sent:
            log.info("forwarded name=%s signal=%s pid=%d", self.args.name,
                     signal.Signals(signum).name, self.child.proc.pid)

    def _signal_tree(self, signum: int) -> bool:
        with self.state_lock:
            child = self.child
            if child is None or child.exited:
                return False
            # The group id is the command's pid: valid until every member is gone.
            return child.tree.signal(signum)

    def _stop_tree(self, signum: int) -> bool:
        """Send signum to the whole tree now and SIGKILL what is left after --grace."""
        sent = self._signal_tree(signum)
        with self.state_lock:
            if self.killer is None and self.child is not None and not self.child.exited:
                self.killer = threading.Thread(target=self._kill_after_grace,
                                               name="jobgen-grace", daemon=True)
                self.killer.start()
        return sent

    def _kill_after_grace(self) -> None:
        if self.gone.wait(self.args.grace):
            return
        # Logged first: once the last process dies the main thread may exit at once.
        log.error("killed name=%s pid=%d and its processes after --grace %gs",
                  self.args.name, self.child.proc.pid, self.args.grace)
        self._signal_tree(signal.SIGKILL)
        while not self.gone.wait(0.05):  # again and again: a fork may race the first kill
            self._signal_tree(signal.SIGKILL)

    def _on_lost(self, event: str, detail: str) -> None:
        """Called once by the backend's watcher thread."""
        with self.state_lock:
            if self.child is None or self.child.exited:
                log.warning("%s-after-exit name=%s %s", event, self.args.name, detail)
                return
            self.lost = event
        self._stop_tree(signal.SIGTERM)
        log.error("%s name=%s %s; sent SIGTERM to pid=%d and its processes, SIGKILL in %gs",
                  event, self.args.name, detail, self.child.proc.pid, self.args.grace)

    # -- job control: Ctrl-Z, SIGSTOP ------------------------------------------------------

    def _on_job_stop(self, signum: int, _frame) -> None:
        """SIGTSTP/SIGTTIN/SIGTTOU: stop the command's processes (SIGSTOP: a command cannot
        ignore it), then stop the holder itself as the signal's default action would."""
        if os.getpid() != self.pid:
            return
        if self.phase in ("running", "draining") and self._signal_tree(signal.SIGSTOP):
            self.stopped = True
            log.info("stopped name=%s signal=%s; the command's processes stop with the holder",
                     self.args.name, signal.Signals(signum).name)
        signal.signal(signum, signal.SIG_DFL)
        try:
            os.kill(self.pid, signum)  # stops here (unless the kernel discards it: orphaned group)
        finally:
            signal.signal(signum, self._on_job_stop)
        self._on_continue(signal.SIGCONT, None)

    def _on_continue(self, _signum: int, _frame) -> None:
        """SIGCONT (after Ctrl-Z, or a SIGSTOP nobody can catch): a lease that ran out while
        the holder was stopped may be another holder's now, so the command's processes are
        killed where they stand (not continued to run beside it); else they continue."""
        if os.getpid() != self.pid or self.phase not in ("running", "draining"):
            return
        if self._lease_ran_out():
            with self.state_lock:
                first = self.lost is None
                self.lost = self.lost or "lease-lost"
            if first:
                log.error("lease-lost name=%s the holder was stopped past its lease; SIGKILL to "
                          "the command's processes", self.args.name)
            self._signal_tree(signal.SIGKILL)
            self._stop_tree(signal.SIGKILL)
        elif self.stopped:
            self._signal_tree(signal.SIGCONT)
            log.info("continued name=%s", self.args.name)
        self.stopped = False

    def _keeper_verdict(self, lifeline: tree.Lifeline) -> None:
        """The keeper killed the command (the holder was stopped or hung past the lease or
        the lock session): the run lost its lock, whatever status the command shows."""
        why = lifeline.killed()
        if why is None:
            return
        with self.state_lock:
            self.lost = self.lost or KEEPER_VERDICT[why]

    def _lease_ran_out(self) -> bool:
        deadline = getattr(self.held, "deadline", None)
        return deadline is not None and tree.boottime() >= deadline

    def _finish_signal(self, signum: int, when: str) -> int:
        code = 128 + signum
        log.error("interrupted name=%s signal=%s %s; command not run exit=%d", self.args.name,
                  signal.Signals(signum).name, when, code)
        return code


# Without pidfd_open(2) (Linux < 5.3) the wait for the command looks every this many ms.
EXIT_POLL_MS = 100


class _SignalWake:
    """A pipe the interpreter writes a byte to on every signal the holder handles
    (signal.set_wakeup_fd), whichever thread the kernel delivered it to.

    Why: Python runs a signal's handler in the main thread only, between bytecodes. The
    kernel delivers a process-directed signal to the main thread unless that thread already
    has one pending (signal(7)): SIGTERM sent right after SIGCONT lands on another thread
    (the SQL session watcher, a renewal), where the C-level handler only flags it. A main
    thread blocked in waitid(2), which nothing interrupts then, would never run the handler:
    the stop would never reach the command. Waiting on this pipe as well wakes it."""

    def __init__(self) -> None:
        self.fd, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._saved = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)

    def close(self) -> None:
        signal.set_wakeup_fd(self._saved)
        os.close(self.fd)
        os.close(self._w)


def _wait_exited(pid: int, wake: int) -> None:
    """Block until pid exits, leaving it a zombie (WNOWAIT) so the pid stays ours; return
    to Python (where the pending handlers run) each time `wake` (_SignalWake) is written."""
    try:
        pidfd = os.pidfd_open(pid)  # readable once pid has exited (Linux 5.3)
    except OSError:
        pidfd = None
    poller = select.poll()
    poller.register(wake, select.POLLIN)
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    try:
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            # Never emptied before the poll: a byte still there is a handler still to run.
            poller.poll(None if pidfd is not None else EXIT_POLL_MS)
            try:
                while os.read(wake, 512):
                    pass
            except BlockingIOError:
                pass  # emptied; the signals' handlers run at the next bytecode
    except ChildProcessError:
        return
    finally:
        if pidfd is not None:
            os.close(pidfd)
