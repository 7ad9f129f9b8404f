"""The drainer (runtime/queue/drain.py) with real commands and a real kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from jobgen.runtime.queue.drain import drain
from jobgen.runtime.queue.spool import FAILED, PENDING, Spool

LOG_CMD = ("/bin/sh", "-c", 'echo "$JOBGEN_REQUEST_ID $JOBGEN_REQUEST_ATTEMPT $*" >> "$LOG"; exit "${FAIL:-0}"', "job")


def collect():
    lines = []
    return lines, lambda outcome, req, msg: lines.append((outcome, req.id if req else None))


def test_drains_in_order_with_the_request_id_and_arguments(tmp_path):
    s = Spool(tmp_path / "q")
    s.root.mkdir()
    ids = [s.enqueue((f"arg{i}",)).request.id for i in range(3)]
    log, record = collect()
    summary = drain(s, LOG_CMD, {"LOG": str(tmp_path / "log"), "PATH": "/usr/bin:/bin"}, record)
    assert (summary.done, summary.exit_code) == (3, 0)
    assert (tmp_path / "log").read_text().splitlines() == [f"{i} 1 arg{n}" for n, i in enumerate(ids)]
    assert log == [(o, i) for i in ids for o in ("started", "done")]


def test_a_failure_stays_first_and_ends_the_drain(tmp_path):
    s = Spool(tmp_path / "q", max_attempts=2)
    s.root.mkdir()
    a, b = s.enqueue(("a",)).request.id, s.enqueue(("b",)).request.id
    env = {"LOG": str(tmp_path / "log"), "FAIL": "4", "PATH": "/usr/bin:/bin"}
    log, record = collect()
    first = drain(s, LOG_CMD, env, record)
    assert (first.retry, first.exit_code) == (1, 1)
    assert [r.id for r in s.list(PENDING)] == [a, b]  # b never overtook a
    second = drain(s, LOG_CMD, env, record)
    assert second.failed == 1 and [r.id for r in s.list(FAILED)] == [a]
    third = drain(s, LOG_CMD, env | {"FAIL": "0"}, record)
    assert third.done == 1 and s.list(PENDING) == []
    assert (tmp_path / "log").read_text().splitlines() == [f"{a} 1 a", f"{a} 2 a", f"{b} 1 b"]


DRAINER = """
import sys
from pathlib import Path
from jobgen.runtime.queue.drain import drain
from jobgen.runtime.queue.spool import Spool
s = Spool(Path(sys.argv[1]), max_attempts=3)
drain(s, ("/bin/sh", "-c", 'echo "start $JOBGEN_REQUEST_ID $JOBGEN_REQUEST_ATTEMPT" >> "$LOG"; echo $$ > "$LOG.pid"; exec sleep 600'),
      {"LOG": sys.argv[2], "PATH": "/usr/bin:/bin"}, lambda outcome, req, msg: print(outcome, msg, flush=True))
"""


def wait_for(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_kill_9_mid_run_leaves_the_request_to_be_retried(tmp_path):
    s = Spool(tmp_path / "q", max_attempts=3)
    s.root.mkdir()
    rid = s.enqueue().request.id
    log = tmp_path / "log"
    drainer = subprocess.Popen([sys.executable, "-c", DRAINER, str(s.root), str(log)])
    try:
        wait_for(lambda: Path(f"{log}.pid").exists() and Path(f"{log}.pid").read_text().strip())
        os.kill(drainer.pid, signal.SIGKILL)
        drainer.wait(timeout=60)
    finally:
        # systemd would kill the unit's whole cgroup; here the orphaned command's group.
        pid = int(Path(f"{log}.pid").read_text())
        os.killpg(pid, signal.SIGKILL)
    assert [r.id for r in s.list("running")] == [rid]
    log.unlink()
    Path(f"{log}.pid").unlink()
    summary = drain(Spool(s.root, max_attempts=3), ("/bin/sh", "-c", 'echo "again $JOBGEN_REQUEST_ID $JOBGEN_REQUEST_ATTEMPT" >> "$LOG"'),
                    {"LOG": str(log), "PATH": "/usr/bin:/bin"}, lambda *a: None)
    assert (summary.recovered, summary.done) == (1, 1)
    assert log.read_text() == f"again {rid} 2\n"  # the killed run counted as attempt 1


def test_sigterm_reaches_the_commands_process_group_and_the_request_is_put_back_unspent(tmp_path):
    # A stop (systemctl stop, a shutdown) is not the request's failure: back to pending with
    # the attempt given back and no exit status recorded against it.
    s = Spool(tmp_path / "q")
    s.root.mkdir()
    rid = s.enqueue().request.id
    log = tmp_path / "log"
    drainer = subprocess.Popen([sys.executable, "-c", DRAINER, str(s.root), str(log)], stdout=subprocess.PIPE, text=True)
    wait_for(lambda: Path(f"{log}.pid").exists() and Path(f"{log}.pid").read_text().strip())
    os.kill(drainer.pid, signal.SIGTERM)
    assert drainer.wait(timeout=120) == 0  # the drain ended by itself after the command did
    said = drainer.stdout.read().splitlines()
    assert said[-1] == f"stopped request {rid}: interrupted by a stop (signal SIGTERM, exit status 143): back to pending, attempt not counted (0 of 3 used)"
    pid = int(Path(f"{log}.pid").read_text())
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"))
    assert [(r.id, r.state, r.attempts, r.last_status) for r in s.list(PENDING)] == [(rid, PENDING, 0, None)]


def test_what_a_request_left_running_is_killed_before_the_next_one(tmp_path):
    s = Spool(tmp_path / "q")
    s.root.mkdir()
    s.enqueue(("first",))
    s.enqueue(("second",))
    # The first request leaves a background process behind in its process group.
    cmd = ("/bin/sh", "-c", 'if [ "$1" = first ]; then sleep 600 & echo $! > "$PIDFILE"; fi; echo "$1" >> "$LOG"', "job")
    env = {"LOG": str(tmp_path / "log"), "PIDFILE": str(tmp_path / "pid"), "PATH": "/usr/bin:/bin"}
    assert drain(s, cmd, env, lambda *a: None).done == 2
    pid = int((tmp_path / "pid").read_text())
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z")


def test_a_request_past_its_timeout_is_stopped_and_counted_as_a_failure(tmp_path):
    s = Spool(tmp_path / "q", max_attempts=1)
    s.root.mkdir()
    rid = s.enqueue().request.id
    log, record = collect()
    summary = drain(s, ("/bin/sh", "-c", "exec sleep 600"), {"PATH": "/usr/bin:/bin"}, record, timeout=1)
    assert (summary.failed, summary.exit_code) == (1, 1)
    assert [o for o, _ in log] == ["started", "timeout", "failed"]
    assert s.find(rid).last_status == 124


def test_a_helper_in_its_own_session_does_not_run_beside_the_next_request(tmp_path):
    """The first request starts a helper that leaves its session (setsid) and its process
    group and beats every 20 ms; the request exits. The helper is gone before the second
    request starts: its last beat comes before the second request's start."""
    s = Spool(tmp_path / "q")
    s.root.mkdir()
    s.enqueue(("first",))
    s.enqueue(("second",))
    beats, second = tmp_path / "beats", tmp_path / "second"
    helper = f'while :; do date +%s%N >> "{beats}"; sleep 0.02; done'
    cmd = ("/bin/sh", "-c",
           f'if [ "$1" = first ]; then setsid sh -c \'{helper}\' & '
           f'while [ ! -s "{beats}" ]; do sleep 0.02; done; else date +%s%N > "{second}"; fi', "job")
    assert drain(s, cmd, {"PATH": "/usr/bin:/bin"}, lambda *a: None).done == 2
    start, last = int(second.read_text()), int(beats.read_text().split()[-1])
    assert last < start, f"the helper ran {(last - start) / 1e9:.3f}s into the next request"


def test_sigterm_reaches_a_helper_in_its_own_session(tmp_path):
    """SIGTERM to the drainer reaches a helper the request started with setsid too."""
    s = Spool(tmp_path / "q")
    s.root.mkdir()
    s.enqueue()
    log = tmp_path / "log"
    drainer_code = DRAINER.replace("exec sleep 600", "setsid sleep 600 & echo $! > \\\"$LOG.helper\\\"; wait")
    drainer = subprocess.Popen([sys.executable, "-c", drainer_code, str(s.root), str(log)])
    helper = Path(f"{log}.helper")
    wait_for(lambda: helper.exists() and helper.read_text().strip())
    os.kill(drainer.pid, signal.SIGTERM)
    assert drainer.wait(timeout=120) == 0
    pid = int(helper.read_text())
    assert not os.path.exists(f"/proc/{pid}")  # killed and reaped before the drain ended
