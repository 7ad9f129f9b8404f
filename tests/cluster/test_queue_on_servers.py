"""The cluster-scope queue (runtime/queue/cluster.py) on real redis-server, MariaDB and
PostgreSQL started on loopback: the spool's promises, kept on a server the whole fleet sees.

The fleet test stands three drainer processes in for three hosts: each loops
`jobgen lock --wait ... -- python DRAIN` (the real holder through the real entry point), while
several enqueuers add 200 requests. Every request must run exactly once, never two at once,
in the order they were enqueued.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobgen.runtime.backends import Options, parse_url
from jobgen.runtime.queue.cluster import Limits, open_queue
from jobgen.runtime.queue.spool import FAILED, PENDING, RUNNING, QueueFull
from lockservers import PASSWORD, holder_argv, holder_env

from jobgen.contract.queue import redis_queue_keys

pytestmark = pytest.mark.cluster
OPTS = Options(wait=0, ttl=5, connect_timeout=10)


def queue_url(server) -> str:
    """The lock URL, naming a database for the SQL servers (a queue needs tables; a lock
    does not, so the lock tests' MariaDB URL names none)."""
    if server.kind != "mariadb":
        return server.url()
    import pymysql

    conn = pymysql.connect(unix_socket=str(server.socket), user="root", password="")
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS jobgen_queue")
        cur.execute("GRANT ALL ON jobgen_queue.* TO 'jobgen'@'%'")
    conn.close()
    return server.url() + "/jobgen_queue"


def queue(server, name, **limits):
    return open_queue(parse_url(queue_url(server), holder_env()), name, Limits(**limits), OPTS)


def test_order_attempts_failed_set_and_recovery(server, lock_name):
    q = queue(server, lock_name, max_attempts=2)
    a = q.enqueue(("a",), by="test").request
    b = q.enqueue(("b",)).request
    assert [r.id for r in q.list(PENDING)] == [a.id, b.id] and a.id < b.id
    first = q.take()
    assert (first.id, first.attempts, first.state) == (a.id, 1, RUNNING)
    assert q.finish(first, 3) == "retry"
    assert [r.id for r in q.list(PENDING)] == [a.id, b.id]  # a failed request stays first
    q.take()  # a drainer dies here: a is running with its second attempt counted
    again = queue(server, lock_name, max_attempts=2)  # the next drainer, maybe on another host
    assert [(r.id, r.state) for r in again.recover()] == [(a.id, FAILED)]
    assert [r.id for r in again.list(FAILED)] == [a.id]
    nxt = again.take()
    assert nxt.id == b.id and again.finish(nxt, 0) == "done"
    assert again.retry(a.id).state == PENDING
    assert again.drop(a.id).id == a.id
    assert [again.list(s) for s in (PENDING, RUNNING, FAILED)] == [[], [], []]


def test_a_request_a_stop_interrupted_goes_back_first_with_its_attempt(server, lock_name):
    """A drainer stopped mid-request (a shutdown) puts it back (drain.py): the stop is not
    the request's failure, so it does not spend one of max_attempts."""
    q = queue(server, lock_name, max_attempts=1)
    a = q.enqueue(("a",)).request
    b = q.enqueue(("b",)).request
    running = q.take()
    assert (running.id, running.attempts) == (a.id, 1)
    back = q.put_back(running)
    assert (back.id, back.state, back.attempts) == (a.id, PENDING, 0)
    assert [r.id for r in q.list(PENDING)] == [a.id, b.id] and q.list(RUNNING) == []
    again = q.take()  # its one attempt is still there to run
    assert (again.id, again.attempts) == (a.id, 1) and q.finish(again, 0) == "done"


def test_full_queue_rejects_or_coalesces(server, lock_name):
    q = queue(server, lock_name, max_pending=1, on_full="reject")
    q.enqueue()
    with pytest.raises(QueueFull, match=r"^1 requests pending \(max_pending 1\)$"):
        q.enqueue()
    c = queue(server, lock_name + "-c", max_pending=1, on_full="coalesce")
    first = c.enqueue().request
    same = c.enqueue()
    assert (same.outcome, same.request.id) == ("coalesced", first.id)
    assert len(c.list(PENDING)) == 1


def raw_redis(server):
    import redis

    return redis.Redis(host="127.0.0.1", port=server.port, password=PASSWORD, decode_responses=True)


def number(rid: str) -> int:
    return int(rid.split("-")[0])


@pytest.mark.parametrize("key", ["seq", "pending", "req"])
def test_a_lock_named_like_a_queue_key_cannot_touch_the_queue(redis_server, lock_name, key):
    """The lock `queue:NAME:seq` (`:pending`, `:req:ID`) names none of queue NAME's keys:
    it is taken and its command runs (exit 0), and the queue's requests, their order and
    their numbering are as they were."""
    q = queue(redis_server, lock_name)
    a, b = q.enqueue(("a",)).request, q.enqueue(("b",)).request
    suffix = f"req:{a.id}" if key == "req" else key
    held = subprocess.run(holder_argv("--backend", redis_server.url(), "--name",
                                      f"queue:{lock_name}:{suffix}", "--", "true"),
                          env=holder_env(), capture_output=True, text=True, timeout=60)
    assert held.returncode == 0, held.stderr
    assert [(r.id, r.args) for r in q.list(PENDING)] == [(a.id, ("a",)), (b.id, ("b",))]
    assert number(q.enqueue(("c",)).request.id) == 3


def test_requests_left_under_an_older_releases_keys_are_drained_first(redis_server, lock_name):
    """Requests an older release left pending under `jobgen:queue:NAME:` (written here as it
    wrote them): an upgraded host numbers its requests after them, and the first drain
    (its first step, recover) moves them ahead of those, in order, leaving no old key."""
    old = redis_queue_keys(lock_name, legacy=True)
    r = raw_redis(redis_server)
    ids = [f"{n:020d}-0000000{n}" for n in (1, 2)]
    for n, rid in enumerate(ids, 1):
        r.hset(old["req"] + rid, mapping={"args": json.dumps([f"old{n}"]), "enqueued_usec": n,
                                          "attempts": 0, "by": "old"})
        r.rpush(old[PENDING], rid)
    r.set(old["seq"], 2)
    q = queue(redis_server, lock_name)
    new = q.enqueue(("new",)).request  # before the first drain
    assert number(new.id) == 3
    assert q.recover() == []
    assert [(x.id, x.args, x.by) for x in q.list(PENDING)] == [
        (ids[0], ("old1",), "old"), (ids[1], ("old2",), "old"), (new.id, ("new",), "")]
    assert r.keys(old[PENDING].rpartition(":")[0] + ":*") == []
    assert number(q.enqueue(("next",)).request.id) == 4


DRAIN = """
import os, sys, time
from jobgen.runtime.backends import Options, parse_url
from jobgen.runtime.queue.cluster import Limits, open_queue
from jobgen.runtime.queue.drain import drain
url, name, log = sys.argv[1:4]
q = open_queue(parse_url(url, os.environ), name, Limits(max_pending=10000), Options(0, 5, 10))
cmd = ("/bin/sh", "-c", 'echo "start $JOBGEN_REQUEST_ID $HOST" >> "$LOG"; echo "end $JOBGEN_REQUEST_ID $HOST" >> "$LOG"')
summary = drain(q, cmd, {"LOG": log, "HOST": os.environ["HOST"], "PATH": "/usr/bin:/bin"}, lambda *a: None, limit=int(sys.argv[4]))
# 3: the queue was empty when this drainer looked (tells the loop below to stop).
sys.exit(3 if summary.done == 0 else summary.exit_code)
"""

HOST = """
import os, subprocess, sys
done, turn = sys.argv[1], sys.argv[2:]
while True:
    rc = subprocess.run(turn).returncode
    if rc == 3 and os.path.exists(done):
        break
    if rc not in (0, 3, 75):
        sys.exit(rc)
"""

ENQUEUE = """
import os, sys
from jobgen.runtime.backends import Options, parse_url
from jobgen.runtime.queue.cluster import Limits, open_queue
url, name, who, n = sys.argv[1:5]
q = open_queue(parse_url(url, os.environ), name, Limits(max_pending=10000), Options(0, 5, 10))
for i in range(int(n)):
    q.enqueue((who, str(i)))
"""


def test_three_drainers_run_200_requests_once_each_one_at_a_time_in_order(server, lock_name, tmp_path):
    url, log = queue_url(server), tmp_path / "log"
    enqueuers = [subprocess.Popen([sys.executable, "-c", ENQUEUE, url, lock_name, str(w), "50"], env=holder_env()) for w in range(4)]
    hosts = []
    for host in ("h1", "h2", "h3"):
        # Each host drains in short turns under the cluster lock until the queue is empty
        # and every enqueuer is done, as a timer and a .path unit would keep starting it.
        turn = [*holder_argv("--backend", url, "--name", lock_name, "--wait", "120", "--"),
                sys.executable, "-c", DRAIN, url, lock_name, str(log), "10"]
        hosts.append(subprocess.Popen([sys.executable, "-c", HOST, str(tmp_path / "enqueued"), *turn], env=holder_env(HOST=host)))
    try:
        for e in enqueuers:
            assert e.wait(timeout=600) == 0
        (tmp_path / "enqueued").touch()
        for h in hosts:
            assert h.wait(timeout=900) == 0
    finally:
        for p in enqueuers + hosts:
            if p.poll() is None:
                p.kill()
                p.wait()
    lines = log.read_text().splitlines()
    starts = [line.split()[1] for line in lines if line.startswith("start")]
    assert len(starts) == 200 and len(set(starts)) == 200  # each request ran exactly once
    for i in range(0, len(lines), 2):  # never two at once: every start is followed by its own end
        assert lines[i].startswith("start") and lines[i + 1] == "end" + lines[i][len("start"):]
    assert starts == sorted(starts)  # in the order the server numbered them
    assert len({line.split()[2] for line in lines}) >= 2  # more than one host took turns
    q = queue(server, lock_name)
    assert [q.list(s) for s in (PENDING, RUNNING, FAILED)] == [[], [], []]


SLOW_DRAIN = DRAIN.replace(
    "cmd = (\"/bin/sh\", \"-c\", 'echo \"start $JOBGEN_REQUEST_ID $HOST\" >> \"$LOG\"; echo \"end $JOBGEN_REQUEST_ID $HOST\" >> \"$LOG\"')",
    "cmd = (\"/bin/sh\", \"-c\", 'echo $$ > \"$LOG.pid\"; echo \"start $JOBGEN_REQUEST_ID $HOST\" >> \"$LOG\"; exec sleep 600')",
)


def test_a_drainer_killed_mid_run_leaves_its_request_to_the_next_one(server, lock_name, tmp_path):
    """The host running a request dies (SIGKILL to its holder, drainer and command): the
    next drainer takes the lock when the server frees it (at once for the SQL backends, the
    session ends; after the lease's TTL for Redis) and runs the request again, first."""
    url, log = queue_url(server), tmp_path / "log"
    assert SLOW_DRAIN != DRAIN
    rid = queue(server, lock_name).enqueue(("a",)).request.id
    ttl = "3"
    first = subprocess.Popen(
        [*holder_argv("--backend", url, "--name", lock_name, "--ttl", ttl, "--"), sys.executable, "-c", SLOW_DRAIN, url, lock_name, str(log), "1"],
        env=holder_env(HOST="h1"), start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (log.exists() and log.read_text().startswith(f"start {rid}")):
            assert time.monotonic() < deadline and first.poll() is None, "the first drainer never started the request"
            time.sleep(0.05)
        # The host dies: every process of it at once (the holder's own group and the command's).
        pids = subprocess.run(["pgrep", "-s", str(first.pid)], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:  # the command, in a session of its own (the drainer's)
            os.kill(int(Path(f"{log}.pid").read_text()), signal.SIGKILL)
        except ProcessLookupError:
            pass
        first.wait(timeout=60)
        killed = time.monotonic()
        second = subprocess.run(
            [*holder_argv("--backend", url, "--name", lock_name, "--wait", "120", "--"), sys.executable, "-c", DRAIN, url, lock_name, str(log), "10"],
            env=holder_env(HOST="h2"), timeout=300,
        )
        reclaimed = time.monotonic() - killed
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 0
    lines = log.read_text().splitlines()
    assert lines == [f"start {rid} h1", f"start {rid} h2", f"end {rid} h2"]
    q = queue(server, lock_name)
    assert [q.list(s) for s in (PENDING, RUNNING, FAILED)] == [[], [], []]
    # Reclaimed once the server let go of the lock: within the TTL (Redis), at once (SQL).
    # The bound is the documented one plus a generous allowance for a loaded machine.
    bound = float(ttl) if server.kind == "redis" else 0.0
    print(f"{server.kind}: request reclaimed {reclaimed:.2f}s after its drainer was killed (documented bound {bound:g}s)")
    assert reclaimed < bound + 60
