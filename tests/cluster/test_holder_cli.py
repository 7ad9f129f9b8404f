"""`jobgen lock` outcomes decided before any server is contacted (no lock server needed):
usage errors exit 64, configuration errors 78, and the command never runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lockservers import holder_argv

URL = "redis://127.0.0.1:1/0"  # never contacted: every case below fails earlier


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("args, message", [
    (["--name", "n", "--", "true"], "required: --backend"),
    (["--backend", URL, "--name", "n", "true"], "missing `-- COMMAND"),
    (["--backend", URL, "--name", "n", "--"], "no command after `--`"),
    (["--backend", URL, "--name", "n", "--ttl", "0.5", "--", "true"], "must be >= 1 seconds"),
    (["--backend", URL, "--name", "n", "--wait", "soon", "--", "true"], "not a number"),
    (["--backend", URL, "--name", "n", "--frobnicate", "--", "true"], "unrecognized arguments"),
    (["--backend", URL, "--name", "bad name", "--", "true"], "lock names are"),
])
def test_usage_errors_exit_64(args, message):
    res = run(holder_argv(*args))
    assert res.returncode == 64
    assert message in res.stderr
    assert len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("url, message", [
    ("foo://host", "unknown backend scheme 'foo'"),
    ("redis://", "no host"),
    ("redis://h:${NOT_SET_ANYWHERE}/0", "${NOT_SET_ANYWHERE} is not set"),
    ("redis://h:port/0", "is not a number"),
    ("mariadb://h/db?bogus=1", "unknown mariadb URL parameter(s): bogus"),
])
def test_configuration_errors_exit_78_before_connecting(url, message, tmp_path):
    marker = tmp_path / "ran"
    res = run(holder_argv("--backend", url, "--name", "n", "--", "touch", str(marker)))
    assert res.returncode == 78, res.stderr
    assert message in res.stderr
    assert not marker.exists()


def test_missing_client_library_names_the_extra(tmp_path):
    """A host without redis-py: the message says which extra to install."""
    blocked = [sys.executable, "-c", "import sys; sys.modules['redis'] = None; "
               "from jobgen.runtime import lock; sys.exit(lock.main(sys.argv[1:]))"]
    marker = tmp_path / "ran"
    res = run([*blocked, "--backend", URL, "--name", "n", "--", "touch", str(marker)])
    assert res.returncode == 78
    assert "pip install 'jobgen[redis]'" in res.stderr
    assert not marker.exists()


def test_help_exits_0():
    res = run(holder_argv("--help"))
    assert res.returncode == 0
    assert "--backend URL" in res.stdout
