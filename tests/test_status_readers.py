"""host/status.py's readers and formats on the text journalctl and systemctl print (the whole
command is tested on real systemd in tests/e2e/test_status.py)."""

import json

from jobgen.host import status

JOURNAL = [
    json.dumps({"SYSLOG_IDENTIFIER": "jobgen", "JOBGEN_JOB": "a", "JOBGEN_OUTCOME": "success", "JOBGEN_EXIT_STATUS": "0",
                "__REALTIME_TIMESTAMP": "1798761600000000"}),
    json.dumps({"SYSLOG_IDENTIFIER": "jobgen", "JOBGEN_JOB": "a", "JOBGEN_OUTCOME": "skipped", "JOBGEN_EXIT_STATUS": "75",
                "__REALTIME_TIMESTAMP": "1798761660500000"}),
    json.dumps({"SYSLOG_IDENTIFIER": "other", "JOBGEN_JOB": "a", "JOBGEN_OUTCOME": "failed"}),  # not the reporter
    "not json",
]
# `TZ=UTC systemctl show -p Id,NextElapseUSecRealtime,UnitFileState,ActiveState,LoadState a.timer b.timer` (252)
SHOW = """NextElapseUSecRealtime=Fri 2027-01-01 00:00:00 UTC
Id=a.timer
LoadState=loaded
ActiveState=active
UnitFileState=enabled

NextElapseUSecRealtime=
Id=b.timer
LoadState=not-found
ActiveState=inactive
UnitFileState=
"""


def test_counts_last_run_and_timer():
    a, b = status.summarize(["a", "b"], status.read_journal(JOURNAL), status.read_show(SHOW))
    assert {k: v for k, v in a.counts.items() if v} == {"success": 1, "skipped": 1}
    assert (a.last_outcome, a.last_exit_status, a.last_run) == ("skipped", "75", 1798761660.5)
    assert (a.next_elapse, a.timer_enabled, a.timer_active) == (1798761600.0, True, True)
    assert (b.last_run, b.next_elapse, b.timer_enabled) == (None, None, None)  # no runs, no timer here


def test_prometheus_textfile():
    text = status.as_prometheus(status.summarize(["a"], status.read_journal(JOURNAL), status.read_show(SHOW)))
    lines = text.splitlines()
    assert 'jobgen_runs{job="a",outcome="skipped"} 1' in lines
    assert 'jobgen_last_outcome{job="a",outcome="skipped"} 1' in lines
    assert 'jobgen_last_outcome{job="a",outcome="success"} 0' in lines
    assert 'jobgen_last_run_timestamp_seconds{job="a"} 1798761660.5' in lines
    assert 'jobgen_next_elapse_timestamp_seconds{job="a"} 1798761600' in lines
    # every sample belongs to a metric announced with HELP and TYPE before it
    announced = set()
    for line in lines:
        if line.startswith("# TYPE "):
            announced.add(line.split()[2])
        elif not line.startswith("#"):
            assert line.split("{")[0] in announced, line
