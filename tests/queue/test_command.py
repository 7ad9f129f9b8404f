"""`jobgen enqueue / drain / queue` in the units' form, through the real entry point."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from jobgen.cli.exits import EXIT_INTERRUPTED
from jobgen.contract.queue import EXIT_SPOOL, PENDING, TMP
from support.cli import JOBGEN, PLAIN, jobgen



def test_enqueue_drain_and_list_a_spool(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    store = ["--spool", str(spool), "--job", "export"]
    first = jobgen("enqueue", *store, "--max-pending", "2", "--", "2026-12")
    assert first.returncode == 0, first.stderr
    rid = first.stdout.strip()
    assert rid.startswith("00000000000000000001-")
    assert first.stderr == f"jobgen enqueue: export: enqueued: {rid} (1 pending)\n"
    jobgen("enqueue", *store, "--max-pending", "2")
    full = jobgen("enqueue", *store, "--max-pending", "2")
    assert (full.returncode, full.stdout) == (74, "")
    assert full.stderr == "jobgen enqueue: export: rejected: queue full, request not recorded (2 requests pending (max_pending 2))\n"
    listing = json.loads(jobgen("queue", *store, "--format", "json").stdout)
    assert [(r["state"], r["args"], r["attempts"]) for r in listing["requests"]] == [("pending", ["2026-12"], 0), ("pending", [], 0)]
    out = tmp_path / "out"
    drained = jobgen("drain", *store, "--", "/bin/sh", "-c", f'echo "$JOBGEN_REQUEST_ID $*" >> {out}', "job")
    assert drained.returncode == 0, drained.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == f"{rid} 2026-12" and len(lines) == 2
    assert json.loads(jobgen("queue", *store, "--format", "json").stdout)["requests"] == []


def test_retry_and_drop_name_the_request(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    store = ["--spool", str(spool), "--job", "j", "--max-attempts", "1"]
    rid = jobgen("enqueue", *store).stdout.strip()
    assert jobgen("drain", *store, "--", "/bin/false").returncode == 1
    text = jobgen("queue", *store).stdout.splitlines()
    assert text[0] == "# j: 0 pending, 0 running, 1 failed"
    assert text[1].startswith(f"failed   {rid}  age ") and text[1].endswith("attempts 1 last exit 1")
    assert jobgen("queue", *store, "--retry", rid).stdout == f"{rid}: back to pending\n"
    assert jobgen("queue", *store, "--drop", rid).stdout == f"{rid}: dropped (pending)\n"
    missing = jobgen("queue", *store, "--drop", rid)
    assert (missing.returncode, missing.stderr) == (65, f"jobgen queue: no such request: {rid}\n")


def test_usage_and_a_missing_spool_are_one_line(tmp_path):
    bad = jobgen("enqueue", "--spool", str(tmp_path), "--job", "j", "--max-pending", "0")
    assert bad.returncode == 64
    assert bad.stderr == "jobgen enqueue: usage error: argument --max-pending: '0' is not a whole number >= 1\n"
    for verb in ("enqueue", "drain", "queue"):
        empty = jobgen(verb, "--spool", "", "--job", "j", "--", "/bin/true", cwd=tmp_path)
        assert (empty.returncode, empty.stderr) == (64, f"jobgen {verb}: usage error: --spool needs a folder\n")
    assert list(tmp_path.iterdir()) == []  # not the working folder taken for a spool
    gone = jobgen("enqueue", "--spool", str(tmp_path / "nope"), "--job", "j")
    assert gone.returncode == 71
    assert gone.stderr == (f"jobgen enqueue: j: rejected: request not recorded: cannot write the spool: "
                           f"No such file or directory: {tmp_path / 'nope' / 'tmp'}\n")


@pytest.mark.parametrize("verb", ["queue", "drain"])
def test_a_spool_that_is_not_there_is_not_an_empty_queue(tmp_path, verb):
    # A job never applied on this host (no spool: systemd-tmpfiles makes it) has no requests
    # anyone can list or drain: "0 pending" would be an answer jobgen cannot know.
    gone = tmp_path / "nope"
    r = jobgen(verb, "--spool", str(gone), "--job", "j", "--", "/bin/true")
    assert (r.returncode, r.stdout) == (EXIT_SPOOL, "")
    assert r.stderr == f"jobgen {verb}: cannot use the queue: No such file or directory: {gone}\n"
    file = tmp_path / "file"
    file.write_text("")
    r = jobgen(verb, "--spool", str(file), "--job", "j", "--", "/bin/true")
    assert (r.returncode, r.stderr) == (EXIT_SPOOL, f"jobgen {verb}: cannot use the queue: Not a directory: {file}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"] and file.read_text() == ""


def test_retry_or_drop_in_a_spool_that_is_not_there_is_not_no_such_request(tmp_path):
    gone = tmp_path / "nope"
    r = jobgen("queue", "--spool", str(gone), "--job", "j", "--drop", "00000000000000000001-12345678")
    assert (r.returncode, r.stderr) == (EXIT_SPOOL, f"jobgen queue: cannot use the queue: No such file or directory: {gone}\n")
    assert not gone.exists()


def test_ctrl_c_while_enqueue_waits_for_the_lock_is_one_line(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    assert jobgen("enqueue", "--spool", str(spool), "--job", "j").returncode == 0
    before = sorted(os.listdir(spool / PENDING))
    # Another enqueuer holds the lock: this one waits for it (up to 30 s), and the operator
    # presses Ctrl-C.
    held = os.open(spool / ".enqueue.lock", os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        proc = subprocess.Popen([*JOBGEN, "enqueue", "--spool", str(spool), "--job", "j", "--", "late"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **PLAIN})

        def waiting() -> bool:  # it has opened the lock file: it is in the wait loop
            with contextlib.suppress(OSError):
                return any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(spool / ".enqueue.lock")
                           for fd in os.listdir(f"/proc/{proc.pid}/fd"))
            return False

        deadline = time.monotonic() + 120
        while not waiting():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "timed out"
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(held)
    assert (proc.returncode, out, err) == (EXIT_INTERRUPTED, "", "jobgen enqueue: interrupted\n")
    assert sorted(os.listdir(spool / PENDING)) == before and os.listdir(spool / TMP) == []


@pytest.mark.parametrize("what,command,reason", [
    ("gone (removed by a deploy)", "missing", "No such file or directory"),
    ("not executable", "plain", "Permission denied"),
])
def test_a_command_that_cannot_start_is_a_failed_attempt_not_a_spool_error(tmp_path, what, command, reason):
    spool = tmp_path / "spool"
    spool.mkdir()
    (tmp_path / "plain").write_text("#!/bin/sh\n")
    store = ["--spool", str(spool), "--job", "j", "--max-attempts", "2"]
    rid = jobgen("enqueue", *store).stdout.strip()
    program = str(tmp_path / command)
    for attempt, outcome in ((1, "retry"), (2, "failed")):
        r = jobgen("drain", *store, "--", program)
        assert (r.returncode, r.stdout) == (1, ""), r.stderr  # left work, as any failed request
        if not os.path.exists("/run/systemd/journal/socket"):  # the lines go to stderr
            assert r.stderr.splitlines()[-1] == (f"jobgen: j: {outcome}: request {rid}: cannot start {program}: {reason}: "
                                                 f"exit status 203: {outcome}")
        (listed,) = json.loads(jobgen("queue", *store, "--format", "json").stdout)["requests"]
        assert (listed["id"], listed["state"], listed["attempts"], listed["last_status"]) == (
            rid, "pending" if outcome == "retry" else "failed", attempt, 203)


def test_a_reader_gone_away_loses_the_text_not_the_outcome(tmp_path):
    # `jobgen queue ... | head -1`, or enqueue's id line to a pipe nobody reads: a
    # BrokenPipeError traceback, and exit 1 where the request had been recorded.
    spool = tmp_path / "spool"
    spool.mkdir()
    store = ["--spool", str(spool), "--job", "j"]

    def to_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
        read, write = os.pipe()
        os.close(read)  # the reader is gone before anything is written
        try:
            return subprocess.run([*JOBGEN, *args], stdout=write, stderr=subprocess.PIPE, text=True,
                                  env={**os.environ, **PLAIN}, timeout=120)
        finally:
            os.close(write)

    enqueued = to_a_closed_pipe("enqueue", *store, "--", "kept")
    assert (enqueued.returncode, "Traceback" in enqueued.stderr) == (0, False), enqueued.stderr
    assert enqueued.stderr.startswith("jobgen enqueue: j: enqueued: ")
    listed = to_a_closed_pipe("queue", *store)
    assert (listed.returncode, listed.stderr) == (0, "")
    assert [r["args"] for r in json.loads(jobgen("queue", *store, "--format", "json").stdout)["requests"]] == [["kept"]]


# The cluster form's configuration, refused before any server is asked (this URL's port
# is never contacted): as `jobgen lock` refuses the same --password-file (config-error, 78)
# and --connect-timeout (usage, 64), by the same rule (runtime/backends read_password,
# runtime/lock.py CONNECT_TIMEOUT). Both were tracebacks (exit 1), /dev/zero read until
# memory ran out.
CLUSTER = ["--backend", "redis://127.0.0.1:1/0", "--name", "x", "--job", "j"]


@pytest.mark.parametrize("file, why", [
    ("latin-1", "not UTF-8 text"),
    ("huge", "more than 1048576 bytes, not a password"),
    ("/dev/zero", "more than 1048576 bytes, not a password"),  # tmp_path / "/dev/zero" is /dev/zero
])
def test_a_password_file_that_holds_no_password_is_one_line_as_for_the_lock_holder(tmp_path, file, why):
    (tmp_path / "latin-1").write_bytes(b"caf\xe9\n")
    (tmp_path / "huge").write_bytes(b"x" * (1024 * 1024 + 1))
    path = tmp_path / file
    for verb in ("enqueue", "queue"):
        r = jobgen(verb, *CLUSTER, "--password-file", str(path))
        assert (r.returncode, r.stdout, r.stderr) == (78, "", f"jobgen {verb}: config-error: password file {path}: {why}\n")
    held = jobgen("lock", *CLUSTER, "--password-file", str(path), "--", "/bin/true")
    assert (held.returncode, held.stderr) == (78, f"jobgen-lock[j]: config-error name=x password file {path}: {why} exit=78\n")


@pytest.mark.parametrize("seconds, rule", [
    ("nan", "must be > 0 seconds"), ("-5", "must be > 0 seconds"),
    # A bound on each round trip; the clients' socket timeouts overflowed (exit 70).
    ("1e10", "must be at most 3600 seconds"),
])
def test_a_connect_timeout_that_is_no_time_is_a_usage_error_as_for_the_lock_holder(seconds, rule):
    why = f"argument --connect-timeout: '{seconds}': {rule}"
    for verb in ("enqueue", "drain", "queue"):
        r = jobgen(verb, *CLUSTER, "--connect-timeout", seconds, "--", "/bin/true")
        assert (r.returncode, r.stdout, r.stderr) == (64, "", f"jobgen {verb}: usage error: {why}\n")
    held = jobgen("lock", *CLUSTER, "--connect-timeout", seconds, "--", "/bin/true")
    assert (held.returncode, held.stderr) == (64, f"jobgen-lock[-]: usage-error {why} exit=64\n")
