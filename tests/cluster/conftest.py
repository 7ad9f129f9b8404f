"""Fixtures for the `jobgen lock` tests (lock servers: lockservers.py).

    .venv/bin/python -m pytest tests/cluster -m cluster

Each server kind starts once per session, on first use, and is removed at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # whatever pytest's import mode

from lockservers import SERVERS, MariaDBServer, PostgresServer, RedisServer, Server  # noqa: E402


@pytest.fixture(scope="session")
def _servers():
    """Started lazily, one of each per session, removed at the end."""
    made: dict[str, Server] = {}
    roots: list[str] = []

    def get(kind: str) -> Server:
        if kind not in made:
            root = tempfile.mkdtemp(prefix=f"jobgen-{kind}-")
            os.chmod(root, 0o755)
            roots.append(root)
            server = SERVERS[kind](Path(root))
            if not server.running:
                server.start()
            made[kind] = server
        return made[kind]

    yield get
    for server in made.values():
        try:
            server.stop()
        except Exception:
            pass
    for root in roots:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=list(SERVERS))
def server(request, _servers) -> Server:
    """Each test that takes `server` runs once per backend, on a running server."""
    s = _servers(request.param)
    s.ensure_running()
    yield s
    s.ensure_running()  # a test that stopped it leaves it usable for the next one


@pytest.fixture
def redis_server(_servers) -> RedisServer:
    s = _servers("redis")
    s.ensure_running()
    yield s
    s.ensure_running()


@pytest.fixture
def postgres_server(_servers) -> PostgresServer:
    s = _servers("postgres")
    s.ensure_running()
    yield s


@pytest.fixture
def mariadb_server(_servers) -> MariaDBServer:
    s = _servers("mariadb")
    s.ensure_running()
    yield s


@pytest.fixture
def lock_name(request) -> str:
    """A lock name of its own per test, so tests never contend with each other."""
    return "test/" + request.node.name.replace("[", ".").replace("]", "")[:80]
