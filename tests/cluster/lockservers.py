"""Real lock servers for the `jobgen lock` tests: redis-server, MariaDB and PostgreSQL,
each started by this module on a free loopback port in its own temporary directory, with a
password, and stoppable/restartable by the tests (a lock server that goes away is half of
what these tests are about).

Missing server binaries or client libraries skip the tests with a reason naming
`scripts/bootstrap`, which installs both (CI runs it, so CI never skips).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from support.cli import JOBGEN

# How the tests start the holder: a real process through the real entry point, as a unit's
# ExecStart=/usr/bin/jobgen lock ... would (cli.py hands `lock` to holder.main).
HOLDER = [*JOBGEN, "lock"]

PASSWORD = "s3cret/with:odd@chars"  # exercises ${VAR} expansion after URL splitting
PASSWORD_VAR = "JOBGEN_TEST_LOCK_PASSWORD"
BOOTSTRAP = "run scripts/bootstrap (apt-get install redis-server mariadb-server postgresql; " \
            "pip install -e '.[redis,mariadb,postgres,test]')"
START_TIMEOUT = 30.0


def holder_argv(*args: str) -> list[str]:
    return [*HOLDER, *args]


def holder_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env[PASSWORD_VAR] = PASSWORD
    env.update(extra)
    return env


def token_job_manifest(tmp_path: Path, lock_name: str, backend: str, out: Path) -> Path:
    """A manifest whose cluster-locked job `sync` writes the holder's fencing token to `out`,
    the backend password in an environment file (as an operator keeps it out of the unit)."""
    import json

    envfile = tmp_path / "lock.env"
    envfile.write_text(f"{PASSWORD_VAR}='{PASSWORD}'\n")
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"}, "jobs": {"sync": {
        "command": ["/bin/sh", "-c", f'echo "token=$JOBGEN_LOCK_TOKEN" > "{out}"'],
        "schedule": "daily", "timeout": "1h", "environment_file": str(envfile),
        "lock": {"scope": "cluster", "name": lock_name, "backend": backend},
    }}}))
    return manifest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _require(binary: str | None, what: str) -> str:
    if not binary or not shutil.which(binary):
        pytest.skip(f"{what} not found: {BOOTSTRAP}")
    return shutil.which(binary)  # type: ignore[return-value]


def _require_module(module: str, extra: str) -> None:
    try:
        __import__(module)
    except ImportError:
        pytest.skip(f"python module {module} missing (jobgen[{extra}]): {BOOTSTRAP}")


def _wait_port(port: int, proc: subprocess.Popen | None, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"server on port {port} did not come up:\n{tail}")


class Server:
    """One lock server. `url` references the password as ${VAR}, as a unit would."""

    kind: str
    # Does the server free a lock the moment the holder's session ends (SQL), or only when
    # the lease runs out (Redis)?
    frees_on_session_end: bool

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def url(self, password: str = "${" + PASSWORD_VAR + "}") -> str:
        raise NotImplementedError

    def ensure_running(self) -> None:
        if not self.running:
            self.start()

    def stop(self) -> None:
        """A clean shutdown: the server closes every client connection."""
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=START_TIMEOUT)

    def start(self) -> None:
        raise NotImplementedError

    def main_pid(self) -> int:
        return self.proc.pid

    def _pids(self) -> list[int]:
        """The server and its children (PostgreSQL runs one process per session)."""
        main = self.main_pid()
        pids = [main]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(fields[1]) == main:
                pids.append(int(stat.parent.name))
        return pids

    def pause(self) -> None:
        """A hung server: the kernel still accepts connections, nothing answers."""
        for pid in self._pids():
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self._pids():
            os.kill(pid, signal.SIGCONT)


class RedisServer(Server):
    kind = "redis"
    frees_on_session_end = False

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.binary = _require("redis-server", "redis-server")
        _require_module("redis", "redis")

    def url(self, password: str = "${" + PASSWORD_VAR + "}") -> str:
        return f"redis://:{password}@127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = self.root / "redis.log"
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.root), "--requirepass", PASSWORD,
             "--logfile", str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, self.proc, log)

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=PASSWORD,
                           decode_responses=True, socket_timeout=5)


class MariaDBServer(Server):
    kind = "mariadb"
    frees_on_session_end = True

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.binary = _require(shutil.which("mariadbd") or shutil.which("mysqld")
                               or (os.path.exists("/usr/sbin/mariadbd") and "/usr/sbin/mariadbd"),
                               "mariadbd")
        self.install = _require("mariadb-install-db", "mariadb-install-db")
        _require_module("pymysql", "mariadb")
        self.data = root / "data"
        self.socket = root / "mysqld.sock"
        subprocess.run(
            [self.install, "--no-defaults", f"--datadir={self.data}", "--user=" + _user(),
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.start()
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.socket), user="root", password="")
        with conn.cursor() as cur:
            cur.execute("CREATE USER 'jobgen'@'%%' IDENTIFIED BY %s", (PASSWORD,))
        conn.close()

    def url(self, password: str = "${" + PASSWORD_VAR + "}") -> str:
        return f"mariadb://jobgen:{password}@127.0.0.1:{self.port}"

    def start(self) -> None:
        log = self.root / "mariadb.log"
        self.proc = subprocess.Popen(
            [self.binary, "--no-defaults", f"--datadir={self.data}", "--user=" + _user(),
             f"--port={self.port}", "--bind-address=127.0.0.1", f"--socket={self.socket}",
             f"--pid-file={self.root / 'mariadb.pid'}", "--skip-name-resolve",
             "--innodb-buffer-pool-size=16M", "--max-connections=300",
             f"--log-error={log}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_port(self.port, self.proc, log)


class PostgresServer(Server):
    kind = "postgres"
    frees_on_session_end = True

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key)
        self.bin = Path(bins[-1]) if bins else None
        _require(str(self.bin / "initdb") if self.bin else None, "PostgreSQL initdb")
        _require_module("psycopg", "postgres")
        # initdb and postgres refuse to run as root: run them as nobody in a dir nobody owns.
        self.as_user = {"user": "nobody", "group": "nogroup", "extra_groups": []} \
            if os.geteuid() == 0 else {}
        if self.as_user:
            shutil.chown(root, "nobody", "nogroup")
        self.data = root / "data"
        pwfile = root / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_user:
            shutil.chown(pwfile, "nobody", "nogroup")
        self._run("initdb", "-D", str(self.data), "-U", "jobgen", f"--pwfile={pwfile}",
                  "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync")
        self.start()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([str(self.bin / tool), *args], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.STDOUT, cwd=self.root, **self.as_user)

    def url(self, password: str = "${" + PASSWORD_VAR + "}") -> str:
        return f"postgresql://jobgen:{password}@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        log = self.root / "postgres.log"
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} -c fsync=off "
                "-c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(log), "-w", "-o", opts, "start")
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        self.proc = None
        self.pid = pid
        _wait_port(self.port, None, log)

    def main_pid(self) -> int:
        return self.pid

    @property
    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def stop(self) -> None:
        if self.running:
            # fast: terminate every session (smart mode would wait for them to leave)
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _version_key(path: str) -> tuple[int, ...]:
    part = Path(path).parent.name
    return tuple(int(x) for x in part.split(".") if x.isdigit())


SERVERS = {"redis": RedisServer, "mariadb": MariaDBServer, "postgres": PostgresServer}
