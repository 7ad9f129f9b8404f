"""PostgreSQL: a session-level advisory lock on one dedicated connection.
Client: psycopg 3 (extra `jobgen[postgres]`), imported here only.

Session-level (not transaction-level) so the lock lives exactly as long as the connection:
the server frees it when the session ends, including when the holder is SIGKILLed.
Advisory locks are per database: every node must name the same database in its URL.

The 64-bit key, so other tools can take the same lock (docs/cluster-locks.md):
    key = first 8 bytes of sha256(UTF-8 "jobgen:" + name), big-endian, signed int64
    SQL: ('x' || left(encode(sha256(convert_to('jobgen:' || name, 'UTF8')), 'hex'), 16))::bit(64)::bigint
"""

from __future__ import annotations

import math

from jobgen.contract import locks
from jobgen.runtime.backends import (AuthFailed, ConfigError, Options, SessionHeld, Target, Unreachable,
                             bounded, describe)

# SQLSTATE -> outcome (PostgreSQL manual, Appendix A "Error Codes").
AUTH_SQLSTATES = {"28000", "28P01"}  # invalid_authorization_specification, invalid_password
CONFIG_SQLSTATES = {"3D000"}  # invalid_catalog_name: the database does not exist
LOCK_TIMEOUT_SQLSTATE = "55P03"  # lock_not_available: lock_timeout ran out -> conflict
# Connection failures carry no SQLSTATE in libpq; their messages are stable server texts.
AUTH_MESSAGES = ("password authentication failed", "no password supplied",
                 "pg_hba.conf rejects", "no pg_hba.conf entry")
CONFIG_MESSAGES = ("does not exist", "invalid connection option", "invalid sslmode value",
                   "invalid integer value")

# libpq's connect_timeout is whole seconds and at least 2 (libpq "Parameter Key Words").
MIN_CONNECT_TIMEOUT = 2


def _classify(e: BaseException) -> Exception:
    sqlstate = getattr(e, "sqlstate", None)
    text = str(e)
    if sqlstate in AUTH_SQLSTATES or any(m in text for m in AUTH_MESSAGES):
        return AuthFailed(f"server refused the credentials ({describe(e)})")
    if sqlstate in CONFIG_SQLSTATES or any(m in text for m in CONFIG_MESSAGES):
        return ConfigError(describe(e))
    return Unreachable(describe(e))


def _call(fn):
    import psycopg

    try:
        return fn()
    except psycopg.errors.LockNotAvailable:
        raise
    except (psycopg.Error, OSError) as e:
        raise _classify(e) from None


def _connect(target: Target, opts: Options):
    import psycopg

    params = dict(target.query)  # libpq keywords (sslmode, sslrootcert, ...): libpq checks them
    # libpq's password= may come from the query (as ${VAR}); the userinfo one wins.
    password = target.password or params.pop("password", None)
    params.pop("password", None)
    params.setdefault("connect_timeout", str(max(MIN_CONNECT_TIMEOUT, math.ceil(opts.connect_timeout))))
    # Notice a silent peer while a query is in flight (TCP_USER_TIMEOUT, Linux).
    params.setdefault("tcp_user_timeout", str(int(opts.connect_timeout * 1000)))
    params.setdefault("application_name", "jobgen-lock")
    return _call(lambda: bounded(lambda: psycopg.connect(
        host=target.host,
        port=target.port or 5432,
        user=target.username or None,
        password=password or None,
        dbname=target.path or None,
        autocommit=True,
        **params,
    ), opts.connect_timeout + 1, "connect"))


def _scalar(conn, sql: str, *args):
    return conn.execute(sql, args).fetchone()[0]


def acquire(target: Target, name: str, opts: Options) -> "Held | None":
    import psycopg

    conn = _connect(target, opts)
    key = locks.SERVER_NAMES["postgres"].of(name)
    try:
        if opts.wait <= 0:
            got = _call(lambda: bounded(
                lambda: _scalar(conn, "SELECT pg_try_advisory_lock(%s)", key),
                opts.connect_timeout, "pg_try_advisory_lock"))
        else:
            # The server enforces the bound (lock_timeout); the client bound adds the round trip.
            def wait_for_it() -> bool:
                conn.execute("SELECT set_config('lock_timeout', %s, false)",
                             (f"{max(1, int(opts.wait * 1000))}ms",))
                try:
                    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                except psycopg.errors.LockNotAvailable:
                    return False
                conn.execute("SELECT set_config('lock_timeout', '0', false)")
                return True

            got = _call(lambda: bounded(wait_for_it, opts.wait + opts.connect_timeout,
                                        "pg_advisory_lock"))
    except BaseException:
        _close(conn)  # ends the session: frees the lock if the answer was lost in transit
        raise
    if not got:
        _close(conn)
        return None
    return Held(conn, key, opts)


def _close(conn) -> None:
    try:
        conn.close()
    except Exception:
        pass


class Held(SessionHeld):
    def __init__(self, conn, key: int, opts: Options) -> None:
        super().__init__(conn, opts)
        self._key = key

    def socket_fd(self) -> int | None:
        try:
            return self._conn.fileno()
        except Exception:
            return None

    def check(self) -> tuple[str, str] | None:
        _call(lambda: self._conn.execute("SELECT 1").fetchone())
        return None  # the session is alive, so its session-level lock is still held

    def unlock(self) -> bool:
        return bool(_call(lambda: bounded(
            lambda: _scalar(self._conn, "SELECT pg_advisory_unlock(%s)", self._key),
            self._opts.connect_timeout, "pg_advisory_unlock")))
