"""A stopped or killed `jobgen lock` holder never leaves its command running beside the
next holder, on real redis-server, MariaDB and PostgreSQL.

- Ctrl-Z (SIGTSTP): the command's processes stop with the holder and continue with it;
  a Redis lease that ran out meanwhile may be another holder's: the command is killed
  where it stands (76), never continued beside the next run.
- SIGSTOP (uncatchable): the holder's keeper, which the stop does not reach, kills the
  command before the Redis lease it can no longer renew runs out. A SQL lock lives as long
  as the session, which a stopped holder keeps: nobody else gets it.
- SIGKILL: the keeper kills every process it saw below the holder, those that left the
  process group (setpgid, `set -m`) or the session (setsid) included.

Overlaps are measured (printed), never asserted against a time: where the README promises
none, the test asserts none.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from lockservers import Server, holder_argv, holder_env

from jobgen.runtime import tree

pytestmark = pytest.mark.cluster

TIMEOUT = 60
TTL = "2"  # Redis: a lease that runs out within the test


def holder(server: Server, name: str, *opts: str, command: list[str]) -> list[str]:
    return holder_argv("--backend", server.url(), "--name", name, "--connect-timeout", "2",
                       "--ttl", TTL, *opts, "--", *command)


def spawn(argv: list[str], **kw) -> subprocess.Popen:
    fd, path = tempfile.mkstemp(prefix="jobgen-holder-", suffix=".err")
    try:
        proc = subprocess.Popen(argv, env=holder_env(), stdout=subprocess.DEVNULL, stderr=fd, **kw)
    finally:
        os.close(fd)
    proc.errlog = Path(path)  # type: ignore[attr-defined]
    return proc


def stderr_of(proc: subprocess.Popen) -> str:
    return proc.errlog.read_text()  # type: ignore[attr-defined]


@pytest.fixture
def procs():
    """Every holder a test starts is gone (and its log removed) when the test ends."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
        p.errlog.unlink(missing_ok=True)  # type: ignore[attr-defined]


def wait_for(predicate, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def state(pid: int) -> str:
    """The process state letter (R, S, T stopped, Z), '' when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return ""


def beating(beats: Path) -> str:
    """Appends a nanosecond timestamp every 20 ms: its last line is (within 20 ms) the
    moment it stopped running."""
    return f'while :; do date +%s%N >> "{beats}"; sleep 0.02; done'


def beats_of(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def started_at(path: Path) -> list[str]:
    return ["sh", "-c", f'date +%s%N > "{path}"']


def overlap(beats: Path, second: Path) -> float:
    """Seconds the first command ran after the second started (negative: it had stopped)."""
    return (beats_of(beats)[-1] - int(second.read_text())) / 1e9


def lived_past_a_keeper_scan(beats: Path) -> bool:
    """The beating process has been alive longer than the keeper's scan interval (twice),
    so the keeper has seen it: a younger one is the documented exception."""
    b = beats_of(beats)
    return len(b) > 1 and b[-1] - b[0] > 2 * tree.KEEPER_SCAN * 1e9


# --- Ctrl-Z ---------------------------------------------------------------------------------

def test_ctrl_z_stops_the_command_with_the_holder(server, lock_name, tmp_path, procs):
    """SIGTSTP to the holder (its own process group, as a shell job): the command stops too
    (state T, no beat while stopped). Redis: the lease runs out, a second holder runs, and
    `fg` (SIGCONT) kills the first command instead of continuing it: exit 76, no overlap.
    SQL: the session holds the lock, a second holder conflicts (75); after SIGCONT the
    command runs on."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    first = spawn(holder(server, lock_name, "--grace", "1",
                         command=["sh", "-c", beating(beats)]), process_group=0)
    procs.append(first)
    wait_for(lambda: beats_of(beats), "the command to run")
    first.send_signal(signal.SIGTSTP)
    wait_for(lambda: state(first.pid) == "T", "the holder to stop")
    wait_for(lambda: "stopped name=" in stderr_of(first), "the holder to log the stop")
    stopped_at = len(beats_of(beats))
    if server.kind == "redis":
        waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
        procs.append(waiter)
        assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=TIMEOUT) == 76, stderr_of(first)
        assert "lease-lost" in stderr_of(first)
        gap = overlap(beats, second)
        print(f"redis ctrl-z: overlap {max(gap, 0):.3f}s (last beat {-gap:.3f}s before the "
              "second run)")
        assert gap < 0, f"overlap {gap:.3f}s"
    else:
        ran = tmp_path / "ran"
        other = subprocess.run(holder(server, lock_name, command=["touch", str(ran)]),
                               env=holder_env(), capture_output=True, text=True, timeout=TIMEOUT)
        assert other.returncode == 75, other.stderr
        assert not ran.exists()
        assert len(beats_of(beats)) <= stopped_at + 1  # one beat may have been in flight
        first.send_signal(signal.SIGCONT)
        wait_for(lambda: len(beats_of(beats)) > stopped_at + 2, "the command to continue")
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=TIMEOUT) == -signal.SIGTERM, stderr_of(first)  # the stop ended the command: the holder ends by it (cli._leave)


# --- SIGSTOP --------------------------------------------------------------------------------

def test_sigstop_of_the_holder_never_lets_the_command_outlive_the_lock(server, lock_name,
                                                                      tmp_path, procs):
    """SIGSTOP to the holder alone (nothing it can catch). Redis: its keeper kills the
    command before the lease it can no longer renew runs out; the second holder, waiting,
    starts after the command's last beat; SIGCONT: the holder exits 76. SQL: the stopped
    holder keeps the session and the lock: a second holder conflicts (75); SIGCONT and
    SIGTERM back to back (the SIGTERM then lands on a thread other than the main one:
    test_a_stop_signal_taken_by_a_side_thread_still_ends_the_holder) end it by SIGTERM."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    first = spawn(holder(server, lock_name, "--grace", "1",
                         command=["sh", "-c", beating(beats)]), start_new_session=True)
    procs.append(first)
    wait_for(lambda: beats_of(beats), "the command to run")
    if server.kind == "redis":
        waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
        procs.append(waiter)
        wait_for(lambda: "waiting name=" in stderr_of(waiter), "the second holder to wait")
        first.send_signal(signal.SIGSTOP)
        assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
        gap = overlap(beats, second)
        print(f"redis sigstop: overlap {max(gap, 0):.3f}s (last beat {-gap:.3f}s before the "
              "second run)")
        assert gap < 0, f"overlap {gap:.3f}s"
        assert f"lease-expiring holder pid={first.pid}" in stderr_of(first)
        first.send_signal(signal.SIGCONT)
        assert first.wait(timeout=TIMEOUT) == 76, stderr_of(first)
    else:
        first.send_signal(signal.SIGSTOP)
        wait_for(lambda: state(first.pid) == "T", "the holder to stop")
        ran = tmp_path / "ran"
        other = subprocess.run(holder(server, lock_name, command=["touch", str(ran)]),
                               env=holder_env(), capture_output=True, text=True, timeout=TIMEOUT)
        assert other.returncode == 75, other.stderr
        assert not ran.exists()
        first.send_signal(signal.SIGCONT)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=TIMEOUT) == -signal.SIGTERM, stderr_of(first)  # the stop ended the command: the holder ends by it (cli._leave)


def side_threads(pid: int) -> list[int]:
    """The holder's threads other than the main one (whose id is the pid), oldest first."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    except FileNotFoundError:
        return []


def tgkill(pid: int, tid: int, signum: int) -> None:
    """signum to one thread of pid (tgkill(2)): where the kernel puts a signal sent to the
    process when the main thread already has one pending (signal(7))."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, signum) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def test_a_stop_signal_taken_by_a_side_thread_still_ends_the_holder(server, lock_name,
                                                                   tmp_path, procs):
    """SIGTERM delivered to the holder's lock watcher thread, not its main thread (what the
    kernel does with `kill -CONT; kill -TERM` back to back: the main thread still has the
    SIGCONT pending): the main thread, which waits for the command, still forwards it, and
    the holder ends by SIGTERM like its command, on every backend."""
    beats = tmp_path / "beats"
    first = spawn(holder(server, lock_name, "--grace", "1", command=["sh", "-c", beating(beats)]),
                  start_new_session=True)
    procs.append(first)
    wait_for(lambda: beats_of(beats) and side_threads(first.pid), "the command and the watcher")
    tgkill(first.pid, side_threads(first.pid)[0], signal.SIGTERM)
    assert first.wait(timeout=TIMEOUT) == -signal.SIGTERM, stderr_of(first)
    assert f"forwarded name={lock_name} signal=SIGTERM" in stderr_of(first)


# --- SIGKILL: descendants that left the group or the session -------------------------------

LEAVERS = {
    # bash job control (`set -m`): the background job gets a process group of its own
    "setpgid": lambda beats: ["bash", "-c", f"set -m; sh -c '{beating(beats)}' & wait"],
    "setsid": lambda beats: ["sh", "-c", f"setsid sh -c '{beating(beats)}' & wait"],
}


@pytest.mark.parametrize("leaver", list(LEAVERS))
def test_sigkilled_holder_takes_descendants_that_left_its_group(server, lock_name, tmp_path,
                                                               procs, leaver):
    """SIGKILL to the holder while a descendant that left the command's process group
    (or session) beats: the keeper kills it, so the waiting second holder starts after its
    last beat, on every backend."""
    beats, second = tmp_path / "beats", tmp_path / "second"
    first = spawn(holder(server, lock_name, command=LEAVERS[leaver](beats)),
                  start_new_session=True)
    procs.append(first)
    wait_for(lambda: lived_past_a_keeper_scan(beats), "the descendant to run")
    waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
    procs.append(waiter)
    wait_for(lambda: "waiting name=" in stderr_of(waiter), "the second holder to wait")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=TIMEOUT)
    assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
    gap = overlap(beats, second)
    print(f"{server.kind} {leaver} descendant, holder SIGKILLed: overlap {max(gap, 0):.3f}s")
    assert gap < 0, f"overlap {gap:.3f}s"


def test_lock_lost_while_the_holder_is_stopped_ends_the_command_without_it(server, lock_name,
                                                                           tmp_path, procs):
    """SIGSTOP to the holder, then the lock is lost on the server (Redis: the key deleted;
    MariaDB: KILL of the session; PostgreSQL: pg_terminate_backend) and a waiting second
    holder takes it. The keeper kills the command while the holder is still stopped (SQL:
    --grace + 1 s after the server closed the session; Redis: before the lease of the last
    renewal runs out); SIGCONT: the holder exits 76. The overlap is measured."""
    from test_lock_holder import _lose

    beats, second, pidfile = tmp_path / "beats", tmp_path / "second", tmp_path / "pid"
    first = spawn(holder(server, lock_name, "--grace", "1",
                         command=["sh", "-c", f'echo $$ > "{pidfile}"; {beating(beats)}']),
                  start_new_session=True)
    procs.append(first)
    wait_for(lambda: beats_of(beats), "the command to run")
    command = int(pidfile.read_text())
    waiter = spawn(holder(server, lock_name, "--wait", "60", command=started_at(second)))
    procs.append(waiter)
    wait_for(lambda: "waiting name=" in stderr_of(waiter), "the second holder to wait")
    first.send_signal(signal.SIGSTOP)
    wait_for(lambda: state(first.pid) == "T", "the holder to stop")
    _lose(server, lock_name, "session-killed")
    assert waiter.wait(timeout=TIMEOUT) == 0, stderr_of(waiter)
    wait_for(lambda: state(command) in ("Z", ""), "the keeper to kill the command")
    assert state(first.pid) == "T"  # still stopped: the keeper did it, not the holder
    event = "lease-expiring" if server.kind == "redis" else "session-ended"
    assert f"{event} holder pid={first.pid}" in stderr_of(first)
    gap = overlap(beats, second)
    print(f"{server.kind} lock lost while the holder is stopped: overlap {max(gap, 0):.3f}s")
    first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=TIMEOUT) == 76, stderr_of(first)


def test_a_grace_longer_than_the_lease_does_not_outlive_it(redis_server, lock_name, tmp_path,
                                                          procs):
    """Redis hangs mid-run; the command ignores SIGTERM and --grace (30 s) does not fit in
    the lease (--ttl 3): the keeper SIGKILLs it before the lease of the last renewal runs
    out, not after --grace. The holder warned at start and exits 76."""
    beats = tmp_path / "beats"
    first = spawn(holder_argv("--backend", redis_server.url(), "--name", lock_name,
                              "--connect-timeout", "2", "--ttl", "3", "--grace", "30", "--",
                              "sh", "-c", f"trap '' TERM; {beating(beats)}"))
    procs.append(first)
    wait_for(lambda: beats_of(beats), "the command to run")
    redis_server.pause()
    try:
        assert first.wait(timeout=TIMEOUT) == 76, stderr_of(first)
    finally:
        redis_server.resume()
    err = stderr_of(first)
    assert "config-warning" in err
    assert f"lease-expiring holder pid={first.pid}" in err
    assert f"killed name={lock_name}" not in err  # not the --grace SIGKILL: the keeper's
