"""`jobgen run` is the unit: one manifest, each job started once by systemd
(`systemctl start`) and once by `jobgen run`, both inside the same booted container
(real systemd 252 and 257, jobgen installed from this worktree's wheel).

`jobgen run` is started the way an operator would: as root from a shell in /root whose
umask (0002) and soft limits (core 4321 blocks, 512 files) are its own, not the unit's. Each run
writes what it sees (id -u, id -G, pwd, umask, ulimit -c / -n, its environment) to its
output: the unit's goes to the journal, `jobgen run`'s to its caller. The unit's outcome
is the reporter's journal line; `jobgen run`'s is the line it prints with the same words.
"""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from container import format_journal, wait_until

pytestmark = pytest.mark.e2e

USER, EXTRA = "jgsame", "jgsamex"
MANIFEST_PATH = "/root/m/same.yaml"
REPORT = (
    'echo "uid=$(id -u)"; echo "groups=$(id -G)"; echo "cwd=$(pwd -P)"; echo "umask=$(umask)"; '
    'echo "core=$(ulimit -c)"; echo "nofile=$(ulimit -n)"; echo "nofile_hard=$(ulimit -Hn)"; '
    "env | sort | sed 's/^/env:/'; echo end"
)
# Variables only a unit has (systemd.exec(5)): its run's id, its journal stream, the pid
# systemd spawned, and from 254 on its cgroup's memory.pressure file (MemoryPressureWatch=,
# seen on 257): jobgen run has no cgroup.
UNIT_ONLY = {"env:INVOCATION_ID", "env:JOURNAL_STREAM", "env:SYSTEMD_EXEC_PID",
             "env:MEMORY_PRESSURE_WATCH", "env:MEMORY_PRESSURE_WRITE"}
# The caller's own context, different from the unit's in every property compared.
CALLER = "cd /root && umask 0002 && ulimit -S -c 4321 && ulimit -S -n 512 && exec"
OUTCOME = re.compile(r"(?P<job>[^:]+): (?P<word>\S+) \(result=(?P<result>[^,]+), (?P<code>[a-z]+)=(?P<status>[^)]+)\)")


def manifest(release: str) -> str:
    jobs = f"""
    same-ctx:
      command: [/bin/sh, -c, {json.dumps(REPORT)}]
      user: {USER}
      environment: {{A: one, B: "two words"}}
    same-strict:
      command: [/bin/sh, -c, {json.dumps(REPORT)}]
      user: {USER}
      hardening: strict
    same-timeout:
      command: [/bin/sh, -c, "echo started; sleep 60; echo finished"]
      timeout: 2s
    same-wait:
      command: [/bin/echo, ran]
      overlap: wait
      wait_timeout: 1s
    """
    defaults = "defaults: {schedule: daily}\n"
    return f'jobgen: 1\ntarget: {{systemd: "{release}"}}\n{defaults}jobs:\n' + textwrap.indent(textwrap.dedent(jobs).strip(), "  ") + "\n"


@pytest.fixture
def same(scenario, systemd_jobgen):
    """The manifest deployed as units and written for `jobgen run`, with the job's user
    (and a supplementary group) on the container."""
    c = systemd_jobgen
    c.run("/bin/sh", "-c", f"getent group {EXTRA} >/dev/null || groupadd {EXTRA}; "
          f"id {USER} >/dev/null 2>&1 || useradd --no-create-home -G {EXTRA} {USER}")
    text = manifest(c.release)
    scenario.deploy(text)
    c.write_file(MANIFEST_PATH, text)
    return scenario


def as_unit(s, job: str, report: bool = False) -> tuple[list[str], dict]:
    """systemctl start: what the job wrote (the journal's stdout lines of this activation)
    and the reporter's outcome line."""
    c = s.container
    before = {e["JOBGEN_INVOCATION_ID"] for e in s.outcomes(job)}
    c.systemctl("start", f"{job}.service", check=False, timeout=180)
    line = wait_until(lambda: [e for e in s.outcomes(job) if e["JOBGEN_INVOCATION_ID"] not in before],
                      bool, f"the reporter's line of {job} (systemd {c.release})", 60,
                      lambda: s.journal_text(f"{job}.service"))[-1]
    invocation = line["JOBGEN_INVOCATION_ID"]

    def written() -> list[str]:
        return [e["MESSAGE"] for e in c.journal(f"_SYSTEMD_INVOCATION_ID={invocation}", "_TRANSPORT=stdout")]

    # journald reads the output stream on its own: wait for the report's last line.
    out = written() if not report else wait_until(written, lambda o: "end" in o, f"the output of {job}", 60)
    return out, OUTCOME.fullmatch(line["MESSAGE"]).groupdict()


def as_jobgen_run(s, job: str) -> tuple[list[str], dict, int]:
    c = s.container
    r = c.run("/bin/sh", "-c", f"{CALLER} jobgen run {MANIFEST_PATH} {job} --systemd {c.release}",
              check=False, timeout=300)
    said = [l for l in r.stderr.splitlines() if l.startswith(f"jobgen: {job}: ")]
    assert len(said) == 1, f"jobgen run exit {r.returncode}: {r.stderr!r}"
    return r.stdout.splitlines(), OUTCOME.match(said[0].removeprefix("jobgen: ")).groupdict(), r.returncode


def facts(lines: list[str]) -> dict[str, str]:
    return dict(l.split("=", 1) for l in lines if "=" in l and not l.startswith(tuple(f"{v}=" for v in UNIT_ONLY)))


def test_the_unit_and_jobgen_run_see_the_same_process(same):
    c = same.container
    lock = "/run/jobgen/same-ctx.lock"
    made_by_tmpfiles = c.run("stat", "-c", "%a %U %G", lock).stdout
    unit_out, unit_outcome = as_unit(same, "same-ctx", report=True)
    # jobgen run before the snippet has run (a fresh /run): it makes the lock file itself.
    c.run("rm", "-f", lock)
    run_out, run_outcome, code = as_jobgen_run(same, "same-ctx")
    assert c.run("stat", "-c", "%a %U %G", lock).stdout == made_by_tmpfiles == f"600 {USER} root\n"
    unit, run = facts(unit_out), facts(run_out)
    print(f"systemd {c.release}: the unit saw {unit}")  # measured: shown with -s
    assert run == unit, format_journal(same.journal("same-ctx.service"))
    assert unit["cwd"] == "/" and unit["umask"] == "0022" and len(unit["groups"].split()) == 2
    assert (code, run_outcome) == (0, unit_outcome) == (0, {"job": "same-ctx", "word": "success", "result": "success",
                                                            "code": "exited", "status": "0"})


def test_strict_hardening_the_same_but_for_private_users(same):
    """hardening: strict (UMask=0077); PrivateUsers= maps the unit's supplementary groups to
    nogroup, a sandboxing property `jobgen run` does not reproduce (README)."""
    unit_out, unit_outcome = as_unit(same, "same-strict", report=True)
    run_out, run_outcome, code = as_jobgen_run(same, "same-strict")
    unit, run = facts(unit_out), facts(run_out)
    assert unit["umask"] == "0077"
    assert {k: v for k, v in run.items() if k != "groups"} == {k: v for k, v in unit.items() if k != "groups"}
    assert (code, run_outcome) == (0, unit_outcome)


def test_a_timeout_is_the_same_stop_and_outcome(same):
    unit_out, unit_outcome = as_unit(same, "same-timeout")
    run_out, run_outcome, code = as_jobgen_run(same, "same-timeout")
    assert unit_out == run_out == ["started"]
    assert run_outcome == unit_outcome == {"job": "same-timeout", "word": "timeout", "result": "timeout",
                                           "code": "killed", "status": "TERM"}
    assert code == 124


def test_an_expired_wait_is_the_same_outcome(same):
    c = same.container
    holder = same.hold_lock("same-wait")
    try:
        unit_out, unit_outcome = as_unit(same, "same-wait")
        run_out, run_outcome, code = as_jobgen_run(same, "same-wait")
    finally:
        same.release_lock(holder)
    assert unit_out == run_out == []
    assert run_outcome == unit_outcome == {"job": "same-wait", "word": "wait-expired", "result": "success",
                                           "code": "exited", "status": "75"}
    assert code == 75
