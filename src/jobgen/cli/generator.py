"""`jobgen-generator NORMAL_DIR [EARLY_DIR LATE_DIR]`: the systemd generator (console script).

systemd runs it at boot and at every daemon-reload, before any unit is loaded, so it
starts lean: no typer, and the compiler only when there is a manifest to compile. What it
generates is decided in host/generator.py; this module reads the environment, prints the
problems and picks the exit code.

Where its messages go. systemd gives a generator /dev/null as stdout and stderr at
daemon-reload (seen on 252 and 257) and forbids talking to other processes, so, like
systemd's own generators (log_setup_generator(): the kernel log in system scope), each
problem is written:
- to stderr, always (a run by hand, a test);
- when systemd ran it: to /dev/kmsg as "<priority>jobgen-generator[pid]: text", which
  journald reads into the journal (SYSLOG_IDENTIFIER=jobgen-generator, PRIORITY=);
- where there is no /dev/kmsg (systemd-nspawn hides it from containers): to journald's
  native socket, one non-blocking datagram per problem, so the generator can never wait
  on journald;
- where neither exists (a container's first pass at boot, before journald runs): into
  the output folder, with a generated jobgen-generator-report.service that prints them to
  the journal at boot (host/generator.py add_boot_report).
Exit 0 unless the output folder cannot be written: a bad manifest is reported and
skipped, never a failed generator.

A run whose inputs (manifests, jobgen's code, the running systemd, the arguments) are
those of an earlier complete run writes what that run wrote, from its compiled cache
entry, without loading the compiler (host/gencache.py). An entry it could store only in
/run is moved into /var/cache after local-fs.target by a unit pair it writes beside the
others, which runs `jobgen-generator --persist-cache` (host/genpersist.py).

It never stalls the boot: each manifest's units are written as soon as it compiles, and
at its deadline (host/generator.py DEADLINE_SEC, a third of the 90 s systemd gives all
generators) an alarm stops the compilation in progress; the manifests not reached are
reported like a skipped one, and what was written stays.
"""

from __future__ import annotations

# Start-up: os, sys and time only (all three already loaded by the interpreter) until a
# manifest is found (host/sources.py); then the compiled cache (host/gencache.py: stat,
# errno and the interpreter's sha256), and only on a miss contextlib, signal (enum),
# exits.py (the contract tables) and the compiler.
import os
import sys
import time

from jobgen.host import sources

# The deadline counts from here (as early as the program can read a clock), and compiling
# stops REPORT_MARGIN before it, so the report and the exit fit inside it too.
_STARTED = time.monotonic()
REPORT_MARGIN = 0.1  # of the deadline

IDENT = "jobgen-generator"
# The one failure systemd hears about ("... failed with exit status 1" in the boot log):
# the output folder cannot be written, so nothing could be generated.
EXIT_CANNOT_WRITE = 1
USAGE = f"usage: {IDENT} NORMAL_DIR [EARLY_DIR LATE_DIR]  (systemd.generator(7); manifests from /etc/jobgen, /usr/lib/jobgen or $JOBGEN_MANIFEST_DIRS)"
# syslog(3) priorities journald stores as PRIORITY= for a /dev/kmsg record
PRIORITY = {"error": 3, "warning": 4, "note": 5, "info": 6}
# The kernel refuses a /dev/kmsg record longer than 1024 bytes (PRINTKRB_RECORD_MAX).
KMSG_MAX = 960
# Problems worth a line at every boot and reload; notes (fallbacks the target needs) are
# what `jobgen check` is for.
SHOWN = ("error", "warning")
KMSG = "/dev/kmsg"
JOURNAL_SOCKET = "/run/systemd/journal/socket"


class Log:
    def __init__(self, env: dict[str, str]):
        self.kmsg: int | None = None
        self.journal = None
        self.undelivered: list[tuple[int, str]] | None = None  # run by systemd, no way to the journal
        if not _run_by_systemd(env):
            return
        try:
            # O_NONBLOCK: open(2) of a FIFO in /dev/kmsg's place waits for a reader, before
            # the run's deadline is even set; a generator must never stall the boot.
            self.kmsg = os.open(KMSG, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            self.journal = _journal_socket()
            if self.journal is None:
                self.undelivered = []

    def __call__(self, severity: str, text: str) -> None:
        if not text.isprintable():
            # One problem, one journal line: a file name with a newline (/etc/jobgen/a<LF>b.yaml)
            # or another control character is shown escaped, never split or sent to the terminal.
            text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
        # contract/oneline.to_stderr's rule, written out here: a hit loads no module it
        # does not need (tests/test_generator_cache.py), and this runs on every boot.
        try:
            print(text, file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            # A console that cannot take the line (full, gone, closed: sys.stderr None) costs
            # the line, never the units of every other manifest; what stderr still buffers
            # goes to /dev/null, not into an error at exit (status 120).
            try:
                null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
                os.dup2(null, sys.stderr.fileno())
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass
        if self.undelivered is not None:
            self.undelivered.append((PRIORITY[severity], text))
        if self.kmsg is not None:
            record = f"<{PRIORITY[severity]}>{IDENT}[{os.getpid()}]: {text}".encode()[:KMSG_MAX] + b"\n"
            try:
                os.write(self.kmsg, record)
            except OSError:
                pass
        elif self.journal is not None:
            # Native protocol (systemd-journald.service(8)): KEY=value lines, one datagram.
            fields = {"MESSAGE": text.replace("\n", " "), "PRIORITY": str(PRIORITY[severity]), "SYSLOG_IDENTIFIER": IDENT}
            try:
                self.journal.send("".join(f"{k}={v}\n" for k, v in fields.items()).encode())
            except OSError:  # a full buffer (EAGAIN) drops the line, never waits
                pass


def _journal_socket():
    import socket

    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC)
        sock.connect(JOURNAL_SOCKET)
        return sock
    except OSError:
        return None


def _run_by_systemd(env: dict[str, str]) -> bool:
    # systemd sets $SYSTEMD_EXEC_PID to the pid of what it executes, generators included
    # (seen on 252 and 257); systemd's own generators decide "run by systemd" the same way.
    return env.get("SYSTEMD_EXEC_PID") == str(os.getpid())


def run(argv: list[str], env: dict[str, str]) -> int:
    # systemd passes one folder or three (systemd.generator(7)); a person may ask for help.
    if argv in (["--help"], ["-h"]):
        print(_usage())
        return 0
    if argv and argv[0].startswith("--") and argv[0] == _persist_option():
        return persist(argv[1:], env)
    if len(argv) not in (1, 3) or argv[0].startswith("-"):
        from jobgen.cli.exits import EXIT_INVALID

        print(_usage(), file=sys.stderr)
        return EXIT_INVALID
    # Jobs belong to the booted system: nothing in the initrd, nothing for a user manager.
    if env.get("SYSTEMD_IN_INITRD") == "1" or env.get("SYSTEMD_SCOPE") == "user":
        return 0
    dirs = sources.manifest_dirs(env)
    if not sources.any_manifest(dirs):
        return 0  # what most hosts at most reloads get: nothing to write, nothing loaded
    # A manifest anyone could have written, or in a folder anyone could change, is not
    # compiled, nor served from the cache.
    paths, refused = sources.choose(dirs)
    if not paths and not refused:
        return 0
    log = Log(env)
    normal = argv[0]
    for path, why in refused:
        log("error", f"{IDENT}: {path} skipped: {why}; none of its units were generated; fix it, then "
                     "`systemctl daemon-reload`")
    if not paths:
        return _boot_report(log, normal)
    from jobgen.host import gencache

    cache = _Cache(argv, env, paths, log)
    if (entry := cache.lookup()) is not None:
        try:
            gencache.write(normal, entry)
            cache.write_keeper(normal)
        except OSError as exc:
            said = f"cannot write {exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else exc
            log("error", f"{IDENT}: cannot write into {normal}: {said}")
            return EXIT_CANNOT_WRITE
        for severity, text in entry.lines:
            log(severity, text)
        return _boot_report(log, normal)
    from jobgen.host import generator
    from jobgen.runtime.spawn import running_jobgen

    manifests = [generator.Path(p) for p in paths]
    seconds = _deadline(env)
    alarm = _Alarm(seconds)

    def emit(part: generator.Outcome) -> None:
        with alarm.held():  # a manifest's units are written whole, never cut by the alarm
            generator.write(normal, part)

    try:
        with alarm:
            outcome = generator.generate(manifests, normal, cache.running[0], holder=running_jobgen(sys.argv[0]),
                                         emit=emit, deadline=alarm.deadline)
        cache.write_keeper(normal)
    except OSError as exc:
        log("error", f"{IDENT}: cannot write into {normal}: {exc}")
        return EXIT_CANNOT_WRITE
    lines = [(d.severity, str(d)) for d in outcome.diagnostics if d.severity in SHOWN]
    for severity, text in lines:
        log(severity, text)
    for path in outcome.skipped:
        log("error", f"{IDENT}: {path} skipped: none of its units were generated; fix it, then `systemctl daemon-reload`")
    for path in outcome.left:
        log("error", f"{IDENT}: {path} left out: the generator reached its {seconds:g} s deadline before this manifest was done "
                     f"(systemd allows generators {generator.SYSTEMD_GENERATOR_TIMEOUT_SEC} s); `jobgen check` it, "
                     "then `systemctl daemon-reload`")
    if not outcome.skipped and not outcome.left:
        # Only a run that generated every manifest is kept: a broken one is compiled (and
        # reported with its positions) at every run until it is fixed.
        cache.store(gencache.Entry(outcome.files, outcome.links, lines))
    return _boot_report(log, normal)


def _persist_option() -> str:
    from jobgen.host import genpersist  # only when systemd or a person passes an option

    return genpersist.OPTION


def _usage() -> str:
    from jobgen.host import genpersist

    return (f"{USAGE}\n       {IDENT} {genpersist.OPTION} [INTO FROM...]  (what {genpersist.SERVICE_UNIT} runs: "
            f"entries in FROM, by default {' '.join(genpersist.gencache.FOLDERS[1:])}, kept in INTO, by default "
            f"{genpersist.gencache.FOLDER})")


def persist(args: list[str], env: dict[str, str]) -> int:
    """`jobgen-generator --persist-cache [INTO FROM...]`, run by the generated
    jobgen-generator-cache.service (host/genpersist.py): one line, exit 0 whatever happened
    to the cache; a usage error is the only failure."""
    from jobgen.host import gencache, genpersist

    if len(args) == 1 or not all(os.path.isabs(a) for a in args):
        from jobgen.cli.exits import EXIT_INVALID

        print(_usage(), file=sys.stderr)
        return EXIT_INVALID
    folders = tuple(args) if args else gencache.FOLDERS
    said = genpersist.persist(folders[0], folders[1:])
    if said is not None:
        severity, text = said
        # On the journal's stream (systemd sets $JOURNAL_STREAM) a "<N>" prefix is the
        # line's priority (SyslogLevelPrefix=, on by default, systemd.exec(5)).
        prefix = f"<{PRIORITY[severity]}>" if env.get("JOURNAL_STREAM") else ""
        print(f"{prefix}{IDENT}: {text}", file=sys.stderr, flush=True)
    return 0


def _boot_report(log: Log, normal: str) -> int:
    if log.undelivered:
        # Early boot in a container: no /dev/kmsg, journald not started yet. A unit that
        # prints the lines once the journal runs carries them there instead.
        from jobgen.host import generator

        report = generator.Outcome()
        generator.add_boot_report(report, normal, log.undelivered)
        try:
            generator.write(normal, report)
        except OSError as exc:
            log("error", f"{IDENT}: cannot write into {normal}: {exc}")
            return EXIT_CANNOT_WRITE
    return 0


class _Cache:
    """The compiled cache around one run (host/gencache.py): a hit writes what the entry
    holds; a miss compiles, then stores what it wrote in the first folder that takes it.
    Any problem with the cache is a miss; one that is not just "nothing there" (an entry
    truncated, changed, not root's, a link) is also one note, and the miss writes a good
    entry over it."""

    def __init__(self, argv: list[str], env: dict[str, str], paths: list[str], log: Log):
        from jobgen.host import gencache, machine

        self.running = machine.running_systemd()
        self.folders = gencache.folders(env)
        self._log = log
        self._inputs = (argv, env, paths, self.running, sys.argv[0])
        self._code = gencache.code_marks() if self.folders else []
        self.key = gencache.key(*self._inputs, code=self._code) if self.folders else None

    def lookup(self):
        from jobgen.host import gencache

        if self.key is None:
            return None
        for where in self.folders:
            try:
                if (entry := gencache.lookup(where, self.key)) is not None:
                    return entry
            except gencache.Untrusted as exc:
                self._log("note", f"{IDENT}: compiled cache not used: {exc}; compiling the manifests")
                return None
        return None

    def store(self, entry) -> None:
        from jobgen.host import gencache

        # A manifest edited while it compiled: what was written may be the old bytes or the
        # new, so it is kept under neither.
        if self.key is None or gencache.key(*self._inputs, code=self._code) != self.key:
            return
        for n, where in enumerate(self.folders):
            if gencache.store(where, self.key, entry):
                if n:  # not where it survives a reboot: the keeper's path unit moves it there
                    gencache.mark_pending(where)
                return

    def write_keeper(self, normal: str) -> None:
        """The unit pair that moves entries of the later folders into the first, once that
        can be written (host/genpersist.py); on a hit as on a miss, so that a path unit
        waits from the boot on. Raises OSError."""
        if len(self.folders) < 2:
            return
        from jobgen.host import gencache, genpersist

        program = os.path.realpath(sys.argv[0]) if os.path.isabs(sys.argv[0]) else ""
        if (pair := genpersist.units(program, self.folders, IDENT)) is not None:
            gencache.write(normal, pair)


def _deadline(env: dict[str, str]) -> float:
    from jobgen.host import generator

    try:
        seconds = float(env.get(generator.DEADLINE_ENV, ""))
    except ValueError:
        return generator.DEADLINE_SEC
    return seconds if 0 < seconds < generator.SYSTEMD_GENERATOR_TIMEOUT_SEC else generator.DEADLINE_SEC


class _Alarm:
    """SIGALRM at the deadline raises DeadlineReached into the compilation in progress,
    except while a manifest's units are being written (held): then generate() sees the
    deadline passed before the next manifest."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = _STARTED + seconds * (1 - REPORT_MARGIN)
        self._held = False

    def _ring(self, signum, frame) -> None:
        from jobgen.host import generator

        if not self._held:
            raise generator.DeadlineReached()

    def __enter__(self) -> _Alarm:
        import signal

        self._previous = signal.signal(signal.SIGALRM, self._ring)
        signal.setitimer(signal.ITIMER_REAL, max(self.deadline - time.monotonic(), 0.001))
        return self

    def __exit__(self, *exc) -> None:
        import signal

        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)

    def held(self) -> _Held:
        return _Held(self)


class _Held:
    """`with alarm.held():` (a class, not contextlib: see the start-up note above)."""

    def __init__(self, alarm: _Alarm):
        self._alarm = alarm

    def __enter__(self) -> None:
        self._alarm._held = True

    def __exit__(self, *exc) -> None:
        self._alarm._held = False


def main() -> None:
    sys.exit(run(sys.argv[1:], dict(os.environ)))
