"""What `jobgen lock` loads before it runs a job: it starts in front of every run of a
cluster-scope job, so it imports the client library of the backend its URL names and no
other, and never the compiler, typer, PyYAML or jinja2. Observed from outside with
`-X importtime` (PYTHONPROFILEIMPORTTIME), on the console script the units call.

No server is needed: port 1 on loopback refuses at once, after the backend and its client
have been loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.contract.locks import EXIT

JOBGEN = Path(sys.executable).with_name("jobgen")
CLIENTS = ("redis", "pymysql", "psycopg")
NEVER = ("typer", "click", "jinja2", "yaml", "packaging", "jobgen.compiler")
# What the holder never adds to what the interpreter and the client library load: each
# costs milliseconds on every run (creating a frozen dataclass alone ~0.5 ms; shutil
# brings bz2, lzma and zlib along).
NOT_OURS = ("dataclasses", "inspect", "shutil", "bz2", "lzma", "logging", "traceback")


def imported(*args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    env = {"PATH": os.environ["PATH"], "PYTHONPROFILEIMPORTTIME": "1"}
    r = subprocess.run([str(JOBGEN), "lock", *args], capture_output=True, text=True, env=env, timeout=60)
    names = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return r, names


def client_imports(client: str) -> set[str]:
    """What `import CLIENT` alone loads, with the interpreter's own start-up."""
    env = {"PATH": os.environ["PATH"], "PYTHONPROFILEIMPORTTIME": "1"}
    r = subprocess.run([sys.executable, "-c", f"import {client}"], capture_output=True, text=True,
                       env=env, timeout=60, check=True)
    return {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}


def loaded(names: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(root for root in roots if any(n == root or n.startswith(root + ".") for n in names))


def test_help_loads_no_client_library() -> None:
    r, names = imported("--help")
    assert r.returncode == 0 and "--backend URL" in r.stdout
    assert "jobgen.runtime.lock" in names  # the probe sees the holder's own imports
    assert loaded(names, CLIENTS + NEVER) == []
    assert loaded(names, ("dataclasses", "inspect")) == []


@pytest.mark.parametrize("url, client, outcome", [
    ("redis://127.0.0.1:1/0", "redis", "unreachable"),
    ("mariadb://jobs@127.0.0.1:1/jobs", "pymysql", "unreachable"),
    ("postgres://jobs@127.0.0.1:1/jobs", "psycopg", "unreachable"),
])
def test_a_backend_loads_its_own_client_only(url: str, client: str, outcome: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    r, names = imported("--backend", url, "--name", "n", "--connect-timeout", "5", "--", "touch", str(marker))
    assert r.returncode == EXIT[outcome][0], r.stderr[-2000:]
    assert f" {outcome} name=n " in r.stderr
    assert not marker.exists()
    assert loaded(names, CLIENTS + NEVER) == [client]
    assert loaded(names - client_imports(client), NOT_OURS) == []


# The holder's own modules on the MariaDB path (the console script's module, the holder, its
# backend; PyMySQL itself is imported by backends.load): PyMySQL without the optional
# `cryptography` package loads none of these, so each would be the holder's own cost on
# every run (typing about 5 ms of CPU, the overlap policy tables of contract/policies.py
# as much again). Checked without the client, whatever the client loads.
HOLDER_MODULES = ("jobgen.cli", "jobgen.runtime.lock", "jobgen.runtime.backends.mysql")
NOT_THE_HOLDERS = ("typing", "jobgen.contract.policies", "jobgen.contract.outcomes")


def test_the_holders_own_modules_load_no_typing_and_no_policy_tables() -> None:
    r = subprocess.run([sys.executable, "-c", f"import sys, {', '.join(HOLDER_MODULES)}; "
                        "print(' '.join(sys.modules))"],
                       capture_output=True, text=True, timeout=60, check=True)
    names = set(r.stdout.split())
    assert set(HOLDER_MODULES) <= names  # the probe sees them
    assert loaded(names, NOT_THE_HOLDERS + NOT_OURS + CLIENTS + NEVER) == []


# MariaDB with no ssl_* option: PyMySQL asks for TLS if the server offers it and verifies
# nothing, but built that context from ssl.create_default_context(), reading every CA
# certificate of the system first (backends/mysql.py _connection_class). The context the
# holder builds instead verifies exactly as little, with no certificate loaded.
def test_mariadb_without_tls_options_builds_pymysqls_context_without_reading_the_cas() -> None:
    import ssl

    import pymysql.connections

    from jobgen.runtime.backends import mysql

    connection = mysql._connection_class()
    conn = connection.__new__(connection)
    ours = conn._create_ssl_ctx({})
    theirs = pymysql.connections.Connection._create_ssl_ctx(conn, {})
    assert (ours.verify_mode, ours.check_hostname) == (theirs.verify_mode, theirs.check_hostname) == (ssl.CERT_NONE, False)
    assert ours.minimum_version >= theirs.minimum_version
    assert ours.cert_store_stats()["x509_ca"] == 0
    # Any ssl_* option is PyMySQL's own code: a verified connection verifies.
    asked = conn._create_ssl_ctx({"verify_mode": "required"})
    assert asked.verify_mode == ssl.CERT_REQUIRED
