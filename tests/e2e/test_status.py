"""`jobgen status` inside the containers, on real systemd 252 and 257, with jobgen installed there.

Runs that succeed, fail, are skipped (the lock held from a shell) and are deferred (a start right
after a run, below 257), then `jobgen status MANIFEST` reads the reporter's journal lines and the
timers: the counts, the last outcome, the next elapse and the prometheus textfile must say
exactly what happened. Lines that are not the jobs' own (another user's `logger --journald`,
root from a shell, a `jobgen enqueue` by hand) change nothing, and a queue job's events are
counted apart from run outcomes. A --since journalctl cannot read and an -o folder that
does not exist are one line and their exit code.
"""

import json
import textwrap
from datetime import datetime, timezone

import pytest

from jobgen.compiler.timespec import parse_calendar

pytestmark = pytest.mark.e2e

MANIFEST = textwrap.dedent("""\
    jobgen: 1
    target: {systemd: ">=252"}
    jobs:
      st-ok: {command: [/bin/true], schedule: yearly}
      st-fail: {command: [/bin/false], schedule: yearly}
      st-skip: {command: [/bin/echo, begin], schedule: yearly}
      st-again: {command: [/bin/echo, ran], schedule: yearly}
      st-queue: {command: [/bin/true], schedule: yearly, overlap: queue, hardening: none}
      st-user: {command: [/bin/true], schedule: yearly, user: nobody}
    """)

# What journald stores for a line sent with the reporter's own fields (compiler/plan.py REPORTER).
FORGE = ("printf 'MESSAGE=st-fail: success\\nSYSLOG_IDENTIFIER=jobgen\\nJOBGEN_JOB=st-fail\\nJOBGEN_OUTCOME=success\\n"
         "JOBGEN_POLICY=skip\\nJOBGEN_EXIT_STATUS=0\\nJOBGEN_INVOCATION_ID=%s\\n' \"$1\" | logger --journald")


def forge(c, invocation: str, *setpriv: str) -> None:
    c.run(*setpriv, "/bin/sh", "-c", FORGE, "forge", invocation)


def test_status_counts_what_ran(scenario, systemd_jobgen):
    c = scenario.container
    scenario.deploy(MANIFEST)
    c.write_file("/root/status.yaml", MANIFEST)
    c.systemctl("enable", "--now", "st-ok.timer")

    c.systemctl("start", "st-ok.service")
    c.systemctl("start", "st-fail.service", check=False)
    holder = scenario.hold_lock("st-skip")
    c.systemctl("start", "st-skip.service")
    scenario.release_lock(holder)
    c.systemctl("start", "st-again.service")
    c.systemctl("start", "st-again.service", check=False)  # within 2s of the end: deferred below 257
    c.systemctl("start", "st-user.service")
    again = ["success", "deferred"] if scenario.release == "252" else ["success", "success"]
    assert scenario.wait_outcomes("st-ok") == ["success"]
    assert scenario.wait_outcomes("st-fail") == ["failed"]
    assert scenario.wait_outcomes("st-skip") == ["skipped"]
    assert scenario.wait_outcomes("st-again", 2) == again
    assert scenario.wait_outcomes("st-user") == ["success"]
    c.systemctl("start", "st-queue.service")  # the enqueuer; its drainer runs the request
    scenario.wait_for(lambda: [e["JOBGEN_OUTCOME"] for e in scenario.outcomes("st-queue")], lambda o: "done" in o, 60,
                      "st-queue's request drained")

    # Lines that must change nothing: a success for st-fail sent by nobody (once with
    # st-fail's real invocation ID copied in), one sent by root from a shell, and a request
    # recorded by hand for st-fail. Wait until journald has them all.
    (real,) = scenario.outcomes("st-fail")
    # What journald made of the reporter's line: the kernel's uid of the sender, and the unit
    # when journald read the sender's cgroup before logger exited (about 4 lines in 5 here).
    assert real["_UID"] == "0" and real.get("_SYSTEMD_UNIT") in (None, "st-fail.service")
    (user,) = scenario.outcomes("st-user")
    assert user["_UID"] == "65534" and user.get("_SYSTEMD_UNIT") in (None, "st-user.service")
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
    forge(c, "", *nobody)
    forge(c, real["JOBGEN_INVOCATION_ID"], *nobody)
    forge(c, "0123456789abcdef0123456789abcdef")
    c.run("mkdir", "-p", "-m", "700", "/root/st-fail-spool")
    c.run("jobgen", "enqueue", "--spool", "/root/st-fail-spool", "--job", "st-fail", "--", "x")
    forged = scenario.wait_for(lambda: scenario.outcomes("st-fail"), lambda o: len(o) == 5, 30, "the forged lines")
    assert [(e["JOBGEN_OUTCOME"], e["_UID"]) for e in forged] == [
        ("failed", "0"), ("success", "65534"), ("success", "65534"), ("success", "0"), ("enqueued", "0")]

    doc = json.loads(c.run("jobgen", "status", "/root/status.yaml", "--since=-1h", "--format", "json").stdout)
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert sorted(jobs) == ["st-again", "st-fail", "st-ok", "st-queue", "st-skip", "st-user"]

    def nonzero(name):
        return {k: v for k, v in jobs[name]["counts"].items() if v}

    assert nonzero("st-ok") == {"success": 1}
    assert nonzero("st-fail") == {"failed": 1}
    assert nonzero("st-user") == {"success": 1}  # its reporter runs as nobody, the job's user
    assert nonzero("st-skip") == {"skipped": 1}
    assert nonzero("st-again") == ({"success": 1, "deferred": 1} if scenario.release == "252" else {"success": 2})
    assert (jobs["st-fail"]["last_outcome"], jobs["st-fail"]["last_exit_status"]) == ("failed", "1")
    assert jobs["st-again"]["last_outcome"] == again[-1]
    assert "queue" not in jobs["st-fail"]
    assert nonzero("st-queue") == {} and jobs["st-queue"]["last_outcome"] is None
    assert {k: v for k, v in jobs["st-queue"]["queue"]["counts"].items() if v} == {"enqueued": 1, "started": 1, "done": 1}

    # The timers: only st-ok's is enabled; its next elapse is the calendar's (container zone: UTC).
    assert c.run("date", "+%Z").stdout.strip() == "UTC"
    assert jobs["st-ok"]["timer_enabled"] is True and jobs["st-ok"]["timer_active"] is True
    assert jobs["st-fail"]["timer_enabled"] is False
    now = datetime.now(timezone.utc)
    (expected,) = parse_calendar("yearly UTC").next_elapses(now, 1)
    assert jobs["st-ok"]["next_elapse"] == expected.timestamp()

    # The node_exporter textfile, written atomically where the collector reads it.
    c.run("jobgen", "status", "/root/status.yaml", "--since=-1h", "--format", "prometheus", "-o", "/root/jobgen.prom")
    prom = c.run("cat", "/root/jobgen.prom").stdout.splitlines()
    assert 'jobgen_runs{jobgen_job="st-skip",outcome="skipped"} 1' in prom
    assert 'jobgen_runs{jobgen_job="st-fail",outcome="failed"} 1' in prom
    assert 'jobgen_runs{jobgen_job="st-ok",outcome="success"} 1' in prom
    deferred = "1" if scenario.release == "252" else "0"
    assert f'jobgen_runs{{jobgen_job="st-again",outcome="deferred"}} {deferred}' in prom
    assert 'jobgen_last_outcome{jobgen_job="st-fail",outcome="failed"} 1' in prom
    assert 'jobgen_last_outcome{jobgen_job="st-fail",outcome="success"} 0' in prom
    assert 'jobgen_queue_events{jobgen_job="st-queue",event="done"} 1' in prom
    assert not any(line.startswith(('jobgen_queue_events{jobgen_job="st-fail"', 'jobgen_last_outcome{jobgen_job="st-queue"')) for line in prom)
    assert 'jobgen_timer_enabled{jobgen_job="st-ok"} 1' in prom and 'jobgen_timer_enabled{jobgen_job="st-skip"} 0' in prom
    assert f'jobgen_next_elapse_timestamp_seconds{{jobgen_job="st-ok"}} {int(expected.timestamp())}' in prom
    assert "# TYPE jobgen_runs gauge" in prom

    # Text: one row per job, readable at a glance.
    text = c.run("jobgen", "status", "/root/status.yaml", "--since=-1h").stdout.splitlines()
    assert text[1].split() == ["JOB", "LAST", "RUN", "LAST", "success", "failed", "timeout", "skipped",
                               "wait-expired", "deferred", "stopped", "NEXT", "TIMER", "QUEUE"]
    row = next(line for line in text if line.startswith("st-skip "))
    assert row.split()[4:11] == ["skipped", "0", "0", "0", "1", "0", "0"]
    row = next(line for line in text if line.startswith("st-queue "))
    assert row.split()[-3:] == ["done", "(3", "events)"]

    # The host answers, the caller's mistakes are one line and their own exit code.
    r = c.run("jobgen", "status", "/root/status.yaml", "--since", "garbage", check=False)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("jobgen: error: --since garbage: journalctl cannot read it as a time "
                        "(Failed to parse timestamp: garbage); give e.g. -24h, today or '2026-12-01 00:00'\n")
    r = c.run("jobgen", "status", "/root/status.yaml", "-o", "/root/missing/jobgen.prom", check=False)
    assert (r.returncode, r.stdout, r.stderr) == (73, "", "jobgen: error: cannot write /root/missing/jobgen.prom: No such file or directory\n")
    # -o over a folder: refused (only a regular file is replaced); the old folder and no
    # temporary file remain.
    c.run("mkdir", "-p", "/root/prom/jobgen.prom")
    r = c.run("jobgen", "status", "/root/status.yaml", "-o", "/root/prom/jobgen.prom", check=False)
    assert (r.returncode, r.stderr) == (73, "jobgen: error: cannot write /root/prom/jobgen.prom: not a regular file; "
                                            "-o replaces a regular file by renaming a new one over it\n")
    assert c.run("ls", "-A", "/root/prom").stdout.split() == ["jobgen.prom"]
    # A user who may not read the system journal would see every job idle: an error instead
    # (nobody has no journal files of its own here, so journalctl itself fails).
    c.run("install", "-m", "644", "/root/status.yaml", "/tmp/status.yaml")
    r = c.run("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "jobgen", "status", "/tmp/status.yaml", check=False)
    assert (r.returncode, r.stdout) == (4, "")
    assert r.stderr == ("jobgen: error: cannot read the journal: journalctl exited 1: "
                        "No journal files were opened due to insufficient permissions.\n")
