"""The lock contract: what `jobgen check` accepts is exactly what `jobgen lock` accepts.

Compile time (compiler/validate.py, compiler/plan.py) and run time (runtime/lock.py,
runtime/backends/) both ask this module, and nothing else, for

- lock names per scope (NAME_RULES, name_problem),
- backend schemes, their client library and pip extra, their URL rules (SCHEMES),
- the ``${VAR}`` pattern the holder expands from its environment (VARIABLE),
- URL splitting and every check that needs no server (split_url, url_problem),
- the holder's exit codes, the conflict code 75 among them (EXIT, CONFLICT_EXIT),
- what a lock is called on each server (redis_keys, get_lock_name, advisory_key,
  SERVER_NAMES): the backends take that name and `jobgen plan` shows it.

tests/test_lock_contract.py runs one table of names and URLs through both `jobgen check`
and `jobgen lock` and asserts they agree. Messages never repeat a password or a URL.
Pure: no I/O, no imports from the rest of jobgen.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import namedtuple
from collections.abc import Callable

from jobgen.contract.digest import sha256

# The records here are collections.namedtuple, not typing.NamedTuple: `jobgen lock` loads
# this module in front of every run of a cluster-locked job, and `import typing` alone
# costs it about 5 ms of CPU (tests/test_lock_start_up.py keeps typing out of it).

# --------------------------------------------------------------------------- exit codes

# Outcome -> (exit code, meaning). Codes follow sysexits.h where one fits; 75 (EX_TEMPFAIL)
# is the conflict code of every jobgen lock scope (flock --conflict-exit-code 75 too), so
# units count it as success (SuccessExitStatus=75). When the command ran, the holder exits
# with the command's status instead (128+N when a signal N ended it), as a shell does.
EXIT: dict[str, tuple[int, str]] = {
    "conflict": (75, "lock held elsewhere, or the --wait bound ran out; command not run"),
    "unreachable": (69, "lock server unreachable or timed out; command not run"),
    "server-error": (69, "lock server answered with an error instead of a decision (GET_LOCK "
                         "NULL, Redis READONLY replica); command not run"),
    "internal-error": (70, "unexpected failure inside jobgen lock (a bug: please report it); "
                           "command not run"),
    "auth-failed": (77, "lock server refused the credentials; command not run"),
    "config-error": (78, "bad URL, unknown scheme, literal password, undefined ${VAR}, "
                         "unreadable password file or missing client library; command not run"),
    "lease-lost": (76, "Redis lease could not be renewed or was no longer ours mid-run; "
                       "command got SIGTERM, then SIGKILL after --grace"),
    "connection-lost": (76, "SQL session holding the lock broke mid-run; "
                            "command got SIGTERM, then SIGKILL after --grace"),
    "usage": (64, "bad command line; command not run"),
    "not-found": (127, "lock taken but the command does not exist"),
    "not-executable": (126, "lock taken but the command could not be executed"),
}
CONFLICT_EXIT = EXIT["conflict"][0]
# Where units find jobgen on the target hosts (`jobgen lock`, `jobgen enqueue|drain`);
# render --holder changes it.
DEFAULT_HOLDER = "/usr/bin/jobgen"

# --------------------------------------------------------------------------- lock names

# The lock scopes' names, as the manifest spells them (contract/policies.py has them from
# here, so `jobgen lock` checks a cluster name without loading the policy tables).
UNIT, HOST, CLUSTER = "unit", "host", "cluster"

class NameRule(namedtuple("NameRule", "pattern allowed max_len why_max")):
    """pattern: re.Pattern[str]; allowed: the punctuation `pattern` admits besides letters
    and digits, as shown; max_len: int; why_max: str."""

    __slots__ = ()


# Host (and unit) lock names become a file name, /run/jobgen/NAME.lock: no '/', and
# NAME + ".lock" within NAME_MAX (255). Cluster names become a Redis key, a GET_LOCK
# name (hashed past 64 characters) and a sha256 input: '/' groups them, '+' and '='
# carry base64-ish identities; nothing a log line, a key or an SQL string must quote.
NAME_RULES: dict[str, NameRule] = {
    UNIT: NameRule(re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]*"), "_.:@-", 250,
                     "the lock file name NAME.lock must fit in 255 bytes"),
    HOST: NameRule(re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@-]*"), "_.:@-", 250,
                     "the lock file name NAME.lock must fit in 255 bytes"),
    CLUSTER: NameRule(re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@/+=-]*"), "_.:@/+=-", 255,
                        "the limit of `jobgen lock --name`"),
}


def name_problem(scope: str, name: str) -> str | None:
    """Why `name` cannot be a lock name of `scope`, or None. The message names the name."""
    rule = NAME_RULES[scope]
    if not rule.pattern.fullmatch(name):
        return (f"'{name}' may only contain letters, digits and '{rule.allowed}', "
                "starting with a letter, digit or '_'")
    if len(name) > rule.max_len:
        return (f"the name has {len(name)} characters; a {scope} lock name may have at most "
                f"{rule.max_len} ({rule.why_max})")
    return None


# --------------------------------------------------------------------------- backends

# `${NAME}`: expanded by the holder from its own environment (EnvironmentFile=), never by
# systemd (jobgen writes it as `$${NAME}`, systemd.service(5) "Command lines").
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# libpq connection keywords a postgresql:// query may carry (PostgreSQL 16 manual, 34.1.2
# "Parameter Key Words"), less the ones the URL itself sets (host, hostaddr, port, dbname,
# user) and replication (not a lock session). libpq checks the values when connecting.
_LIBPQ_QUERY = frozenset({
    "password", "passfile", "require_auth", "channel_binding", "connect_timeout",
    "client_encoding", "options", "application_name", "fallback_application_name",
    "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
    "tcp_user_timeout", "gssencmode", "sslmode", "requiressl", "sslcompression", "sslcert",
    "sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni",
    "sslnegotiation", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version",
    "krbsrvname", "gsslib", "gssdelegation", "service", "target_session_attrs",
    "load_balance_hosts",
})
# redis-py's TLS options (redis.Redis(ssl_*=...)).
_REDIS_QUERY = frozenset({"ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs"})
# PyMySQL's ssl={ca, cert, key} and the connection charset.
_MYSQL_QUERY = frozenset({"ssl_ca", "ssl_cert", "ssl_key", "charset"})

_DIGITS = re.compile(r"[0-9]+")


class Scheme(namedtuple("Scheme", "module client extra query default_port database path "
                                  "queue_needs_database", defaults=(None, False))):
    """module: backend module under jobgen.runtime.backends; client: the client library it
    imports; extra: the extra in pyproject.toml that installs the client
    (runtime/installed.py: how to add it); query: frozenset[str], the query parameters the
    backend passes on to its client; default_port: int; database: what the URL path names,
    for messages; path: re.Pattern[str] | None, the path's form (None, the default: any
    text); queue_needs_database: bool (default False), overlap: queue keeps requests in
    tables: the URL must name the database (MariaDB has no default one; PostgreSQL uses
    the user's; Redis uses database 0)."""

    __slots__ = ()


SCHEMES: dict[str, Scheme] = {
    "redis": Scheme("redis", "redis", "redis", _REDIS_QUERY, 6379, "database number", _DIGITS),
    "rediss": Scheme("redis", "redis", "redis", _REDIS_QUERY, 6379, "database number", _DIGITS),  # TLS
    "mariadb": Scheme("mysql", "pymysql", "mariadb", _MYSQL_QUERY, 3306, "database", queue_needs_database=True),
    "mysql": Scheme("mysql", "pymysql", "mariadb", _MYSQL_QUERY, 3306, "database", queue_needs_database=True),
    "postgresql": Scheme("postgres", "psycopg", "postgres", _LIBPQ_QUERY, 5432, "database"),
    "postgres": Scheme("postgres", "psycopg", "postgres", _LIBPQ_QUERY, 5432, "database"),
}
SCHEME_LIST = ", ".join(s + "://" for s in SCHEMES)

# Client library -> the Debian package that provides it, for a jobgen installed from its
# .deb (debian/control suggests exactly these; tests/test_install_hint.py checks).
DEBIAN_PACKAGES: dict[str, str] = {"redis": "python3-redis", "pymysql": "python3-pymysql", "psycopg": "python3-psycopg"}

# A query parameter whose value is a secret: libpq's password and sslpassword, and any
# driver key naming a password, secret, token or credential. Like the password before
# '@', such a value must be `${VAR}`: the URL is written into a world-readable unit
# (/etc/systemd/system is 0755) and the holder's argv (/proc/PID/cmdline).
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|credential|^auth$|^key$", re.IGNORECASE)
_NOT_SECRET = frozenset({"passfile"})  # libpq: the path of a password file, not a password

LITERAL_PASSWORD = (
    "a literal password would be readable by every local user (in the unit file and the "
    "holder's command line); write ${VARIABLE} (set in environment_file) in its place, "
    "or use lock.password_file"
)


class UrlProblem(ValueError):
    """A backend URL that no server needs to see to refuse. str() never holds a secret."""


class RawUrl(namedtuple("RawUrl", "scheme host port username password path query")):
    """A backend URL split before `${VAR}` expansion, each part percent-decoded, so an
    expanded password may hold '@', '/' or ':' without percent-encoding.

    scheme, host: str; port: digits, `${VAR}` or ''; username: str | None; password:
    str | None (never in repr()); path: without the leading '/'; query:
    tuple[tuple[str, str], ...] (never in repr())."""

    __slots__ = ()

    def __repr__(self) -> str:
        return (f"RawUrl(scheme={self.scheme!r}, host={self.host!r}, port={self.port!r}, "
                f"username={self.username!r}, path={self.path!r})")


def is_secret_key(key: str) -> bool:
    return key.lower() not in _NOT_SECRET and bool(_SECRET_KEY.search(key))


def _literal(value: str | None) -> bool:
    """A value jobgen would write as is: anything but '' or exactly one `${VAR}`."""
    return bool(value) and not VARIABLE.fullmatch(value or "")


def split_url(url: str) -> RawUrl:
    """Split and check a backend URL as written (before `${VAR}` expansion).

    Raises UrlProblem naming the first problem. Checked: the URL parses; the scheme is
    one of SCHEMES; it names a host; the port is digits or `${VAR}`; no literal secret in
    the userinfo or the query; every query key is one the backend passes on; the path
    has the backend's form (Redis: a database number).
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:
        raise UrlProblem(f"not a valid URL ({e}); expected e.g. redis://redis.internal:6379/0") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UrlProblem(f"unsupported scheme '{parts.scheme}'; allowed: {SCHEME_LIST}")
    spec = SCHEMES[scheme]
    userinfo, at, hostport = parts.netloc.rpartition("@")
    if hostport.startswith("["):  # IPv6 literal
        host, _, rest = hostport[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = hostport.partition(":")
    # Not parts.hostname: it lowercases, and `${DB_HOST}` must reach the holder as written.
    host = urllib.parse.unquote(host)
    if not host:
        raise UrlProblem(f"the URL names no host; expected e.g. {scheme}://db.internal/")
    if port and not (port.isdigit() or VARIABLE.fullmatch(port)):
        raise UrlProblem(f"the port '{port}' is not a number")
    if port.isdigit() and not 0 < int(port) < 65536:
        raise UrlProblem(f"the port {port} is out of range (1-65535)")
    username, colon, password = userinfo.partition(":") if at else ("", "", "")
    if _literal(urllib.parse.unquote(password)):
        raise UrlProblem(LITERAL_PASSWORD)
    if var := VARIABLE.search(urllib.parse.unquote(username)):
        # Before the ':' is the user name, which logs and error messages show in clear:
        # a secret there (redis://${PASS}@host) would be printed on a failed login.
        raise UrlProblem(
            f"'{var.group(0)}' is in the user name, which is shown in logs; a password goes after ':' "
            f"({scheme}://:{var.group(0)}@{hostport} or {scheme}://USER:{var.group(0)}@{hostport}), "
            "and a user name is written as it is"
        )
    query = tuple(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    for key, value in query:
        if is_secret_key(key) and _literal(value):
            raise UrlProblem(f"the query parameter '{key}' holds a secret: {LITERAL_PASSWORD}")
    unknown = sorted({k for k, _ in query} - spec.query)
    if unknown:
        raise UrlProblem(f"unknown {scheme}:// URL parameter(s): {', '.join(unknown)}; "
                         f"allowed: {', '.join(sorted(spec.query))}")
    path = urllib.parse.unquote(parts.path.lstrip("/"))
    if path and spec.path is not None and not (spec.path.fullmatch(path) or VARIABLE.fullmatch(path)):
        raise UrlProblem(f"the {spec.database} '{path}' is not a number")
    return RawUrl(
        scheme=scheme,
        host=host,
        port=port,
        username=urllib.parse.unquote(username) if at and username else None,
        password=urllib.parse.unquote(password) if at and colon else None,
        path=path,
        query=query,
    )


def url_problem(url: str) -> str | None:
    """split_url's refusal as text, or None."""
    try:
        split_url(url)
    except UrlProblem as e:
        return str(e)
    return None


# lock.credential is NAME:/PATH, the unit's LoadCredential= (systemd.exec(5)); `jobgen run`
# copies PATH to $CREDENTIALS_DIRECTORY/NAME for the job's user. systemd (v252
# src/core/load-fragment.c config_parse_load_credential) ignores a line whose NAME fails
# credential_name_valid (src/basic/creds-util.c: filename_is_valid && fdname_is_valid —
# 1 to 255 characters, ASCII 0x20-0x7E, no '/' and no ':', not '.' or '..') or whose
# absolute source fails path_is_normalized (src/basic/path-util.c: no '.' or '..'
# component, no '//', shorter than PATH_MAX). A relative source names a credential of
# the service manager, which `jobgen run` cannot reach: it would read the caller's folder.
CREDENTIAL_NAME_MAX = 255  # NAME_MAX and FDNAME_MAX
_PATH_MAX = 4096
CREDENTIAL_FORM = "write NAME:/absolute/path, e.g. 'redis-password:/etc/jobgen/redis.pass'"


def credential_problem(value: str) -> str | None:
    """Why systemd (or jobgen run) would not load lock.credential VALUE, or None."""
    name, colon, source = value.partition(":")
    if not colon:
        return f"{value!r} names no source file; {CREDENTIAL_FORM}"
    if (not name or name in (".", "..") or len(name) > CREDENTIAL_NAME_MAX
            or any(not " " <= c <= "~" or c == "/" for c in name)):
        return (f"the credential name {name!r} is not valid (systemd ignores the line: a name is 1 to "
                f"{CREDENTIAL_NAME_MAX} printable ASCII characters, not '.' or '..', without '/' or ':'); "
                f"{CREDENTIAL_FORM}")
    if any(c in name for c in "\\\"'"):
        # systemd splits the line with extract_first_word, which drops a backslash and
        # reads quotes: the name it uses would not be the one jobgen passes the holder.
        return f"the credential name {name!r} holds a quote or backslash, which systemd rewrites; {CREDENTIAL_FORM}"
    if not source.startswith("/"):
        return f"the source {source!r} is not an absolute path; {CREDENTIAL_FORM}"
    parts = source.split("/")
    if "//" in source or any(p in (".", "..") for p in parts) or len(source) >= _PATH_MAX:
        return f"the source {source!r} is not a normalized path (no '.', '..' or '//'; systemd ignores the line)"
    if any(ord(c) < 0x20 or c == "\x7f" for c in source):
        return f"the source {source!r} holds a control character"
    return None


# --------------------------------------------------------------------------- Redis keys

# Every jobgen identity on a lock server starts with this (Redis keys, GET_LOCK names,
# the advisory key's sha256 input), so a jobgen lock never meets an application's own.
NAMESPACE = "jobgen:"
# A character no cluster lock name can hold (NAME_RULES): a key with it right after the
# namespace is bookkeeping, never the lease of any name.
BOOKKEEPING = "#"


class RedisKeys(namedtuple("RedisKeys", "lease fence legacy_fence")):
    """lease: the owner token with its expiry, `jobgen:NAME`, as in every jobgen release;
    fence: the fencing counter, `jobgen:#fence:NAME`, no name's lease; legacy_fence: where
    releases before the `#` layout counted: read once, never written."""

    __slots__ = ()


def redis_keys(name: str) -> RedisKeys:
    """The Redis keys of cluster lock `name`. The lease key is unchanged across releases,
    so old and new holders always contend on the same key during an upgrade; only the
    fencing counter moved out of the names' key space (`jobgen:a:fence` was also the lease
    key of the lock named `a:fence`)."""
    return RedisKeys(lease=NAMESPACE + name, fence=f"{NAMESPACE}{BOOKKEEPING}fence:{name}",
                     legacy_fence=f"{NAMESPACE}{name}:fence")


# --------------------------------------------------------------------------- server names

# MySQL refuses lock names longer than 64 characters (ER_USER_LOCK_WRONG_NAME, MySQL 5.7+).
GET_LOCK_MAX = 64
# Long names: "jobgen#" + the first 57 hex digits of sha256(name). '#' is not allowed in a
# lock name, so a hashed name never equals a plain "jobgen:<name>" one.
GET_LOCK_HASHED_PREFIX = NAMESPACE[:-1] + BOOKKEEPING


def get_lock_name(name: str) -> str:
    """The MariaDB/MySQL GET_LOCK name of cluster lock `name` (docs/cluster-locks.md)."""
    plain = NAMESPACE + name
    if len(plain) <= GET_LOCK_MAX:
        return plain
    digest = sha256(name.encode("utf-8")).hexdigest()
    return GET_LOCK_HASHED_PREFIX + digest[: GET_LOCK_MAX - len(GET_LOCK_HASHED_PREFIX)]


def advisory_key(name: str) -> int:
    """The PostgreSQL advisory lock key of cluster lock `name`, so other tools can take the
    same lock (docs/cluster-locks.md): the first 8 bytes of sha256(UTF-8 "jobgen:" + name),
    big-endian, as a signed int64."""
    digest = sha256((NAMESPACE + name).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class ServerName(namedtuple("ServerName", "of shown")):
    """of: Callable[[str], str | int], what the backend asks its server for, for lock
    NAME; shown: how `jobgen plan` shows it, {} is of(NAME)."""

    __slots__ = ()

    def show(self, name: str) -> str:
        return self.shown.format(self.of(name))


# By backend module (Scheme.module), then by scheme below: a scheme added to SCHEMES
# gets its server's name without another list to update.
_SERVER_NAME_OF_MODULE = {
    "redis": ServerName(lambda name: redis_keys(name).lease, "redis key {}"),
    "mysql": ServerName(get_lock_name, "GET_LOCK('{}')"),
    "postgres": ServerName(advisory_key, "pg_advisory_lock({})"),
}
SERVER_NAMES: dict[str, ServerName] = {
    scheme: _SERVER_NAME_OF_MODULE[spec.module] for scheme, spec in SCHEMES.items()
}
