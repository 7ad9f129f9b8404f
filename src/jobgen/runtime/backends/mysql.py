"""MariaDB / MySQL: GET_LOCK on one dedicated connection kept for the whole run.
Client: PyMySQL (extra `jobgen[mariadb]`), imported here only.

A GET_LOCK lock belongs to the connection (session) that took it: the server frees it when
that connection ends, and RELEASE_LOCK from any other connection does nothing. So the
holder opens exactly one connection (no pool that could swap it), keeps it for the run,
and releases on it. GET_LOCK answers 1 (ours), 0 (timed out: held elsewhere) or NULL (an
error, e.g. the thread was killed) -- the three are told apart.
"""

from __future__ import annotations

import time

from jobgen.contract import locks
from jobgen.runtime.backends import (AuthFailed, ConfigError, Options, ServerError, SessionHeld, Target,
                             Unreachable, bounded, describe)

# Server error numbers -> outcome (https://mariadb.com/kb/en/mariadb-error-codes/).
AUTH_ERRNOS = {
    1044: "access denied to the database",  # ER_DBACCESS_DENIED_ERROR
    1045: "access denied (user or password)",  # ER_ACCESS_DENIED_ERROR
    1698: "access denied (user or password)",  # ER_ACCESS_DENIED_NO_PASSWORD_ERROR
}
CONFIG_ERRNOS = {
    1049: "unknown database",  # ER_BAD_DB_ERROR
}
# Client-side errors (2xxx) that mean the server is not reachable or went away.
UNREACHABLE_ERRNOS = {2003, 2006, 2013, 2055}

# A single GET_LOCK waits at most this long on the server, so the client's read timeout
# (connect timeout + this) still bounds every round trip when --wait is long.
WAIT_SLICE = 5.0


def _errno(e: BaseException) -> int | None:
    args = getattr(e, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def _call(fn):
    import pymysql

    try:
        return fn()
    except pymysql.err.MySQLError as e:
        code = _errno(e)
        if code in AUTH_ERRNOS:
            raise AuthFailed(f"server refused the credentials: {AUTH_ERRNOS[code]} ({describe(e)})") from None
        if code in CONFIG_ERRNOS:
            raise ConfigError(f"{CONFIG_ERRNOS[code]} ({describe(e)})") from None
        if code in UNREACHABLE_ERRNOS or isinstance(e, pymysql.err.OperationalError):
            raise Unreachable(describe(e)) from None
        raise ServerError(describe(e)) from None
    except OSError as e:
        raise Unreachable(describe(e)) from None


def _connection_class():
    """PyMySQL's Connection, less a TLS context built for nothing.

    With no ssl_* option PyMySQL (2.2+) asks for TLS when the server offers it, verifying
    nothing ("PREFERRED": _create_ssl_ctx({}) sets CERT_NONE and no host name check), yet
    builds that context with ssl.create_default_context(), which reads every CA
    certificate of the system first: most of the 73 ms `jobgen lock` on MariaDB spent
    beyond the interpreter and `import pymysql` (bench/results-holder.md). Here that one
    case gets the context PyMySQL ends up with, minus the certificates it never consults;
    any ssl_* option goes through PyMySQL's own code as before."""
    import ssl

    import pymysql.connections

    class Connection(pymysql.connections.Connection):
        def _create_ssl_ctx(self, sslp):
            if sslp != {}:
                return super()._create_ssl_ctx(sslp)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # TLS 1.2 at least, as the default context
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            return ctx

    return Connection


def _connect(target: Target, opts: Options):
    connection = _connection_class()
    # The query holds only ssl_* and charset (contract.locks.SCHEMES checked it).
    ssl = {k.removeprefix("ssl_"): v for k, v in target.query.items() if k.startswith("ssl_")}
    # PyMySQL reads the server greeting under read_timeout (connect timeout + WAIT_SLICE):
    # bound the whole handshake by the connect timeout instead.
    return bounded(lambda: _call(lambda: connection(
        host=target.host,
        port=target.port or 3306,
        user=target.username or "",
        password=target.password or "",
        database=target.path or None,
        connect_timeout=opts.connect_timeout,
        read_timeout=opts.connect_timeout + WAIT_SLICE,
        write_timeout=opts.connect_timeout,
        autocommit=True,
        charset=target.query.get("charset", "utf8mb4"),
        ssl=ssl or None,
    )), opts.connect_timeout, "connect")


def _scalar(conn, sql: str, *args):
    with conn.cursor() as cur:
        cur.execute(sql, args)
        row = cur.fetchone()
    return row[0] if row else None


def acquire(target: Target, name: str, opts: Options) -> "Held | None":
    conn = _connect(target, opts)
    lname = locks.SERVER_NAMES["mysql"].of(name)
    deadline = time.monotonic() + opts.wait
    try:
        while True:
            slice_ = max(0.0, min(deadline - time.monotonic(), WAIT_SLICE))
            got = _call(lambda: _scalar(conn, "SELECT GET_LOCK(%s, %s)", lname, slice_))
            if got == 1:
                return Held(conn, lname, opts)
            if got is None:
                raise ServerError(f"GET_LOCK({lname!r}) returned NULL (server-side error)")
            if time.monotonic() >= deadline:  # got == 0: held by another session
                conn.close()
                return None
    except BaseException:
        try:
            conn.close()  # ends the session: frees the lock if the answer was lost in transit
        except Exception:
            pass
        raise


class Held(SessionHeld):
    def __init__(self, conn, lname: str, opts: Options) -> None:
        super().__init__(conn, opts)
        self._name = lname

    def socket_fd(self) -> int | None:
        sock = getattr(self._conn, "_sock", None)  # PyMySQL keeps its socket here
        return sock.fileno() if sock is not None else None

    def check(self) -> tuple[str, str] | None:
        ours = _call(lambda: _scalar(self._conn, "SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", self._name))
        if ours != 1:
            return ("connection-lost", f"lock {self._name!r} is no longer held by this session")
        return None

    def unlock(self) -> bool:
        return bounded(lambda: _call(lambda: _scalar(self._conn, "SELECT RELEASE_LOCK(%s)", self._name)),
                       self._opts.connect_timeout, "RELEASE_LOCK") == 1
