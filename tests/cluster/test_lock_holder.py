"""`jobgen lock` against real lock servers: each test states one behaviour of the holder,
starts holders as real processes, and checks what the command did through files it wrote.

Exit codes under test (src/jobgen/contract/locks.py EXIT): the command's own status when it ran,
75 conflict, 69 server unreachable, 77 authentication failed, 78 configuration error,
76 lock lost mid-run, 64 usage.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from lockservers import PASSWORD_VAR, Server, holder_argv, holder_env

pytestmark = pytest.mark.cluster

TIMEOUT = 60  # no holder in these tests may take longer; a hang fails instead of blocking CI


def holder(server: Server, name: str, *opts: str, command: list[str],
           url: str | None = None) -> list[str]:
    return holder_argv("--backend", url or server.url(), "--name", name, "--connect-timeout",
                       "2", *opts, "--", *command)


def run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env or holder_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)


_ERRLOGS: list[Path] = []


@pytest.fixture(autouse=True)
def _remove_errlogs():
    yield
    while _ERRLOGS:
        _ERRLOGS.pop().unlink(missing_ok=True)


def spawn(argv: list[str], env: dict[str, str] | None = None, **kw) -> subprocess.Popen:
    """A holder in the background; its stderr goes to a file the test can read at any
    time (stderr_of), so a test can wait for a log line without blocking on a pipe."""
    fd, path = tempfile.mkstemp(prefix="jobgen-holder-", suffix=".err")
    try:
        proc = subprocess.Popen(argv, env=env or holder_env(), stdout=subprocess.DEVNULL,
                                stderr=fd, **kw)
    finally:
        os.close(fd)
    proc.errlog = Path(path)  # type: ignore[attr-defined]
    _ERRLOGS.append(proc.errlog)  # type: ignore[attr-defined]
    return proc


def stderr_of(proc: subprocess.Popen) -> str:
    return proc.errlog.read_text()  # type: ignore[attr-defined]


def wait_logged(proc: subprocess.Popen, text: str, timeout: float = 60.0) -> None:
    """Wait until the holder has logged `text` (an observable fact, never a sleep)."""
    wait_for(lambda: text in stderr_of(proc) or proc.poll() is not None, timeout=timeout,
             what=f"holder to log {text!r}")
    assert text in stderr_of(proc), stderr_of(proc)


def recorder(log: Path, *, until: Path | None = None) -> list[str]:
    """A command that appends `start`, waits (for `until` to exist, if given), appends `end`.
    O_APPEND writes of one short line are atomic, so two concurrent runs show as two starts."""
    wait = f'while [ ! -e "{until}" ]; do sleep 0.02; done; ' if until else ""
    return ["sh", "-c", f'echo "start $$" >> "{log}"; {wait}echo "end $$" >> "{log}"']


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def wait_for(predicate, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it has stopped running, which is what matters here.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


# --- exclusion ------------------------------------------------------------------------------

ROUNDS = 3
HOLDERS = 50
CONTENDED_CONNECT_TIMEOUT = "60"


def test_fifty_concurrent_holders_exactly_one_runs(server, lock_name, tmp_path):
    """50 holders race for one name, 3 rounds: each round one command runs, 49 exit 75."""
    for rnd in range(ROUNDS):
        log, release = tmp_path / f"runs-{rnd}", tmp_path / f"release-{rnd}"
        # 50 Python processes on a small loaded machine: a connection may take seconds to
        # be accepted, which is not what this test is about (CONTENDED_CONNECT_TIMEOUT).
        procs = [spawn(holder(server, lock_name, "--connect-timeout", CONTENDED_CONNECT_TIMEOUT,
                              command=recorder(log, until=release)))
                 for _ in range(HOLDERS)]
        # The winner keeps the lock until every loser has given up (or a deadline passes,
        # which would leave a second winner waiting here too and fail the counts below).
        try:
            wait_for(lambda: sum(p.poll() is not None for p in procs) >= HOLDERS - 1,
                     timeout=240, what="49 holders to give up")
        finally:
            release.touch()
        codes = sorted(p.wait(timeout=TIMEOUT) for p in procs)
        stderr = [stderr_of(p) for p in procs]
        assert codes == [0] + [75] * (HOLDERS - 1), stderr
        assert len([x for x in lines(log) if x == "start"]) == 1, "double run"
        assert sum("conflict" in e for e in stderr) == HOLDERS - 1


def test_released_lock_is_free_for_the_next_holder(server, lock_name, tmp_path):
    log = tmp_path / "runs"
    for _ in range(3):
        assert run(holder(server, lock_name, command=recorder(log))).returncode == 0
    assert lines(log).count("start") == 3


def test_command_status_is_the_holders_status(server, lock_name):
    assert run(holder(server, lock_name, command=["sh", "-c", "exit 3"])).returncode == 3
    assert run(holder(server, lock_name, command=["sh", "-c", "kill -TERM $$"])).returncode == 143


def test_missing_command_exits_127_and_releases(server, lock_name, tmp_path):
    res = run(holder(server, lock_name, command=[str(tmp_path / "no-such-program")]))
    assert res.returncode == 127
    assert "not-found" in res.stderr
    assert run(holder(server, lock_name, command=["true"])).returncode == 0


# --- holder death ---------------------------------------------------------------------------

def test_sigkill_of_the_holder_kills_the_command_and_frees_the_lock(server, lock_name, tmp_path):
    """SQL servers free the lock when the session ends; Redis when the lease (--ttl) runs out.
    Either way the command does not outlive its holder (PR_SET_PDEATHSIG)."""
    pidfile = tmp_path / "pid"
    first = spawn(holder(server, lock_name, "--ttl", "2",
                         command=["sh", "-c", f'echo $$ > "{pidfile}"; exec sleep 60']))
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="command start")
    command_pid = int(pidfile.read_text())
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=TIMEOUT)
    wait_for(lambda: not pid_alive(command_pid), timeout=TIMEOUT, what="command to die with holder")  # the keeper acts within its 0.2 s scan; a loaded machine may be slower

    if not server.frees_on_session_end:
        # Still held: nobody released it, the lease is what frees it.
        assert run(holder(server, lock_name, command=["true"])).returncode == 75
    log = tmp_path / "runs"
    res = run(holder(server, lock_name, "--wait", "10", command=recorder(log)))
    assert res.returncode == 0, res.stderr
    assert lines(log).count("start") == 1


# --- the lock server goes away --------------------------------------------------------------

def test_server_down_before_start_command_never_runs(server, lock_name, tmp_path):
    marker = tmp_path / "ran"
    server.stop()
    res = run(holder(server, lock_name, command=["touch", str(marker)]))
    assert res.returncode == 69, res.stderr
    assert "unreachable" in res.stderr
    assert not marker.exists()


def test_server_stopped_mid_run_stops_the_command_with_76(server, lock_name, tmp_path):
    log = tmp_path / "events"
    command = ["sh", "-c", f'trap \'kill $!; echo term >> "{log}"; exit 143\' TERM; '
                           f'echo start >> "{log}"; sleep 60 2>/dev/null & wait']
    proc = spawn(holder(server, lock_name, "--ttl", "3", "--grace", "5", command=command))
    wait_for(lambda: "start" in lines(log), what="command start")
    server.stop()
    code = proc.wait(timeout=TIMEOUT)
    stderr = stderr_of(proc)
    assert code == 76, stderr
    assert lines(log) == ["start", "term"]  # SIGTERM reached the command; it did not finish
    expected_event = "connection-lost" if server.frees_on_session_end else "lease-lost"
    assert expected_event in stderr


def test_hung_server_before_start_is_unreachable_within_the_timeout(server, lock_name, tmp_path):
    """Connections are accepted by the kernel but nothing answers: every call is bounded."""
    marker = tmp_path / "ran"
    server.pause()
    try:
        res = run(holder(server, lock_name, command=["touch", str(marker)]))
    finally:
        server.resume()
    assert res.returncode == 69, res.stderr
    assert not marker.exists()


def test_hung_server_mid_run_stops_the_command_with_76(server, lock_name, tmp_path):
    log = tmp_path / "events"
    command = ["sh", "-c", f'trap \'kill $!; echo term >> "{log}"; exit 143\' TERM; '
                           f'echo start >> "{log}"; sleep 60 2>/dev/null & wait']
    # --ttl leaves room for the renewal's timeout and --grace: with less, the keeper's
    # SIGKILL before the lease runs out comes before the graceful stop (the holder warns).
    proc = spawn(holder(server, lock_name, "--ttl", "10", "--grace", "5", command=command))
    wait_for(lambda: "start" in lines(log), what="command start")
    server.pause()
    try:
        code = proc.wait(timeout=TIMEOUT)
    finally:
        server.resume()
    assert code == 76, stderr_of(proc)
    assert lines(log) == ["start", "term"]


def test_command_ignoring_sigterm_gets_sigkill_after_grace(redis_server, lock_name, tmp_path):
    log = tmp_path / "events"
    command = ["sh", "-c", f'trap "" TERM; echo start >> "{log}"; '
                           f'while :; do sleep 0.1; done; echo end >> "{log}"']
    proc = spawn(holder(redis_server, lock_name, "--ttl", "3", "--grace", "1", command=command))
    wait_for(lambda: "start" in lines(log), what="command start")
    redis_server.stop()
    assert proc.wait(timeout=TIMEOUT) == 76
    stderr = stderr_of(proc)
    assert "killed" in stderr and "after --grace 1s" in stderr, stderr
    assert lines(log) == ["start"]


# --- Redis lease specifics ------------------------------------------------------------------

def test_redis_lease_is_renewed_past_its_ttl(redis_server, lock_name, tmp_path):
    """A command running 3 x --ttl keeps the lock all along: a rival is refused near the end."""
    release = tmp_path / "release"
    log = tmp_path / "runs"
    proc = spawn(holder(redis_server, lock_name, "--ttl", "1",
                        command=recorder(log, until=release)))
    wait_for(lambda: "start" in lines(log), what="command start")
    # Observe renewals on the server: each one raises the key's remaining time again.
    # Without renewal the key would be gone after one lease; wait for 3 leases' worth.
    r = redis_server.client()
    key = f"jobgen:{lock_name}"
    renewals, last = 0, r.pttl(key)
    while renewals < 9:  # renewed every ttl/3: 9 renewals span 3 lease lengths
        now = r.pttl(key)
        assert now > 0, "the lease expired: it was not renewed"
        renewals += now > last
        last = now
        time.sleep(0.02)  # polling the server, not waiting for time to pass
    assert run(holder(redis_server, lock_name, command=["true"])).returncode == 75
    release.touch()
    assert proc.wait(timeout=TIMEOUT) == 0


def test_redis_key_taken_over_is_a_lost_lease_and_not_deleted(redis_server, lock_name, tmp_path):
    """If the key stops holding our token (expiry + another node, failover), renewal notices,
    the command is stopped, and the release leaves the other owner's key alone."""
    log = tmp_path / "events"
    command = ["sh", "-c", f'echo start >> "{log}"; exec sleep 60']
    proc = spawn(holder(redis_server, lock_name, "--ttl", "1.5", command=command))
    wait_for(lambda: "start" in lines(log), what="command start")
    r = redis_server.client()
    r.set(f"jobgen:{lock_name}", "another-node", px=60000)
    assert proc.wait(timeout=TIMEOUT) == 76
    assert "lease-lost" in stderr_of(proc)
    assert r.get(f"jobgen:{lock_name}") == "another-node"


def test_redis_fencing_token_increases_per_acquisition(redis_server, lock_name, tmp_path):
    out = tmp_path / "tokens"
    command = ["sh", "-c", f'echo "$JOBGEN_LOCK_TOKEN" >> "{out}"']
    for _ in range(3):
        assert run(holder(redis_server, lock_name, command=command)).returncode == 0
    tokens = [int(t) for t in lines(out)]
    assert tokens == sorted(set(tokens)) and len(tokens) == 3
    assert tokens[1] == tokens[0] + 1


# --- --wait ---------------------------------------------------------------------------------

def test_wait_waits_for_the_holder_then_runs(server, lock_name, tmp_path):
    log, release = tmp_path / "runs", tmp_path / "release"
    first = spawn(holder(server, lock_name, command=recorder(log, until=release)))
    wait_for(lambda: "start" in lines(log), what="first command start")
    second = spawn(holder(server, lock_name, "--wait", "30", command=recorder(log)))
    wait_logged(second, f"waiting name={lock_name}")
    assert second.poll() is None  # still waiting
    release.touch()
    assert first.wait(timeout=TIMEOUT) == 0
    assert second.wait(timeout=TIMEOUT) == 0
    # second started only after first ended
    assert [x for x in lines(log) if x in ("start", "end")] == ["start", "end", "start", "end"]


def test_wait_bound_exceeded_is_a_conflict(server, lock_name, tmp_path):
    log, release = tmp_path / "runs", tmp_path / "release"
    first = spawn(holder(server, lock_name, command=recorder(log, until=release)))
    wait_for(lambda: "start" in lines(log), what="first command start")
    marker = tmp_path / "second-ran"
    res = run(holder(server, lock_name, "--wait", "1", command=["touch", str(marker)]))
    release.touch()
    assert first.wait(timeout=TIMEOUT) == 0
    assert res.returncode == 75
    assert "--wait 1s ran out" in res.stderr
    assert not marker.exists()


def test_stop_signal_while_waiting_abandons_the_attempt(server, lock_name, tmp_path):
    log, release = tmp_path / "runs", tmp_path / "release"
    first = spawn(holder(server, lock_name, command=recorder(log, until=release)))
    wait_for(lambda: "start" in lines(log), what="first command start")
    marker = tmp_path / "second-ran"
    second = spawn(holder(server, lock_name, "--wait", "30", command=["touch", str(marker)]))
    # The holder logs this line once it handles stop signals and is about to wait.
    wait_logged(second, f"waiting name={lock_name}")
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=TIMEOUT) == 128 + signal.SIGTERM
    assert "interrupted" in stderr_of(second)
    release.touch()
    assert first.wait(timeout=TIMEOUT) == 0
    assert not marker.exists()


# --- signals --------------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_to_holder_is_forwarded_and_lock_released(redis_server, lock_name, tmp_path, sig):
    log = tmp_path / "events"
    command = ["sh", "-c", f'trap \'kill $!; echo got >> "{log}"; exit 7\' {sig.name[3:]}; '
                           f'echo start >> "{log}"; sleep 60 2>/dev/null & wait']
    # its own session: the signal reaches the holder only, as from `systemctl stop` with
    # KillMode=mixed; the command sees it only because the holder forwards it
    proc = spawn(holder(redis_server, lock_name, command=command), start_new_session=True)
    wait_for(lambda: "start" in lines(log), what="command start")
    proc.send_signal(sig)
    assert proc.wait(timeout=TIMEOUT) == 7
    assert lines(log) == ["start", "got"]
    assert f"forwarded name={lock_name} signal={sig.name}" in stderr_of(proc)
    assert run(holder(redis_server, lock_name, command=["true"])).returncode == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_that_ends_the_command_ends_the_holder_by_the_same_signal(redis_server, lock_name, tmp_path, sig):
    """`systemctl stop` or a shutdown (KillMode=mixed: the holder alone gets SIGTERM) that
    ends the command ends the holder by that signal, as a shell ends, so systemd records
    result 'signal' and the unit's reporter logs `stopped`, not a failure with status 143.
    A command the signal killed without the holder being stopped is its own status."""
    log = tmp_path / "events"
    proc = spawn(holder(redis_server, lock_name, command=["sh", "-c", f'echo start >> "{log}"; exec sleep 60']),
                 start_new_session=True)
    wait_for(lambda: "start" in lines(log), what="command start")
    proc.send_signal(sig)
    assert proc.wait(timeout=TIMEOUT) == -sig, stderr_of(proc)
    assert run(holder(redis_server, lock_name, command=["sh", "-c", "kill -TERM $$"])).returncode == 128 + signal.SIGTERM


# --- credentials and configuration ----------------------------------------------------------

def test_bad_password_is_one_clear_line_and_exit_77(server, lock_name, tmp_path):
    marker = tmp_path / "ran"
    res = run(holder(server, lock_name, command=["touch", str(marker)]),
              env=holder_env(**{PASSWORD_VAR: "wrong"}))
    assert res.returncode == 77
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert res.stderr.startswith(f"jobgen-lock[{lock_name}]: auth-failed ")
    assert not marker.exists()


def test_undefined_variable_in_url_is_a_config_error(server, lock_name, tmp_path):
    marker = tmp_path / "ran"
    env = holder_env()
    del env[PASSWORD_VAR]
    res = run(holder(server, lock_name, command=["touch", str(marker)]), env=env)
    assert res.returncode == 78
    assert f"${{{PASSWORD_VAR}}} is not set" in res.stderr
    assert not marker.exists()


def test_password_file_path_with_variable(server, lock_name, tmp_path):
    """As with LoadCredential=: --password-file '${CREDENTIALS_DIRECTORY}/lockpw'."""
    (tmp_path / "lockpw").write_text(holder_env()[PASSWORD_VAR] + "\n")
    url = server.url(password="")  # no password in the URL at all
    argv = holder(server, lock_name, "--password-file", "${CREDENTIALS_DIRECTORY}/lockpw",
                  url=url, command=["true"])
    res = run(argv, env=holder_env(CREDENTIALS_DIRECTORY=str(tmp_path)))
    assert res.returncode == 0, res.stderr
    res = run(argv, env=holder_env(CREDENTIALS_DIRECTORY=str(tmp_path / "missing")))
    assert res.returncode == 78
    assert "password file" in res.stderr


# --- backend details that other tools rely on -----------------------------------------------

def test_postgres_key_derivation_matches_the_documented_sql(postgres_server):
    import psycopg

    from jobgen.contract.locks import advisory_key

    sql = ("SELECT ('x' || left(encode(sha256(convert_to('jobgen:' || %s, 'UTF8')), 'hex'), 16))"
           "::bit(64)::bigint")
    with psycopg.connect(host="127.0.0.1", port=postgres_server.port, user="jobgen",
                         password=holder_env()[PASSWORD_VAR], dbname="postgres") as conn:
        for name in ["catalog-refresh", "billing/monthly", "ünïcode"]:
            assert conn.execute(sql, (name,)).fetchone()[0] == advisory_key(name)


def test_mariadb_long_names_are_hashed_within_64_chars(mariadb_server, tmp_path):
    """Names past GET_LOCK's 64-character limit still lock, and still exclude each other."""
    long_a = "app/" + "x" * 100 + "/a"
    long_b = "app/" + "x" * 100 + "/b"
    log, release = tmp_path / "runs", tmp_path / "release"
    first = spawn(holder(mariadb_server, long_a, command=recorder(log, until=release)))
    wait_for(lambda: "start" in lines(log), what="command start")
    assert run(holder(mariadb_server, long_a, command=["true"])).returncode == 75
    assert run(holder(mariadb_server, long_b, command=["true"])).returncode == 0
    release.touch()
    assert first.wait(timeout=TIMEOUT) == 0


# --- the whole process tree (a `sh -c "step1; step2"` wrapper) -------------------------------

def beating(beats: Path, *, ignore_term: bool = False) -> str:
    """A step that appends a nanosecond timestamp every 20 ms until it is killed: its last
    line is (within 20 ms) the moment it stopped running."""
    trap = 'trap "" TERM; ' if ignore_term else ""
    return f'sh -c \'{trap}while :; do date +%s%N >> "{beats}"; sleep 0.02; done\''


def started_at(path: Path) -> list[str]:
    return ["sh", "-c", f'date +%s%N > "{path}"']


def last_beat(beats: Path) -> int:
    return int(beats.read_text().split()[-1])


def no_overlap(beats: Path, second_start: Path) -> None:
    """Every beat of the first run happened before the second run started."""
    start = int(second_start.read_text())
    first = int(beats.read_text().split()[0])
    assert first < start, "the second run started first: the test raced itself"
    assert last_beat(beats) < start, f"overlap {(last_beat(beats) - start) / 1e9:.3f}s"


@pytest.mark.parametrize("wrapper", ["step1-then-step2", "step1-ignores-sigterm"])
def test_stopped_holder_releases_only_after_every_descendant(server, lock_name, tmp_path,
                                                             wrapper):
    """SIGTERM to the holder (systemctl stop, KillMode=mixed) reaches step1 inside the
    wrapper too; one that ignores it gets SIGKILL after --grace; a second holder waiting
    for the lock starts only after step1's last beat."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    step1 = beating(beats, ignore_term=wrapper == "step1-ignores-sigterm")
    first = spawn(holder(server, lock_name, "--grace", "1",
                         command=["sh", "-c", f"{step1}; echo step2 >> {tmp_path / 'step2'}"]),
                  start_new_session=True)
    wait_for(lambda: beats.exists(), what="step1 to run")
    waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
    wait_logged(waiter, f"waiting name={lock_name}")
    first.send_signal(signal.SIGTERM)
    # The stop ended the command's leader (the sh wrapper): the holder ends by it too (lock.leave)
    assert first.wait(timeout=TIMEOUT) == -signal.SIGTERM, stderr_of(first)
    assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
    no_overlap(beats, second)
    assert not (tmp_path / "step2").exists()
    if wrapper == "step1-ignores-sigterm":
        assert f"killed name={lock_name}" in stderr_of(first)


def test_sigkilled_holder_takes_the_whole_wrapper_with_it(server, lock_name, tmp_path):
    """SIGKILL to the holder (nothing it can catch): its keeper kills the command's whole
    process group, step1 inside the wrapper included, before the SQL session ends (Redis:
    before the lease runs out), so the waiting second holder starts after step1's end."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    first = spawn(holder(server, lock_name, "--ttl", "2",
                         command=["sh", "-c", f"{beating(beats)}; echo step2 >> {tmp_path / 'step2'}"]),
                  start_new_session=True)
    wait_for(lambda: beats.exists(), what="step1 to run")
    waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
    wait_logged(waiter, f"waiting name={lock_name}")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=TIMEOUT)
    assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
    no_overlap(beats, second)
    assert not (tmp_path / "step2").exists()


def test_leftover_background_process_is_stopped_before_release(server, lock_name, tmp_path):
    """A command that exits leaving a background process behind: the holder stops it
    before releasing, so it never runs beside the next holder's command."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    first = spawn(holder(server, lock_name, "--grace", "1",
                         command=["sh", "-c", f"{beating(beats)} & sleep 0.3; exit 0"]))
    wait_for(lambda: beats.exists(), what="the background process to run")
    waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
    assert first.wait(timeout=TIMEOUT) == 0, stderr_of(first)
    assert f"leftover name={lock_name} processes=" in stderr_of(first)
    assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
    no_overlap(beats, second)


# --- lock lost server-side: detection bound (docs/cluster-locks.md) ---------------------------

CONNECT_TIMEOUT = 2.0  # what holder() passes
# Documented worst case from the loss on the server to the command's SIGTERM: Redis, the
# renewal interval (1 s) + one renewal round trip (--connect-timeout); SQL, the socket wakes
# the watcher at once, else the 1 s check + its round trip. SCHEDULING: the command's own
# exit after SIGTERM and a loaded test machine's scheduling, allowed on top.
DETECTION_BOUND = {"redis": 1.0 + CONNECT_TIMEOUT, "mariadb": 1.0 + CONNECT_TIMEOUT,
                   "postgres": 1.0 + CONNECT_TIMEOUT}
SCHEDULING = 1.0


def _lose(server: Server, lock_name: str, how: str) -> None:
    if how == "restart":
        server.stop()
        server.start()
    elif server.kind == "redis":
        server.client().delete(f"jobgen:{lock_name}")
    elif server.kind == "mariadb":
        import pymysql

        from jobgen.contract.locks import get_lock_name

        conn = pymysql.connect(unix_socket=str(server.socket), user="root", password="")
        with conn.cursor() as cur:
            cur.execute("SELECT IS_USED_LOCK(%s)", (get_lock_name(lock_name),))
            (conn_id,) = cur.fetchone()
            cur.execute(f"KILL {int(conn_id)}")
        conn.close()
    else:
        import psycopg

        from jobgen.contract.locks import advisory_key

        key = advisory_key(lock_name) & 0xFFFFFFFFFFFFFFFF
        with psycopg.connect(host="127.0.0.1", port=server.port, user="jobgen",
                             password=holder_env()[PASSWORD_VAR], dbname="postgres",
                             autocommit=True) as conn:
            n = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = "
                "'advisory' AND granted AND classid = %s::oid AND objid = %s::oid "
                "AND objsubid = 1", (str(key >> 32), str(key & 0xFFFFFFFF))).fetchone()[0]
        assert n == 1


@pytest.mark.parametrize("how", ["session-killed", "restart"])
def test_lock_lost_server_side_stops_the_command_within_the_bound(server, lock_name, tmp_path,
                                                                   how):
    """Redis: the key deleted, or a restart without persistence. MariaDB: KILL of the
    session. PostgreSQL: pg_terminate_backend. Any: a server restart. The first command is
    stopped (76) and overlaps a second holder, started the moment the lock is free
    again, by no more than the documented detection bound."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    first = spawn(holder(server, lock_name, "--grace", "1", command=["sh", "-c", beating(beats)]))
    wait_for(lambda: beats.exists(), what="first command to run")
    if how == "session-killed":
        # the second holder already waits, so it gets the lock the moment it is free
        waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
        wait_logged(waiter, f"waiting name={lock_name}")
        _lose(server, lock_name, how)
    else:  # a waiter would lose its own connection in the restart: start it right after
        _lose(server, lock_name, how)
        waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
    assert first.wait(timeout=TIMEOUT) == 76, stderr_of(first)
    assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
    overlap = (last_beat(beats) - int(second.read_text())) / 1e9
    bound = DETECTION_BOUND[server.kind] + SCHEDULING
    print(f"{server.kind} {how}: overlap {max(overlap, 0):.3f}s (bound {bound:g}s)")
    assert overlap <= bound, stderr_of(first)
