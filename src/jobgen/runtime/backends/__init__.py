"""Cluster lock backends for `jobgen lock`: the scheme table, the parsed target, the errors.

A backend module is chosen by the URL scheme through SCHEMES and imported only when used,
so a host that runs Redis-locked jobs never needs PyMySQL or psycopg (and `jobgen render`
never imports any of them). Every backend module provides

    acquire(target: Target, name: str, opts: Options) -> Held | None

returning None when the lock is held elsewhere (after waiting up to opts.wait seconds), and
raising Unreachable / AuthFailed / ConfigError / ServerError otherwise. The Held object is
the lock for the whole run: `token` (fencing token or None), `watch(lost)` (starts a daemon
thread that calls lost(event, detail) once if the lock can no longer be vouched for),
`release()` (True if it was still ours) and `close()`.
"""

from __future__ import annotations

import os
import select
import threading
from collections import namedtuple
from collections.abc import Callable, Mapping

from jobgen.contract import locks
from jobgen.contract.oneline import one_line

# The scheme table, name rules, ${VAR} pattern and URL checks are the lock contract,
# shared with `jobgen check`: jobgen.contract.locks.
SCHEMES = locks.SCHEMES

# How often a SQL lock session is asked whether the lock is still ours, besides the
# moment its socket turns readable (docs/cluster-locks.md: loss detection bounds).
SESSION_CHECK_INTERVAL = 1.0
MIN_CHECK_GAP = 0.05  # after a check woken by the socket, so a live session cannot spin us

# What a lock is called on its server (Redis key, GET_LOCK name, advisory key) is
# contract.locks.SERVER_NAMES: `jobgen plan` shows the same names without importing this.


# The secrets this process expanded into a Target (a password, and anything a `${VAR}`
# put before the '@'). Every LockError text and describe() line has them replaced, so no
# line the holder or the queue commands print carries one, whatever a client library
# wrote into its exception.
_SECRETS: set[str] = set()
REDACTED = "***"


def redact(text: str) -> str:
    for secret in sorted(_SECRETS, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def _secret(value: str | None) -> str | None:
    if value:
        _SECRETS.add(value)
    return value


class LockError(Exception):
    """A lock could not be taken or kept; the subclass decides the holder's exit code."""

    def __str__(self) -> str:
        return redact(super().__str__())


class ConfigError(LockError):
    """Bad URL, unknown scheme, missing client library, unreadable password file."""


class Unreachable(LockError):
    """The lock server did not answer within the connect timeout, or the connection broke."""


class AuthFailed(LockError):
    """The lock server refused the credentials."""


class ServerError(LockError):
    """The server answered, but not with a lock decision (e.g. GET_LOCK returned NULL)."""


# Records are collections.namedtuple: typing costs `jobgen lock` ~5 ms a run (contract/locks.py).
class Target(namedtuple("Target", "scheme host port username password path query")):
    """A backend URL after `${VAR}` expansion, split so passwords need no percent-encoding.

    scheme, host: str; port: int | None; username: str | None; password: str | None (never
    in repr(): display() is what is shown); path: database number (Redis) or database name
    (SQL), without the leading '/'; query: dict[str, str]."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Target({self.display()!r})"

    def display(self) -> str:
        """The URL as logged: never the password, nor a user name that holds a secret."""
        user = f"{redact(self.username)}@" if self.username else ""
        port = f":{self.port}" if self.port else ""
        path = f"/{self.path}" if self.path else ""
        return f"{self.scheme}://{user}{self.host}{port}{path}"


class Options(namedtuple("Options", "wait ttl connect_timeout")):
    """wait: seconds to wait for a held lock, 0 = one attempt; ttl: Redis lease length,
    seconds; connect_timeout: bound on every network round trip, seconds."""

    __slots__ = ()


def expand(text: str, env: Mapping[str, str]) -> str:
    """Expand `${VAR}` from env; an undefined variable is a configuration error.

    jobgen writes the backend URL into the unit literally (`$${REDIS_PASSWORD}` in
    ExecStart=, see systemd.service(5) "Command lines"), so the secret reaches this process
    through its environment (EnvironmentFile=) and never appears in unit text or argv.
    """

    def one(m: re.Match[str]) -> str:
        var = m.group(1)
        if var not in env:
            raise ConfigError(f"${{{var}}} is not set in the environment")
        return env[var]

    return locks.VARIABLE.sub(one, text)


def parse_url(url: str, env: Mapping[str, str]) -> Target:
    """The contract's checks first (exactly what `jobgen check` refuses), then each part
    expanded on its own, so an expanded password may contain '@', '/' or ':'."""
    try:
        raw = locks.split_url(url)
    except locks.UrlProblem as e:
        raise ConfigError(f"lock backend URL: {e}") from None
    port = expand(raw.port, env)
    if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ConfigError(f"lock backend URL: the port {raw.port} is {port!r}, not a port number")
    host = expand(raw.host, env)
    if not host:
        raise ConfigError(f"lock backend URL: the host {raw.host} is empty")
    username = expand(raw.username, env) if raw.username is not None else None
    if raw.username and locks.VARIABLE.search(raw.username):
        _secret(username)  # split_url refuses it; should one get here, it is never shown
    query = {k: expand(v, env) for k, v in raw.query}
    for key, value in query.items():
        if locks.is_secret_key(key):
            _secret(value)
    return Target(
        scheme=raw.scheme,
        host=host,
        port=int(port) if port else None,
        username=username,
        password=_secret(expand(raw.password, env)) if raw.password is not None else None,
        path=expand(raw.path, env),
        query=query,
    )


# A password file is read up to this: systemd's limit for a credential (LoadCredential=, how
# such a file usually arrives; runtime/run.py CREDENTIAL_SIZE_MAX). Past it, it is not a
# password file (--password-file /dev/zero was read until memory ran out).
PASSWORD_FILE_MAX = 1024 * 1024


def read_password(path_text: str, env: Mapping[str, str]) -> str:
    """The password in --password-file ``path_text`` (${VAR} expanded), without its line
    break, for `jobgen lock` and the queue commands alike; ConfigError when the file cannot
    be read, is bigger than PASSWORD_FILE_MAX, or is not UTF-8 text (a URL is text)."""
    path = expand(path_text, env)
    try:
        # A FIFO is read as a file is (a secret handed over by another process); its open(2)
        # and read(2) wait for the writer, and a stop signal ends that wait (lock.py's
        # "reading" phase; the queue verbs' default handlers).
        with open(path, "rb") as f:
            data = f.read(PASSWORD_FILE_MAX + 1)
    except OSError as e:
        raise ConfigError(f"password file {one_line(path)}: {e.strerror}") from None
    if len(data) > PASSWORD_FILE_MAX:
        raise ConfigError(f"password file {one_line(path)}: more than {PASSWORD_FILE_MAX} bytes, not a password")
    try:
        return data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ConfigError(f"password file {one_line(path)}: not UTF-8 text") from None


def with_password(target: Target, password: str) -> Target:
    return Target(target.scheme, target.host, target.port, target.username, _secret(password),
                  target.path, target.query)


def load(scheme: str):
    """Import the backend module and its client library; a missing library names its extra.

    The client is imported here, before any connection, so a host without it fails as a
    configuration error (and the backend's own lazy imports are then cache hits).
    """
    spec = locks.SCHEMES[scheme]
    module, client, extra = spec.module, spec.client, spec.extra
    import importlib

    try:
        importlib.import_module(client)
    except ImportError as e:
        from jobgen.runtime.installed import how_to_get

        raise ConfigError(
            f"{scheme}:// needs the {client} client library ({describe(e)}): "
            f"{how_to_get(extra, client)}"
        ) from None
    return importlib.import_module(f"jobgen.runtime.backends.{module}")


def bounded(fn: Callable[[], object], timeout: float, what: str) -> object:
    """Run fn in a daemon thread and give up after timeout seconds.

    For client calls that have no read timeout of their own (libpq waits forever on a
    server that accepted the connection and stopped answering). On timeout the call is
    abandoned; the holder then exits, and closing the process closes the socket.
    """
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name=f"jobgen-{what}", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise Unreachable(f"{what}: no answer within {timeout:g}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


class Watcher:
    """A daemon thread calling check() every interval; the first failure reports loss once.

    check() returns None while the lock is still ours, or (event, detail) when it is not;
    an exception from check() (or a check that outlives `timeout`) is `failure_event`.
    With `wake_fd` (the lock session's socket) a check also runs the moment the socket
    turns readable: a lock session is idle, so the server writing to it, or closing it
    (KILL, pg_terminate_backend, shutdown), is news about the lock.
    """

    def __init__(self, check: Callable[[], tuple[str, str] | None], interval: float,
                 timeout: float, name: str, failure_event: str = "connection-lost",
                 wake_fd: int | None = None) -> None:
        self._check = check
        self._failure_event = failure_event
        self._interval = interval
        self._timeout = timeout
        self._stop = threading.Event()
        self._stop_r, self._stop_w = os.pipe()  # wakes select() at once on stop()
        self._wake_fd = wake_fd
        self._thread: threading.Thread | None = None
        self._name = name

    def _sleep(self) -> bool:
        """Wait for the interval, the socket or stop(); True when stopped."""
        fds = [self._stop_r] + ([self._wake_fd] if self._wake_fd is not None else [])
        try:
            ready, _, _ = select.select(fds, [], [], self._interval)
        except (OSError, ValueError):  # the socket was closed under us: check now
            ready = []
            self._wake_fd = None
        if self._stop_r in ready or self._stop.is_set():
            return True
        if ready:  # readable socket: give a live session's stray message time to be read
            self._stop.wait(MIN_CHECK_GAP)
        return self._stop.is_set()

    def start(self, lost: Callable[[str, str], None]) -> None:
        def loop() -> None:
            while not self._sleep():
                try:
                    verdict = bounded(self._check, self._timeout, self._name)
                except LockError as e:  # any failure to vouch for the lock is a loss
                    verdict = (self._failure_event, str(e))
                except Exception as e:
                    verdict = (self._failure_event, describe(e))
                if self._stop.is_set():
                    return
                if verdict is not None:
                    lost(*verdict)  # type: ignore[misc]
                    return

        self._thread = threading.Thread(target=loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        os.write(self._stop_w, b"x")
        if self._thread is not None:
            self._thread.join(self._timeout + 1)


def describe(e: BaseException) -> str:
    """One line for a log: the exception's class and first line, never a multi-line dump."""
    text = redact(str(e)).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class SessionHeld:
    """A lock that lives as long as one SQL session (MariaDB GET_LOCK, PostgreSQL advisory
    locks): one dedicated connection, a watcher asking the server every connect-timeout
    whether the lock is still ours, and a bounded release. Backends supply ``check()``
    (None while ours, else (event, detail)) and ``unlock() -> bool``."""

    token: str | None = None  # neither server keeps a counter to fence with
    deadline: float | None = None  # no lease to run out: the lock lasts as long as the session
    on_deadline = None

    def __init__(self, conn, opts: Options) -> None:
        self._conn = conn
        self._opts = opts
        self._busy = threading.Lock()  # the connection is not shared across threads
        self._watcher: Watcher | None = None

    def check(self) -> tuple[str, str] | None:
        raise NotImplementedError

    def unlock(self) -> bool:
        raise NotImplementedError

    def _checked(self) -> tuple[str, str] | None:
        with self._busy:
            return self.check()

    def socket_fd(self) -> int | None:
        """The session socket's file descriptor, for the watcher to wake on."""
        return None

    def watch(self, lost: Callable[[str, str], None]) -> None:
        self._watcher = Watcher(self._checked, SESSION_CHECK_INTERVAL,
                                self._opts.connect_timeout + 1, "jobgen-session",
                                wake_fd=self.socket_fd())
        self._watcher.start(lost)

    def release(self) -> bool:
        if self._watcher is not None:
            self._watcher.stop()
        # A watcher check abandoned mid-call may still own the connection: do not wait on it.
        if not self._busy.acquire(timeout=self._opts.connect_timeout):
            raise Unreachable("connection busy with an unanswered check")
        try:
            return self.unlock()
        finally:
            self._busy.release()

    def close(self) -> None:
        try:
            self._conn.close()  # ends the session: the server frees whatever it still holds
        except Exception:
            pass
