"""`jobgen lock` outcomes decided before any server is contacted (no lock server needed):
usage errors exit 64, configuration errors 78, and the command never runs.

Marked `cluster` like the rest of this folder: the holder imports the backend's client
library (redis-py, PyMySQL, psycopg) before it decides some of these."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from lockservers import holder_argv

pytestmark = pytest.mark.cluster

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
    (["--backend", URL, "--name", "bad name", "--", "true"],
     "argument --name: 'bad name' may only contain letters, digits and '_.:@/+=-', "
     "starting with a letter, digit or '_'"),
    (["--backend", URL, "--name", "x" * 256, "--", "true"],
     "the name has 256 characters; a cluster lock name may have at most 255"),
])
def test_usage_errors_exit_64(args, message):
    res = run(holder_argv(*args))
    assert res.returncode == 64
    assert message in res.stderr
    assert len(res.stderr.splitlines()) == 1


LITERAL = ("a literal password would be readable by every local user (in the unit file and "
           "the holder's command line); write ${VARIABLE} (set in environment_file) in its "
           "place, or use lock.password_file")


@pytest.mark.parametrize("url, message", [
    ("foo://host", "lock backend URL: unsupported scheme 'foo'; allowed: redis://, rediss://, "
                   "mariadb://, mysql://, postgresql://, postgres://"),
    ("redis://", "lock backend URL: the URL names no host; expected e.g. redis://db.internal/"),
    ("redis://h:${NOT_SET_ANYWHERE}/0", "${NOT_SET_ANYWHERE} is not set in the environment"),
    ("redis://h:port/0", "lock backend URL: the port 'port' is not a number"),
    ("redis://h/zero", "lock backend URL: the database number 'zero' is not a number"),
    ("mariadb://h/db?bogus=1", "lock backend URL: unknown mariadb:// URL parameter(s): bogus; "
                               "allowed: charset, ssl_ca, ssl_cert, ssl_key"),
    # A literal secret is refused by the holder too, not only by `jobgen check`: its argv is
    # readable by every local user in /proc/PID/cmdline.
    ("redis://:hunter2@h/0", "lock backend URL: " + LITERAL),
    ("postgresql://u@h/db?password=hunter2",
     "lock backend URL: the query parameter 'password' holds a secret: " + LITERAL),
    ("postgresql://u@h/db?sslmode=require&sslpassword=hunter2",
     "lock backend URL: the query parameter 'sslpassword' holds a secret: " + LITERAL),
    ("redis://h/0?auth_token=hunter2",
     "lock backend URL: the query parameter 'auth_token' holds a secret: " + LITERAL),
])
def test_configuration_errors_exit_78_before_connecting(url, message, tmp_path):
    marker = tmp_path / "ran"
    res = run(holder_argv("--backend", url, "--name", "n", "--", "touch", str(marker)))
    assert res.returncode == 78, res.stderr
    assert res.stderr == f"jobgen-lock[n]: config-error name=n {message} exit=78\n"
    assert "hunter2" not in res.stderr
    assert not marker.exists()


def test_missing_client_library_says_how_to_install_it(tmp_path):
    """A host without redis-py: the message says how to add it to this jobgen (a virtualenv here)."""
    blocked = [sys.executable, "-c", "import sys; sys.modules['redis'] = None; "
               "from jobgen.runtime import lock; sys.exit(lock.main(sys.argv[1:]))"]
    marker = tmp_path / "ran"
    res = run([*blocked, "--backend", URL, "--name", "n", "--", "touch", str(marker)])
    assert res.returncode == 78
    assert f"{sys.prefix}/bin/python -m pip install 'redis>=5'" in res.stderr
    assert not marker.exists()


def test_help_exits_0():
    res = run(holder_argv("--help"))
    assert res.returncode == 0
    assert "--backend URL" in res.stdout


def test_stop_signal_during_start_up_is_not_lost_and_nothing_runs(tmp_path):
    """A stop signal that arrives while the holder is still setting up (here: reading its
    password file, a FIFO the test controls) is kept, not fatal halfway: the holder never
    asks for the lock, the command never runs, and it exits 128+15 with one line saying so."""
    import errno
    import signal

    fifo, marker = tmp_path / "password", tmp_path / "ran"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        holder_argv("--backend", URL, "--name", "n", "--password-file", str(fifo), "--",
                    "touch", str(marker)),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Opening the FIFO for writing without blocking succeeds only once the holder has it
    # open for reading: the observable fact that it is inside its start-up.
    deadline = time.monotonic() + 60
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            assert e.errno == errno.ENXIO and proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)  # polling the FIFO, not waiting for time to pass
    proc.send_signal(signal.SIGTERM)
    os.write(fd, b"pw\n")
    os.close(fd)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert proc.stderr.read() == ("jobgen-lock[n]: interrupted name=n signal=SIGTERM before "
                                  "acquiring; command not run exit=143\n")
    assert not marker.exists()
