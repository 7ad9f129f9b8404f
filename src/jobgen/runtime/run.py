"""`jobgen run`: start a job's process the way systemd starts the unit's (systemd.exec(5)),
from the same plan (compiler/plan.RunSpec): the unit's ExecStart= argv, and

- credentials: User= with the user's primary group when Group= is not given, and the
  supplementary groups of the group database (initgroups(3)), as systemd does;
- environment built from scratch, never the caller's: PATH as the service manager sets it,
  the system locale (LANG, LC_*), HOME/USER/LOGNAME/SHELL from the user's passwd entry
  (HOME left out when it is '/' or empty, SHELL when it is a nologin placeholder, as
  systemd's "clean" user credentials), then Environment=, then EnvironmentFile= (later
  wins), parsed as systemd parses them (parse_env_file below);
- resource limits: the manager's DefaultLimit*= (jobgen writes no Limit*=), set before
  the identity change, as systemd does, with systemd's fallback to the nearest allowed
  value (setrlimit_closest) when the caller may not raise one;
- working directory (entered as the job's user; / without WorkingDirectory=), UMask=
  (0022 without it), stdin /dev/null;
- TimeoutStartSec=: when it runs out, KillSignal= (KillMode= says to whom), SIGKILL to
  what is left after TimeoutStopSec=, result 'timeout'; the same stop, without the
  timeout, for processes left behind when the main process ends;
- the lock file made as the tmpfiles.d(5) snippet makes it (systemd-tmpfiles on the
  snippet's own lines) before the lock wrapper opens it;
- its own session with no controlling terminal (setsid): the job cannot open /dev/tty or
  push keystrokes into the caller's terminal (TIOCSTI needs it as controlling tty);
  stdout/stderr reach the caller through pipes jobgen relays, never the terminal itself;
- no_new_privs when the unit has NoNewPrivileges=yes (hardening default or strict);
- LoadCredential=NAME:PATH: the file copied into a private directory only the job's user
  can read, named by $CREDENTIALS_DIRECTORY, removed after the run.

Not reproduced (a unit-only context): sandboxing (PrivateTmp=, ProtectSystem=, ...),
the unit's cgroup, INVOCATION_ID/JOURNAL_STREAM/SYSTEMD_EXEC_PID, and the cgroup's
MEMORY_PRESSURE_WATCH/MEMORY_PRESSURE_WRITE (systemd.exec(5), 254+).

Every unit property comes from the plan (compiler/context.CONTEXT is the table of
"unit property -> how jobgen run applies it"); what the unit leaves to the manager
(DefaultTimeoutStopSec=, DefaultLimit*=) is asked of the running manager.

Pure building (build) is separate from starting (start): a test can compare the two.
This module never prints or exits: cli/run.py does.
"""

from __future__ import annotations

import errno
import glob
import grp
import os
import pwd
import re
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from jobgen.contract.locks import CONFLICT_EXIT, credential_problem
from jobgen.contract.outcomes import FAILED, by_result
from jobgen.contract.policies import TIMEOUT_EXIT
from jobgen.runtime import tree

# The service manager's PATH when `systemd-path` cannot say (systemd's DEFAULT_PATH with
# split /usr, which is what Debian 12's systemd 252 sets).
FALLBACK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The manager's locale: /etc/locale.conf (systemd), /etc/default/locale (Debian's patch);
# with none configured, services get LANG=C.UTF-8 (systemd 252 in a Debian 12 container
# without a locale file, tests/test_run.py's comparison with a real unit).
LOCALE_FILES = ("/etc/locale.conf", "/etc/default/locale")
DEFAULT_LANG = "C.UTF-8"
LOCALE_VARS = ("LANG", "LANGUAGE", "LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE",
               "LC_MONETARY", "LC_MESSAGES", "LC_PAPER", "LC_NAME", "LC_ADDRESS",
               "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION")
# Users systemd synthesizes whatever the passwd database says (user-util.c,
# get_user_creds): nobody gets no HOME and no SHELL in a service's environment.
SYNTHESIZED_NO_LOGIN = ("nobody", "65534")
# Shells systemd treats as "no login" placeholders: SHELL is then not set.
NOLOGIN_SHELLS = ("/bin/nologin", "/sbin/nologin", "/usr/bin/nologin", "/usr/sbin/nologin",
                  "/bin/false", "/usr/bin/false", "/bin/true", "/usr/bin/true")

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

# LoadCredential=: systemd reads at most this much of the file (creds-util.h
# CREDENTIAL_SIZE_MAX, also the total for a service); a larger one fails the unit with
# 243/CREDENTIALS. Read no further: a source such as /dev/zero never ends.
CREDENTIAL_SIZE_MAX = 1024 * 1024
# EnvironmentFile=: systemd reads a file whole up to this size (fileio.c READ_FULL_BYTES_MAX)
# and fails the unit on a larger one; jobgen run neither reads past it (/dev/zero) nor runs.
ENV_FILE_SIZE_MAX = 64 * 1024 * 1024 - 1

# Resource limits by systemd's names (systemd.exec(5) "LimitCPU=" ...), all that a unit
# has; the manager's DefaultLimitNAME= / DefaultLimitNAMESoft= are what a unit gets.
RLIMITS = {
    "CPU": resource.RLIMIT_CPU, "FSIZE": resource.RLIMIT_FSIZE, "DATA": resource.RLIMIT_DATA,
    "STACK": resource.RLIMIT_STACK, "CORE": resource.RLIMIT_CORE, "RSS": resource.RLIMIT_RSS,
    "NOFILE": resource.RLIMIT_NOFILE, "AS": resource.RLIMIT_AS, "NPROC": resource.RLIMIT_NPROC,
    "MEMLOCK": resource.RLIMIT_MEMLOCK, "LOCKS": getattr(resource, "RLIMIT_LOCKS", 10),  # Linux's 10; Python has no name for it
    "SIGPENDING": resource.RLIMIT_SIGPENDING, "MSGQUEUE": resource.RLIMIT_MSGQUEUE,
    "NICE": resource.RLIMIT_NICE, "RTPRIO": resource.RLIMIT_RTPRIO, "RTTIME": resource.RLIMIT_RTTIME,
}
# When no manager answers (not booted with systemd, or not root without D-Bus): systemd's
# own defaults. systemd-system.conf(5): DefaultTimeoutStopSec=90s, DefaultLimitNOFILE=
# 1024:524288, and RLIMIT_CORE "set to infinity by PID 1" (src/core/main.c,
# initialize_coredump); the other limits are inherited from the kernel: the caller's stay.
FALLBACK_STOP_TIMEOUT_USEC = 90_000_000
FALLBACK_RLIMITS = {"NOFILE": (1024, 524288), "CORE": (resource.RLIM_INFINITY, resource.RLIM_INFINITY)}
# The time units of a span as `systemctl show` prints it (format_timespan(), time-util.c).
SPAN_UNITS = {"y": 31_557_600_000_000, "month": 2_629_800_000_000, "w": 604_800_000_000,
              "d": 86_400_000_000, "h": 3_600_000_000, "min": 60_000_000, "s": 1_000_000,
              "ms": 1000, "us": 1}

# Failures before the job's program runs -> (exit code, systemd's name for the same failure).
# The codes are systemd's own exec status codes (systemd.exec(5) "Process Exit Codes"),
# so `jobgen run` ends as the unit's ExecStart= would; an environment file systemd fails
# before spawning anything (result 'resources'), so it gets EX_CONFIG.
EXIT: dict[str, tuple[int, str]] = {
    "chdir": (200, "CHDIR"),
    "exec": (203, "EXEC"),
    "limits": (205, "LIMITS"),
    "group": (216, "GROUP"),
    "user": (217, "USER"),
    "permission": (77, "NOPERM"),  # not root: cannot become the job's user
    "environment-file": (78, "CONFIG"),
    "credentials": (243, "CREDENTIALS"),
    # The lock file is missing or cannot be made: flock(1) in the unit ends the same way
    # when it cannot open it (EX_NOINPUT), so the code is the unit's.
    "lock-file": (66, "NOINPUT"),
}


class RunError(Exception):
    def __init__(self, outcome: str, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.code = EXIT[outcome][0]
        self.errno = errno  # the exec's, for a caller whose own words depend on it (cli/queue.py)


class Spec(Protocol):  # compiler.context.RunSpec (runtime does not import the compiler)
    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    working_directory: str
    user: str | None
    group: str | None
    environment_files: tuple[str, ...]
    no_new_privs: bool
    umask: int
    credentials: tuple[tuple[str, str], ...]
    timeout_usec: int | None
    kill_mode: str
    kill_signal: str
    stop_timeout_usec: int | None
    success_exit_status: tuple[int, ...]
    lock_file: str | None
    lock_files: tuple[str, ...]
    conflict_outcome: str


@dataclass(frozen=True)
class Process:
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str | None
    uid: int | None  # None: stay who we are
    gid: int | None
    groups: tuple[int, ...] | None
    umask: int
    no_new_privs: bool
    user: str | None = field(default=None)
    credentials: tuple[tuple[str, str], ...] = ()
    rlimits: tuple[tuple[int, int, int], ...] = ()  # (RLIMIT_*, soft, hard)
    timeout: float | None = None  # seconds; None: none
    kill_mode: str = "control-group"
    kill_signal: int = signal.SIGTERM
    stop_timeout: float = FALLBACK_STOP_TIMEOUT_USEC / 1e6
    success_exit_status: tuple[int, ...] = ()
    lock_file: str | None = None
    lock_files: tuple[str, ...] = ()  # tmpfiles.d lines
    conflict_outcome: str = FAILED


@dataclass(frozen=True)
class Ended:
    """How the job ended, in the words systemd passes the unit's reporter
    (systemd.exec(5): $SERVICE_RESULT, $EXIT_CODE, $EXIT_STATUS), and the outcome word."""

    status: int  # what `jobgen run` exits with: the job's status, 128+N for signal N, 124 on timeout
    result: str  # success | exit-code | signal | core-dump | timeout
    exit_code: str  # exited | killed | dumped
    exit_status: str  # a number, or a signal name without SIG
    outcome: str  # JOBGEN_OUTCOME, as the unit's reporter logs it
    why: str = ""  # what the words do not say: a lock conflict, a timeout's stop


# --------------------------------------------------------------------------- env files


def parse_env_file(text: str) -> list[tuple[str, str]]:
    """KEY=VALUE assignments as systemd reads an EnvironmentFile= (env-file.c,
    parse_env_file_internal): '#'/';' comment lines, whitespace around the key and before
    the value dropped, "double" quotes with \\ escaping only  \" \\ ` $  and newline,
    'single' quotes literal, an unquoted value's trailing whitespace dropped and \\
    escaping any character (\\ at the end of a line continues it). Quoted and unquoted
    parts concatenate. An invalid name is ignored (systemd warns). No $VAR expansion."""
    out: list[tuple[str, str]] = []
    state, key, value, trailing = "KEY", "", "", 0

    def done() -> None:
        nonlocal key, value, trailing
        name = key.strip()
        if name and _env_name(name):
            out.append((name, value[: len(value) - trailing] if trailing else value))
        key, value, trailing = "", "", 0

    for c in text:
        if state == "KEY":
            if c == "\n":
                key = ""  # a line without '=' is ignored
            elif not key and c in "#;":
                state = "COMMENT"
            elif not key and c in " \t":
                pass
            elif c == "=":
                state = "PRE_VALUE"
            else:
                key += c
        elif state == "COMMENT":
            if c == "\\":
                state = "COMMENT_ESCAPE"
            elif c == "\n":
                state = "KEY"
        elif state == "COMMENT_ESCAPE":
            state = "COMMENT"
        elif state == "PRE_VALUE":
            if c == "\n":
                done()
                state = "KEY"
            elif c == "'":
                state = "SINGLE"
            elif c == '"':
                state = "DOUBLE"
            elif c == "\\":
                state = "VALUE_ESCAPE"
            elif c not in " \t":
                value += c
                trailing = 0
                state = "VALUE"
        elif state == "VALUE":
            if c == "\n":
                done()
                state = "KEY"
            elif c == "\\":
                state = "VALUE_ESCAPE"
            else:
                value += c
                trailing = trailing + 1 if c in " \t" else 0
        elif state == "VALUE_ESCAPE":
            state = "VALUE"
            if c != "\n":  # backslash-newline continues the line
                value += c
                trailing = 0
        elif state == "SINGLE":
            if c == "'":
                state, trailing = "PRE_VALUE", 0
            else:
                value += c
        elif state == "DOUBLE":
            if c == '"':
                state, trailing = "PRE_VALUE", 0
            elif c == "\\":
                state = "DOUBLE_ESCAPE"
            else:
                value += c
        elif state == "DOUBLE_ESCAPE":
            state = "DOUBLE"
            if c in '"\\`$':
                value += c
            elif c != "\n":
                value += "\\" + c
    if state not in ("KEY", "COMMENT", "COMMENT_ESCAPE"):  # the last line has no newline
        done()
    return out


def _env_name(name: str) -> bool:
    return name.replace("_", "a").isalnum() and name.isascii() and not name[0].isdigit()


def load_env_files(entries: tuple[str, ...]) -> list[tuple[str, str]]:
    """EnvironmentFile= entries in order: '-' prefix = optional; a glob matches files."""
    out: list[tuple[str, str]] = []
    for entry in entries:
        optional = entry.startswith("-")
        pattern = entry[1:] if optional else entry
        if not pattern.startswith("/") or ".." in pattern.split("/"):
            continue  # systemd ignores the line (path_simplify_and_warn); never the caller's folder
        paths = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not paths and not optional:
            raise RunError("environment-file", f"environment file {pattern}: no file matches")
        for path in paths:
            try:
                with open(path, "rb") as f:
                    data = f.read(ENV_FILE_SIZE_MAX + 1)
            except OSError as e:
                if optional:
                    continue
                raise RunError("environment-file", f"environment file {path}: {e.strerror} "
                               "(the unit would fail the same way; '-/path' makes it optional)")
            if len(data) > ENV_FILE_SIZE_MAX:
                if optional:  # systemd skips an optional file it cannot load, for any reason
                    continue
                raise RunError("environment-file", f"environment file {path}: larger than 64 MiB, systemd's "
                               "limit for a file it reads (the unit would fail the same way)")
            # Newlines as text mode reads them (\r\n and \r are \n), as before the size limit.
            text = data.decode("utf-8", "surrogateescape").replace("\r\n", "\n").replace("\r", "\n")
            out += parse_env_file(text)
    return out


# --------------------------------------------------------------------------- building


def manager_path() -> str:
    """The PATH this host's systemd gives services (`systemd-path search-binaries-default`)."""
    tool = shutil.which("systemd-path", path="/usr/bin:/bin")
    if tool:
        try:
            out = subprocess.run([tool, "search-binaries-default"], capture_output=True,
                                 text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return FALLBACK_PATH


def manager_locale() -> list[tuple[str, str]]:
    for path in LOCALE_FILES:
        try:
            with open(path, encoding="utf-8") as f:
                found = [(k, v) for k, v in parse_env_file(f.read()) if k in LOCALE_VARS and v]
        except OSError:
            continue
        if found:
            return found
    return [("LANG", DEFAULT_LANG)]


@dataclass(frozen=True)
class ManagerDefaults:
    stop_timeout_usec: int
    rlimits: dict[str, tuple[int, int]]  # systemd's name -> (soft, hard); absent: inherited


def manager_defaults() -> ManagerDefaults:
    """What the running service manager gives a unit that sets neither TimeoutStopSec= nor
    Limit*= (`systemctl show`: its DefaultTimeoutStopUSec and DefaultLimit*, which are its
    own limits where system.conf sets none, as a unit inherits them); systemd's documented
    defaults when no manager answers."""
    names = ["DefaultTimeoutStopUSec"] + [f"DefaultLimit{n}{soft}" for n in RLIMITS for soft in ("", "Soft")]
    shown = _systemctl_show(names)
    stop = _parse_span(shown.get("DefaultTimeoutStopUSec", ""))
    limits = {}
    for name in RLIMITS:
        soft, hard = _parse_limit(shown.get(f"DefaultLimit{name}Soft", "")), _parse_limit(shown.get(f"DefaultLimit{name}", ""))
        if soft is not None and hard is not None:
            limits[name] = (soft, hard)
    if stop is None or not limits:
        return ManagerDefaults(FALLBACK_STOP_TIMEOUT_USEC, dict(FALLBACK_RLIMITS))
    return ManagerDefaults(stop, limits)


def _systemctl_show(names: list[str]) -> dict[str, str]:
    tool = shutil.which("systemctl", path="/usr/bin:/bin")
    if not tool:
        return {}
    try:
        out = subprocess.run([tool, "show", "--property=" + ",".join(names)], capture_output=True,
                             text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0:
        return {}
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def _parse_limit(text: str) -> int | None:
    if text == "infinity":
        return resource.RLIM_INFINITY
    return int(text) if text.isdigit() else None


def _parse_span(text: str) -> int | None:
    """'1min 30s' -> µs; 'infinity' -> None too (no manager gives a stop that long)."""
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)([a-z]+)", text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    if any(u not in SPAN_UNITS for _, u in parts):
        return None
    return round(sum(float(n) * SPAN_UNITS[u] for n, u in parts))


def _signal_number(name: str) -> int:
    return int(name) if name.isdigit() else signal.Signals[name if name.startswith("SIG") else "SIG" + name]


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except KeyError:
        raise RunError("user", f"user '{name}' does not exist on this host (the unit would "
                       "fail with status 217/USER)") from None


def _group(name: str) -> int:
    try:
        return grp.getgrgid(int(name)).gr_gid if name.isdigit() else grp.getgrnam(name).gr_gid
    except KeyError:
        raise RunError("group", f"group '{name}' does not exist on this host (the unit would "
                       "fail with status 216/GROUP)") from None


def build(spec: Spec, *, euid: int | None = None, defaults: ManagerDefaults | None = None) -> Process:
    """The process systemd would start for the unit, as data (no side effects but reads
    of /etc/passwd, /etc/group, the locale and the environment files)."""
    euid = os.geteuid() if euid is None else euid
    env = dict(manager_locale())
    env["PATH"] = manager_path()
    uid = gid = groups = None
    user = None
    if spec.user:
        pw = _user(spec.user)
        user = pw.pw_name
        gid = _group(spec.group) if spec.group else pw.pw_gid
        if euid == 0:
            uid = pw.pw_uid
            groups = tuple(os.getgrouplist(pw.pw_name, gid))
        elif pw.pw_uid != euid:
            raise RunError("permission", f"the job runs as user '{user}'; run `jobgen run` "
                           f"as root" + (f" (or as {user})" if pw.pw_uid != 0 else ""))
        else:
            gid = None  # already this user; keep the groups we have
        login = spec.user not in SYNTHESIZED_NO_LOGIN
        if login and pw.pw_dir and pw.pw_dir != "/":
            env["HOME"] = pw.pw_dir
        env["LOGNAME"] = env["USER"] = pw.pw_name
        if login and pw.pw_shell and pw.pw_shell not in NOLOGIN_SHELLS:
            env["SHELL"] = pw.pw_shell
    elif spec.group:
        gid = _group(spec.group) if euid == 0 else None
    env.update(spec.environment)
    env.update(load_env_files(spec.environment_files))
    defaults = manager_defaults() if defaults is None else defaults
    stop = spec.stop_timeout_usec if spec.stop_timeout_usec is not None else defaults.stop_timeout_usec
    return Process(
        tuple(spec.argv), env, spec.working_directory, uid, gid, groups, spec.umask,
        spec.no_new_privs, user, tuple(spec.credentials),
        rlimits=tuple((RLIMITS[n], soft, hard) for n, (soft, hard) in sorted(defaults.rlimits.items())),
        timeout=spec.timeout_usec / 1e6 if spec.timeout_usec is not None else None,
        kill_mode=spec.kill_mode, kill_signal=_signal_number(spec.kill_signal), stop_timeout=stop / 1e6,
        success_exit_status=tuple(spec.success_exit_status), lock_file=spec.lock_file,
        lock_files=tuple(spec.lock_files), conflict_outcome=spec.conflict_outcome)


# --------------------------------------------------------------------------- starting


def _child_setup(proc: Process, failed_at: int):
    """In the child, in systemd's order (exec_child in src/core/execute.c): resource
    limits while still privileged, then supplementary groups, gid, uid, then as the job's
    user the working directory and no_new_privs. A failing step writes its name (an EXIT
    key) to ``failed_at`` and reaches the parent as SubprocessError."""

    def step(name: str, action) -> None:
        try:
            action()
        except BaseException:
            os.write(failed_at, name.encode())
            raise

    def identity() -> None:
        if proc.groups is not None:
            os.setgroups(proc.groups)
        if proc.gid is not None:
            os.setresgid(proc.gid, proc.gid, proc.gid)
        if proc.uid is not None:
            os.setresuid(proc.uid, proc.uid, proc.uid)

    def setup() -> None:
        step("limits", lambda: _set_rlimits(proc.rlimits))
        step("user", identity)
        step("chdir", lambda: os.chdir(proc.cwd) if proc.cwd else None)
        if proc.no_new_privs:
            step("user", tree.no_new_privs)

    return setup


def _set_rlimits(limits: tuple[tuple[int, int, int], ...]) -> None:
    """setrlimit(2) each, or as near as allowed: a caller that may not raise a hard limit
    gets its own hard limit, as systemd's setrlimit_closest() does (rlimit-util.c)."""
    for res, soft, hard in limits:
        try:
            resource.setrlimit(res, (soft, hard))
        except (OSError, ValueError):
            _, have = resource.getrlimit(res)
            hard = _lower(hard, have)
            resource.setrlimit(res, (_lower(soft, hard), hard))


def _lower(a: int, b: int) -> int:
    inf = resource.RLIM_INFINITY
    return b if a == inf else a if b == inf else min(a, b)


def start(proc: Process, stdout, stderr) -> int:
    """Run the process to its end and return its status (128+N for signal N)."""
    return execute(proc, stdout, stderr).status


def execute(proc: Process, stdout, stderr) -> Ended:
    """Run the process to its end, as the unit runs: its lock file made first, stopped
    at its timeout, what it leaves behind stopped when its main process ends.

    stdout/stderr: binary file objects the job's output is copied to. jobgen run is a
    child subreaper, so it sees every process the job leaves behind, as a unit's cgroup.
    """
    prepare_lock_file(proc)
    tree.become_subreaper()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    # Ctrl-C in the caller's terminal, or a SIGTERM/SIGHUP to jobgen run, reaches only
    # jobgen (the job has its own session): pass it on to the job's session, as systemd's
    # stop signals the unit. One that arrives before the job exists is passed on then.
    # The signal starts the unit's stop as well: what is left of the job once
    # TimeoutStopSec= has passed gets SIGKILL, as systemctl stop does (systemd.kill(5)).
    pending: list[int] = []
    job: list[int] = []
    stops: list[_Stop] = []

    def forward(signum: int, _frame) -> None:
        if job:
            _signal_group(job[0], signum)
            if stops:
                stops[0].signalled()
        else:
            pending.append(signum)

    saved = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    creds = None
    try:
        creds = _credentials(proc) if proc.credentials else None
        if creds:
            proc = Process(**{**proc.__dict__, "env": {**proc.env, "CREDENTIALS_DIRECTORY": creds}})
        return _start(proc, stdout, stderr, out_r, out_w, err_r, err_w, job, pending, stops)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if creds:
            shutil.rmtree(creds, ignore_errors=True)


def prepare_lock_file(proc: Process) -> None:
    """The lock file as the unit finds it: made by systemd-tmpfiles from the snippet's own
    lines (mode 0600, the job's user), which also puts right an existing file's mode and
    owner as every boot does. Not root: it must exist and open for us, else one line
    saying what to run (flock(1) would only say 'Permission denied')."""
    if not proc.lock_file:
        return
    if os.geteuid() == 0:
        tool = shutil.which("systemd-tmpfiles", path="/usr/bin:/bin")
        if tool is None:
            raise RunError("lock-file", f"cannot make lock file {proc.lock_file}: systemd-tmpfiles "
                           "is not installed (the unit's lock file is made by it)")
        try:
            made = subprocess.run([tool, "--create", "-"], input="\n".join(proc.lock_files) + "\n",
                                  capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            raise RunError("lock-file", f"cannot make lock file {proc.lock_file}: systemd-tmpfiles "
                           "did not answer in 60s") from None
        except OSError as e:  # found but cannot be started (a broken installation)
            raise RunError("lock-file", f"cannot make lock file {proc.lock_file}: cannot run "
                           f"{tool}: {e.strerror}") from None
        if made.returncode != 0:
            why = (made.stderr.strip().splitlines() or [f"exit {made.returncode}"])[-1]
            raise RunError("lock-file", f"cannot make lock file {proc.lock_file} as its "
                           f"tmpfiles.d line says: systemd-tmpfiles: {why}")
        return
    try:
        os.close(os.open(proc.lock_file, os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC))
    except FileNotFoundError:
        raise RunError("lock-file", f"lock file {proc.lock_file} does not exist yet: run "
                       "`systemd-tmpfiles --create` as root (`jobgen apply` does; so does every "
                       "boot), or `jobgen run` as root, which makes it") from None
    except OSError as e:
        who = pwd.getpwuid(os.geteuid()).pw_name if _known_uid(os.geteuid()) else str(os.geteuid())
        raise RunError("permission", f"cannot open lock file {proc.lock_file} as user '{who}': "
                       f"{e.strerror} (it is 0600, the job's user's); run `jobgen run` as root") from None


def _known_uid(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def _credentials(proc: Process) -> str:
    """LoadCredential=: each file copied (as root, who reads it for systemd too) into a
    fresh directory that only the job's user can enter, files 0400 (systemd.exec(5)).
    A name systemd would refuse (a path such as '../x') or a source it would not read is
    refused before any file is touched: `check` refuses both, a plan made otherwise too."""
    for cred in proc.credentials:
        if problem := credential_problem(":".join(cred)):
            raise RunError("credentials", f"lock.credential: {problem}; nothing was read or written")
    folder = tempfile.mkdtemp(prefix="jobgen-credentials-", dir="/run" if os.access("/run", os.W_OK) else None)
    try:
        for name, source in proc.credentials:
            # O_NONBLOCK, then a regular file only: open(2) of a FIFO waits for a writer,
            # and signals are only queued until the job runs: Ctrl-C did nothing.
            fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "not a regular file", source)
                data = f.read(CREDENTIAL_SIZE_MAX + 1)
            if len(data) > CREDENTIAL_SIZE_MAX:
                shutil.rmtree(folder, ignore_errors=True)
                raise RunError("credentials", f"credential {source}: larger than {CREDENTIAL_SIZE_MAX // 1024} KiB, "
                               "systemd's limit for a credential (the unit would fail with status 243/CREDENTIALS)")
            target = os.path.join(folder, name)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            if proc.uid is not None:
                os.chown(target, proc.uid, proc.gid if proc.gid is not None else -1)
        if proc.uid is not None:
            os.chown(folder, proc.uid, proc.gid if proc.gid is not None else -1)
        os.chmod(folder, 0o500)
    except OSError as e:
        shutil.rmtree(folder, ignore_errors=True)
        raise RunError("credentials", f"credential {e.filename}: {e.strerror} (the unit would "
                       "fail with status 243/CREDENTIALS)") from None
    return folder


def _start(proc: Process, stdout, stderr, out_r, out_w, err_r, err_w, job, pending, stops) -> Ended:
    failed_r, failed_w = os.pipe()
    try:
        child = subprocess.Popen(
            proc.argv, env=proc.env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
            umask=proc.umask, start_new_session=True, preexec_fn=_child_setup(proc, failed_w),
            close_fds=True)
    except OSError as e:
        # Gone, not executable, or (E2BIG) its argv and environment past what execve(2)
        # takes: systemd's 203/EXEC for each. E2BIG was an internal error.
        raise RunError("exec", f"cannot run {proc.argv[0]}: {e.strerror}", e.errno) from None
    except subprocess.SubprocessError:
        os.close(failed_w)
        failed_w = -1
        raise _setup_failed(proc, os.read(failed_r, 64).decode()) from None
    finally:
        os.close(out_w)
        os.close(err_w)
        if failed_w >= 0:
            os.close(failed_w)
        os.close(failed_r)
    stop = _Stop(proc, child.pid)
    stops.append(stop)
    job.append(child.pid)  # the job's session and process group id
    for signum in pending:
        _signal_group(child.pid, signum)
        stop.signalled()
    relays = [threading.Thread(target=_relay, args=(fd, dst), daemon=True)
              for fd, dst in ((out_r, stdout), (err_r, stderr))]
    for t in relays:
        t.start()
    timer = None
    if proc.timeout is not None:
        timer = threading.Timer(proc.timeout, stop.timed_out)
        timer.daemon = True
        timer.start()
    _, raw = os.waitpid(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(raw)  # Popen must not wait for it again
    if timer is not None:
        timer.cancel()
    stop.main_gone()
    if tree.descendants():  # the unit's remaining processes are stopped when it ends
        stop.begin()
    tree.reap_all()
    stop.done.set()
    for t in relays:
        t.join()
    return _ended(raw, stop.timed, proc, stop.killed and stop.by_signal)


def _setup_failed(proc: Process, step: str) -> RunError:
    if step == "limits":
        return RunError("limits", "cannot set the unit's resource limits (the unit would fail "
                        "with status 205/LIMITS)")
    if step == "user":
        return RunError("user", f"cannot become user '{proc.user or 'root'}' (the unit would "
                        "fail with status 217/USER)")
    where = f"working directory {proc.cwd}" if proc.cwd else "the job's context"
    return RunError("chdir", f"cannot enter {where} as user '{proc.user or 'root'}' "
                    "(the unit would fail with status 200/CHDIR)")


class _Stop:
    """systemd's stop of a unit's processes (systemd.kill(5)): KillSignal= to the main
    process (KillMode=mixed) or to every process (control-group), then SIGKILL to every
    process left once TimeoutStopSec= has passed. Begun by TimeoutStartSec= running out,
    by the main process ending with others left behind, or by a stop signal to jobgen run
    (forwarded to the job as it came: ``signalled``)."""

    def __init__(self, proc: Process, main: int):
        self.proc, self.main = proc, main
        self.done = threading.Event()  # every process of the job is gone
        self.timed = False
        self.killed = False  # SIGKILL sent because TimeoutStopSec= ran out
        self.by_signal = False  # the stop began with a signal to jobgen run
        self._main_alive = True
        self._deadline: float | None = None
        # Reentrant: signalled() runs in a signal handler, in the thread that may be
        # inside begin() or main_gone() at that moment.
        self._lock = threading.RLock()
        self._killer: threading.Thread | None = None

    def signalled(self) -> None:
        """The stop signal already went to the job's process group: only the SIGKILL
        deadline is left to arm."""
        with self._lock:
            if self._deadline is not None:
                return
            self.by_signal = True
            self._deadline = time.monotonic() + self.proc.stop_timeout
            self._killer = threading.Thread(target=self._kill_at_deadline, daemon=True)
            self._killer.start()

    def timed_out(self) -> None:
        self.timed = True
        self.begin()

    def main_gone(self) -> None:
        with self._lock:
            self._main_alive = False
            # mixed: the stop signal went to the main process only; once it is gone
            # the rest get SIGKILL at once (service.c: final SIGTERM reaches no one).
            if self._deadline is not None and self.proc.kill_mode == "mixed":
                self._deadline = time.monotonic()

    def begin(self) -> None:
        with self._lock:
            if self._deadline is not None:
                return
            if self.proc.kill_mode == "mixed":
                if self._main_alive:
                    _signal_pid(self.main, self.proc.kill_signal)
                    self._deadline = time.monotonic() + self.proc.stop_timeout
                else:
                    self._deadline = time.monotonic()
            else:
                tree.signal_tree(None, self.proc.kill_signal)
                self._deadline = time.monotonic() + self.proc.stop_timeout
            self._killer = threading.Thread(target=self._kill_at_deadline, daemon=True)
            self._killer.start()

    def _kill_at_deadline(self) -> None:
        while not self.done.is_set():
            with self._lock:
                left = self._deadline - time.monotonic()
            if left <= 0:
                break
            self.done.wait(min(left, 0.1))
        while not self.done.is_set():
            self.killed = True
            tree.signal_tree(None, signal.SIGKILL)
            self.done.wait(0.05)


def _signal_pid(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _ended(raw: int, timed_out: bool, proc: Process, stop_timed_out: bool = False) -> Ended:
    """The wait status as systemd names it for the unit's reporter (service.c,
    service_sigchld_event: a oneshot's only clean exits are 0 and SuccessExitStatus=)."""
    if os.WIFEXITED(raw):
        code = os.WEXITSTATUS(raw)
        exit_code, exit_status, status = "exited", str(code), code
        result = "success" if code == 0 or code in proc.success_exit_status else "exit-code"
    else:
        sig = os.WTERMSIG(raw)
        dumped = os.WCOREDUMP(raw)
        exit_code, exit_status, status = "dumped" if dumped else "killed", _signal_name(sig), 128 + sig
        result = "core-dump" if dumped else "signal"
    why = ""
    if timed_out:
        result, status = "timeout", TIMEOUT_EXIT
        why = (f"ran past its timeout of {proc.timeout:g}s: stopped with {_signal_name(proc.kill_signal)} "
               f"(KillMode={proc.kill_mode}), SIGKILL after {proc.stop_timeout:g}s; exit {status}")
    elif stop_timed_out:
        # systemctl stop whose TimeoutStopSec= ran out: SIGKILL, and the unit's result is
        # 'timeout' (service.c: service_enter_signal(..., SERVICE_FAILURE_TIMEOUT)).
        result = "timeout"
        why = f"did not stop within {proc.stop_timeout:g}s of the stop signal (TimeoutStopSec=): SIGKILL; exit {status}"
    word = outcome(result, exit_code, exit_status, proc.conflict_outcome)
    if result == "success" and exit_status == str(CONFLICT_EXIT):
        why = "another run held the lock; the command did not run"
    return Ended(status, result, exit_code, exit_status, word, why)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name.removeprefix("SIG")
    except ValueError:
        return str(sig)


def outcome(result: str, exit_code: str, exit_status: str, conflict_outcome: str) -> str:
    """JOBGEN_OUTCOME as the unit's reporter computes it (plan.REPORTER), from the same
    table (outcomes.BY_RESULT)."""
    if (result, exit_code, exit_status) == ("success", "exited", str(CONFLICT_EXIT)):
        return conflict_outcome
    return by_result(result, exit_code, exit_status)


def _signal_group(pgid: int, signum: int) -> None:
    """The job's process group only, as a terminal signals its foreground group: a lock
    holder in it passes the signal on to its own command's group itself."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _relay(fd: int, dst) -> None:
    """Copy the job's output to ours; if ours is gone (a closed pipe), keep reading so the
    job never blocks on a full pipe, and drop what it writes."""
    with os.fdopen(fd, "rb", buffering=0) as src:
        while chunk := src.read(65536):
            if dst is None:
                continue
            try:
                dst.write(chunk)
                dst.flush()
            except (OSError, ValueError):
                dst = None
