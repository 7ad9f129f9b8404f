"""`jobgen run`: start a job's process the way systemd starts the unit's (systemd.exec(5)),
from the same plan (compiler/plan.RunSpec): the unit's ExecStart= argv, and

- credentials: User= with the user's primary group when Group= is not given, and the
  supplementary groups of the group database (initgroups(3)), as systemd does;
- environment built from scratch, never the caller's: PATH as the service manager sets it,
  the system locale (LANG, LC_*), HOME/USER/LOGNAME/SHELL from the user's passwd entry
  (HOME left out when it is '/' or empty, SHELL when it is a nologin placeholder, as
  systemd's "clean" user credentials), then Environment=, then EnvironmentFile= (later
  wins), parsed as systemd parses them (parse_env_file below);
- working directory (entered as the job's user), UMask= 0022, stdin /dev/null;
- its own session with no controlling terminal (setsid): the job cannot open /dev/tty or
  push keystrokes into the caller's terminal (TIOCSTI needs it as controlling tty);
  stdout/stderr reach the caller through pipes jobgen relays, never the terminal itself;
- no_new_privs when the unit has NoNewPrivileges=yes (hardening default or strict);
- LoadCredential=NAME:PATH: the file copied into a private directory only the job's user
  can read, named by $CREDENTIALS_DIRECTORY, removed after the run.

Not reproduced (a unit-only context): sandboxing (PrivateTmp=, ProtectSystem=, ...),
the unit's cgroup, INVOCATION_ID/JOURNAL_STREAM/SYSTEMD_EXEC_PID.

Pure building (build) is separate from starting (start): a test can compare the two.
This module never prints or exits: cli/run.py does.
"""

from __future__ import annotations

import glob
import grp
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Protocol

from jobgen.contract.locks import credential_problem
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

# Failures before the job's program runs -> (exit code, systemd's name for the same failure).
# The codes are systemd's own exec status codes (systemd.exec(5) "Process Exit Codes"),
# so `jobgen run` ends as the unit's ExecStart= would; an environment file systemd fails
# before spawning anything (result 'resources'), so it gets EX_CONFIG.
EXIT: dict[str, tuple[int, str]] = {
    "chdir": (200, "CHDIR"),
    "exec": (203, "EXEC"),
    "group": (216, "GROUP"),
    "user": (217, "USER"),
    "permission": (77, "NOPERM"),  # not root: cannot become the job's user
    "environment-file": (78, "CONFIG"),
    "credentials": (243, "CREDENTIALS"),
}


class RunError(Exception):
    def __init__(self, outcome: str, message: str) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.code = EXIT[outcome][0]


class Spec(Protocol):  # compiler.plan.RunSpec (runtime does not import the compiler)
    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    working_directory: str | None
    user: str | None
    group: str | None
    environment_files: tuple[str, ...]
    no_new_privs: bool
    umask: int
    credentials: tuple[tuple[str, str], ...]


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
                with open(path, encoding="utf-8", errors="surrogateescape") as f:
                    out += parse_env_file(f.read())
            except OSError as e:
                if optional:
                    continue
                raise RunError("environment-file", f"environment file {path}: {e.strerror} "
                               "(the unit would fail the same way; '-/path' makes it optional)")
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


def build(spec: Spec, *, euid: int | None = None) -> Process:
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
                           f"as root (or as {user})")
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
    return Process(tuple(spec.argv), env, spec.working_directory, uid, gid, groups,
                   spec.umask, spec.no_new_privs, user, tuple(spec.credentials))


# --------------------------------------------------------------------------- starting


def _child_setup(proc: Process):
    """After the identity change (Popen applies user/group/groups first), as the job's
    user: enter the working directory (systemd does it as the user too), then
    no_new_privs. A failure reaches the parent as SubprocessError."""

    def setup() -> None:
        if proc.cwd:
            os.chdir(proc.cwd)
        if proc.no_new_privs:
            tree.no_new_privs()

    return setup


def start(proc: Process, stdout, stderr) -> int:
    """Run the process to its end and return its status (128+N for signal N).

    stdout/stderr: binary file objects the job's output is copied to. jobgen run is a
    child subreaper: what the job leaves behind is stopped (SIGTERM, SIGKILL after 10 s)
    when its main process ends, as a unit's remaining processes are.
    """
    tree.become_subreaper()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    # Ctrl-C in the caller's terminal, or a SIGTERM/SIGHUP to jobgen run, reaches only
    # jobgen (the job has its own session): pass it on to the job's session, as systemd's
    # stop signals the unit. One that arrives before the job exists is passed on then.
    pending: list[int] = []
    job: list[int] = []

    def forward(signum: int, _frame) -> None:
        if job:
            _signal_group(job[0], signum)
        else:
            pending.append(signum)

    saved = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    creds = None
    try:
        creds = _credentials(proc) if proc.credentials else None
        if creds:
            proc = Process(**{**proc.__dict__, "env": {**proc.env, "CREDENTIALS_DIRECTORY": creds}})
        return _start(proc, stdout, stderr, out_r, out_w, err_r, err_w, job, pending)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if creds:
            shutil.rmtree(creds, ignore_errors=True)


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
            with open(source, "rb") as f:
                data = f.read()
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


def _start(proc: Process, stdout, stderr, out_r, out_w, err_r, err_w, job, pending) -> int:
    try:
        child = subprocess.Popen(
            proc.argv, env=proc.env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
            user=proc.uid, group=proc.gid, extra_groups=proc.groups, umask=proc.umask,
            start_new_session=True, preexec_fn=_child_setup(proc), close_fds=True)
    except FileNotFoundError as e:
        raise RunError("exec", f"cannot run {proc.argv[0]}: {e.strerror}") from None
    except PermissionError as e:
        raise RunError("exec", f"cannot run {proc.argv[0]}: {e.strerror}") from None
    except subprocess.SubprocessError:
        where = f"working directory {proc.cwd}" if proc.cwd else "the job's context"
        raise RunError("chdir", f"cannot enter {where} as user '{proc.user or 'root'}' "
                       "(the unit would fail with status 200/CHDIR)") from None
    finally:
        os.close(out_w)
        os.close(err_w)
    job.append(child.pid)  # the job's session and process group id
    for signum in pending:
        _signal_group(child.pid, signum)
    relays = [threading.Thread(target=_relay, args=(fd, dst), daemon=True)
              for fd, dst in ((out_r, stdout), (err_r, stderr))]
    for t in relays:
        t.start()
    status = child.wait()
    if tree.descendants():  # the unit's remaining processes are killed when it ends
        tree.signal_tree(None, signal.SIGTERM)
        done = threading.Event()
        killer = threading.Thread(target=_kill_later, args=(done,), daemon=True)
        killer.start()
        tree.reap_all()
        done.set()
    for t in relays:
        t.join()
    return 128 - status if status < 0 else status


def _signal_group(pgid: int, signum: int) -> None:
    """The job's process group only, as a terminal signals its foreground group: a lock
    holder in it passes the signal on to its own command's group itself."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_later(done: threading.Event, grace: float = 10.0) -> None:
    if done.wait(grace):
        return
    while not done.is_set():
        tree.signal_tree(None, signal.SIGKILL)
        done.wait(0.05)


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
