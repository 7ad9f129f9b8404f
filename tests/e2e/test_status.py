"""`jobgen status` inside the containers, on real systemd 252 and 257, with jobgen installed there.

Runs that succeed, fail, are skipped (the lock held from a shell) and are deferred (a start right
after a run, below 257), then `jobgen status MANIFEST` reads the reporter's journal lines and the
timers: the counts, the last outcome, the next elapse and the prometheus textfile must say
exactly what happened.
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
    """)


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
    again = ["success", "deferred"] if scenario.release == "252" else ["success", "success"]
    assert scenario.wait_outcomes("st-ok") == ["success"]
    assert scenario.wait_outcomes("st-fail") == ["failed"]
    assert scenario.wait_outcomes("st-skip") == ["skipped"]
    assert scenario.wait_outcomes("st-again", 2) == again

    doc = json.loads(c.run("jobgen", "status", "/root/status.yaml", "--since=-1h", "--format", "json").stdout)
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert sorted(jobs) == ["st-again", "st-fail", "st-ok", "st-skip"]

    def nonzero(name):
        return {k: v for k, v in jobs[name]["counts"].items() if v}

    assert nonzero("st-ok") == {"success": 1}
    assert nonzero("st-fail") == {"failed": 1}
    assert nonzero("st-skip") == {"skipped": 1}
    assert nonzero("st-again") == ({"success": 1, "deferred": 1} if scenario.release == "252" else {"success": 2})
    assert (jobs["st-fail"]["last_outcome"], jobs["st-fail"]["last_exit_status"]) == ("failed", "1")
    assert jobs["st-again"]["last_outcome"] == again[-1]

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
    assert 'jobgen_runs{job="st-skip",outcome="skipped"} 1' in prom
    assert 'jobgen_runs{job="st-fail",outcome="failed"} 1' in prom
    assert 'jobgen_runs{job="st-ok",outcome="success"} 1' in prom
    deferred = "1" if scenario.release == "252" else "0"
    assert f'jobgen_runs{{job="st-again",outcome="deferred"}} {deferred}' in prom
    assert 'jobgen_last_outcome{job="st-fail",outcome="failed"} 1' in prom
    assert 'jobgen_timer_enabled{job="st-ok"} 1' in prom and 'jobgen_timer_enabled{job="st-skip"} 0' in prom
    assert f'jobgen_next_elapse_timestamp_seconds{{job="st-ok"}} {int(expected.timestamp())}' in prom
    assert "# TYPE jobgen_runs gauge" in prom

    # Text: one row per job, readable at a glance.
    text = c.run("jobgen", "status", "/root/status.yaml", "--since=-1h").stdout.splitlines()
    assert text[1].split() == ["JOB", "LAST", "RUN", "LAST", "success", "failed", "timeout", "skipped",
                               "wait-expired", "deferred", "NEXT", "TIMER"]
    row = next(line for line in text if line.startswith("st-skip "))
    assert row.split()[4:11] == ["skipped", "0", "0", "0", "1", "0", "0"]
