"""Overlap policies and lock scopes are rows of behaviour (contract/policies.py).

Each row is read here against what jobgen renders for it, so a row's fields are the whole
story: the unit for a policy or scope does exactly what its row says, and nothing in the
compiler compares policy or scope names. The reporter's outcome for a lock conflict (exit
75) comes from the row, as an argument of the real reporter script, which is run here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from jobgen.compiler import pipeline
from jobgen.compiler.plan import REPORTER, Exec
from jobgen.compiler.target import parse_target
from jobgen.contract.policies import OVERLAP, SCOPES

LOCKS = {
    "unit": "{scope: unit}",
    "host": "{scope: host}",
    "cluster": "{scope: cluster, name: 'shop:j', backend: 'redis://h/0'}",
}


def job(overlap: str = "skip", schedule: str = "daily", lock: str | None = None) -> str:
    text = f"jobgen: 1\njobs:\n  j:\n    command: [/bin/true]\n    schedule: {schedule}\n    overlap: {overlap}\n"
    if OVERLAP[overlap].waits:
        text += "    wait_timeout: 1min\n"
    if lock is not None:
        text += f"    lock: {lock}\n"
    return text


def service_rows(text: str, systemd: str = "257") -> dict[str, list]:
    plan = pipeline.build("m.yaml", parse_target(systemd), text=text).plan
    rows: dict[str, list] = {}
    for unit in plan.files:
        for _, directives in unit.sections:
            for key, value in directives:
                rows.setdefault(key, []).append(value)
    return rows


@pytest.mark.parametrize("name", OVERLAP)
def test_overlap_policy_row_is_what_the_units_do(name: str) -> None:
    policy = OVERLAP[name]
    calendar = service_rows(job(name))
    starts = [e.argv for e in calendar["ExecStart"]]
    if policy.queues:
        # The trigger records a request (no lock, no reporter: `jobgen enqueue` logs its own
        # outcome); the drainer runs the requests under the lock.
        assert "ExecStopPost" not in calendar
        assert [a[:2] for a in starts] == [("/usr/bin/flock", "--nonblock"), ("/usr/bin/jobgen", "enqueue")]
        assert starts[0][starts[0].index("/usr/bin/jobgen") + 1] == "drain"
    else:
        (reporter,) = calendar["ExecStopPost"]
        assert reporter.argv[-1] == policy.conflict_outcome
        assert (starts[0][0] == "/usr/bin/flock") is policy.locks
    assert ("DeferReactivation" in calendar) is policy.defers_overrun
    every = service_rows(job(name, schedule="{every: 5min}"))
    assert ("OnUnitInactiveSec" in every) is policy.every_from_end
    assert ("OnUnitActiveSec" in every) is not policy.every_from_end


@pytest.mark.parametrize("name", SCOPES)
def test_lock_scope_row_is_what_the_units_do(name: str) -> None:
    scope = SCOPES[name]
    rows = service_rows(job(lock=LOCKS[name]))
    start = rows["ExecStart"][0].argv
    wrapper = {"/usr/bin/flock": "flock", "/usr/bin/jobgen": "holder"}.get(start[0], "none")
    assert wrapper == scope.wrapper
    assert ("SuccessExitStatus" in rows) is scope.conflict_is_success
    assert [v.text for v in rows.get("KillMode", [])] == ([scope.kill_mode] if scope.kill_mode else [])
    plan = pipeline.build("m.yaml", parse_target("257"), text=job(lock=LOCKS[name])).plan
    tmpfiles = [line for f in plan.files if f.kind == "tmpfiles" for line in f.lines]
    assert any(".lock " in line for line in tmpfiles) is scope.lock_file


# The reporter, run for real: SERVICE_RESULT/EXIT_CODE/EXIT_STATUS as systemd passes them to
# ExecStopPost=, logger replaced by a stub on PATH that keeps what it was sent.
REPORTS = [
    # (policy, SERVICE_RESULT, EXIT_CODE, EXIT_STATUS, JOBGEN_OUTCOME)
    ("skip", "success", "exited", "75", "skipped"),
    ("wait", "success", "exited", "75", "wait-expired"),
    ("skip", "success", "exited", "0", "success"),
    ("wait", "exit-code", "exited", "1", "failed"),
    ("skip", "timeout", "killed", "TERM", "timeout"),
    # systemctl stop / a shutdown: the stop signal, not the job's failure
    ("skip", "signal", "killed", "TERM", "stopped"),
    ("wait", "signal", "killed", "KILL", "failed"),  # SIGKILL from elsewhere (the OOM killer)
    ("skip", "exec-condition", "exited", "1", "deferred"),
]


@pytest.mark.parametrize("shell", ("dash", "bash"))
@pytest.mark.parametrize("policy, result, code, status, outcome", REPORTS)
def test_reporter_outcome(tmp_path: Path, shell: str, policy: str, result: str, code: str, status: str, outcome: str) -> None:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} not found: apt-get install -y {shell}")
    (reporter,) = service_rows(job(policy), "257")["ExecStopPost"]
    assert isinstance(reporter, Exec) and reporter.argv[2] == REPORTER
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sent = tmp_path / "sent"
    (bin_dir / "logger").write_text(f"#!/bin/sh\ncat > {sent}\n")
    (bin_dir / "logger").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SERVICE_RESULT": result, "EXIT_CODE": code,
           "EXIT_STATUS": status, "INVOCATION_ID": "abc"}
    done = subprocess.run([path, *reporter.argv[1:]], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and done.stderr == ""
    fields = dict(line.split("=", 1) for line in sent.read_text().splitlines())
    assert (fields["JOBGEN_OUTCOME"], fields["JOBGEN_POLICY"]) == (outcome, policy)
