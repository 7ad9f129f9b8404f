"""The host-scope spool (runtime/queue/spool.py), on real folders and real processes.

Each test is one promise of the spool's docstring: order, durability under concurrent
enqueuers, the two on_full answers, attempt counting, the failed set, and recovery after a
drainer was killed.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from jobgen.runtime.queue.spool import FAILED, PENDING, RUNNING, NoSuchRequest, QueueFull, Spool


def spool(tmp_path: Path, **kw) -> Spool:
    s = Spool(tmp_path / "spool", **kw)
    s.root.mkdir(exist_ok=True)
    return s


def test_requests_are_taken_in_arrival_order(tmp_path):
    s = spool(tmp_path)
    ids = [s.enqueue((f"n={i}",)).request.id for i in range(12)]  # past 9: digits, not text, sort
    taken = []
    while (req := s.take()) is not None:
        taken.append(req.id)
        assert s.finish(req, 0) == "done"
    assert taken == ids
    assert [s.list(st) for st in (PENDING, RUNNING, FAILED)] == [[], [], []]


def _enqueue_many(root: str, who: int, n: int) -> None:
    s = Spool(Path(root), max_pending=10_000)
    for i in range(n):
        s.enqueue((f"{who}", f"{i}"))


def test_concurrent_enqueuers_lose_nothing_and_share_no_number(tmp_path):
    s = spool(tmp_path, max_pending=10_000)
    procs = [multiprocessing.Process(target=_enqueue_many, args=(str(s.root), who, 25)) for who in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0
    reqs = s.list(PENDING)
    assert len(reqs) == 200
    seqs = [int(r.id.split("-")[0]) for r in reqs]
    assert seqs == list(range(1, 201))  # every number once, none skipped
    for who in range(8):  # each enqueuer's own requests keep their order
        mine = [int(r.args[1]) for r in reqs if r.args[0] == str(who)]
        assert mine == list(range(25))
    assert os.listdir(s.root / "tmp") == []  # nothing half-written left behind


def test_full_queue_rejects(tmp_path):
    s = spool(tmp_path, max_pending=2, on_full="reject")
    s.enqueue()
    s.enqueue()
    with pytest.raises(QueueFull, match=r"^2 requests pending \(max_pending 2\)$"):
        s.enqueue()
    assert len(s.list(PENDING)) == 2


def test_full_queue_coalesces_into_an_equal_pending_request(tmp_path):
    s = spool(tmp_path, max_pending=1, on_full="coalesce")
    first = s.enqueue()
    again = s.enqueue()
    assert (again.outcome, again.request.id, again.pending) == ("coalesced", first.request.id, 1)
    with pytest.raises(QueueFull):  # different arguments are different work: not merged
        s.enqueue(("other",))
    assert [r.id for r in s.list(PENDING)] == [first.request.id]


def test_attempts_are_counted_when_a_run_starts_and_used_up_requests_are_kept(tmp_path):
    s = spool(tmp_path, max_attempts=2)
    rid = s.enqueue().request.id
    first = s.take()
    assert (first.id, first.attempts, first.state) == (rid, 1, RUNNING)
    assert s.finish(first, 3) == "retry"
    assert s.find(rid).state == PENDING and s.find(rid).last_status == 3
    second = s.take()
    assert second.attempts == 2
    assert s.finish(second, 1) == "failed"
    kept = s.find(rid)
    assert (kept.state, kept.attempts, kept.last_status) == (FAILED, 2, 1)
    assert s.take() is None  # failed requests are not drained again by themselves


def test_a_failed_request_stays_first_in_line(tmp_path):
    s = spool(tmp_path)
    a, b = s.enqueue(("a",)).request.id, s.enqueue(("b",)).request.id
    s.finish(s.take(), 1)
    assert [r.id for r in s.list(PENDING)] == [a, b]


def test_recover_puts_back_what_a_killed_drainer_left_running(tmp_path):
    s = spool(tmp_path, max_attempts=2)
    a = s.enqueue(("a",)).request.id
    b = s.enqueue(("b",)).request.id
    s.take()  # the drainer died here: a is in running/ with one attempt counted
    fresh = Spool(s.root, max_attempts=2)  # the next drainer
    assert [(r.id, r.state) for r in fresh.recover()] == [(a, PENDING)]
    assert [r.id for r in fresh.list(PENDING)] == [a, b]
    fresh.take()  # killed again: second attempt used
    assert [(r.id, r.state) for r in Spool(s.root, max_attempts=2).recover()] == [(a, FAILED)]


def test_retry_and_drop(tmp_path):
    s = spool(tmp_path, max_attempts=1)
    rid = s.enqueue().request.id
    s.finish(s.take(), 1)
    assert s.retry(rid).attempts == 0 and s.find(rid).state == PENDING
    with pytest.raises(NoSuchRequest, match="is pending, not failed"):
        s.retry(rid)
    assert s.drop(rid).id == rid
    with pytest.raises(NoSuchRequest):
        s.find(rid)


def test_a_damaged_counter_continues_after_the_highest_request(tmp_path):
    s = spool(tmp_path)
    for _ in range(3):
        s.enqueue()
    (s.root / "seq").write_text("garbage\n")
    nxt = s.enqueue().request.id
    assert nxt.startswith(f"{4:020d}-")


def test_files_are_private_to_the_job_user(tmp_path):
    s = spool(tmp_path)
    rid = s.enqueue(("secret-ish",)).request.id
    mode = (s.root / "pending" / f"{rid}.json").stat().st_mode & 0o777
    assert mode == 0o600
    assert all((s.root / d).stat().st_mode & 0o777 == 0o700 for d in ("tmp", "pending", "running", "failed"))
