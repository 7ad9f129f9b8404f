"""host/status.py's readers and formats on the text journalctl and systemctl print (the whole
command is tested on real systemd in tests/e2e/test_status.py).

Which journal lines count: journald's trusted fields (the ones starting with '_', which
journald fills in itself) as real systemd 252 and 257 wrote them for the reporter's
`logger --journald` (tests/e2e/test_status.py shows the same on a booted container)."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jobgen.compiler.plan import REPORTER
from jobgen.contract.outcomes import QUEUE_EVENTS, RUN
from jobgen.contract.policies import OVERLAP
from jobgen.host import status

ROOT = Path(__file__).resolve().parent.parent
T0 = 1798761600_000000  # µs


def reporter(outcome, *, uid="0", unit="a.service", invocation="i1", job="a", t=0, **extra):
    """A reporter line as journald stores it; unit=None: journald lost the race for the sender's cgroup."""
    e = {"SYSLOG_IDENTIFIER": "jobgen", "JOBGEN_JOB": job, "JOBGEN_OUTCOME": outcome, "JOBGEN_EXIT_STATUS": "0",
         "JOBGEN_INVOCATION_ID": invocation, "_UID": uid, "_COMM": "logger", "__REALTIME_TIMESTAMP": str(T0 + t)}
    if unit is not None:
        e |= {"_SYSTEMD_UNIT": unit, "_SYSTEMD_INVOCATION_ID": invocation}
    return e | extra


def manager(unit, invocation):
    """systemd's own line about an activation (PID 1, as root)."""
    return {"MESSAGE": f"Finished {unit}.", "UNIT": unit, "INVOCATION_ID": invocation, "_PID": "1", "_UID": "0",
            "__REALTIME_TIMESTAMP": str(T0)}


# job a runs as root (a.service), job u as uid 1000 (u.service), job q is overlap: queue
SOURCES = [
    status.Source("a", "a.service", status.RUN, 0),
    status.Source("u", "u.service", status.RUN, 1000),
    status.Source("q", "q.service", status.QUEUE, 0),
    status.Source("q", "q-drain.service", status.QUEUE, 0),
]
WITNESSES = [manager("a.service", "i2"), manager("u.service", "i3"), manager("b.service", "i4")]

# (what, line, counted?)
LINES = [
    ("the reporter, journald names its unit", reporter("failed"), True),
    ("the reporter as the job's user", reporter("failed", job="u", unit="u.service", uid="1000"), True),
    ("journald lost the race; systemd logged that activation of a.service", reporter("failed", unit=None, invocation="i2"), True),
    ("journald lost the race; nothing vouches for the invocation", reporter("failed", unit=None, invocation="i9"), False),
    ("another user, no unit (logger --journald from a shell)", reporter("success", unit=None, uid="65534"), False),
    ("another user, copying a witnessed invocation", reporter("success", unit=None, uid="65534", invocation="i2"), False),
    ("root from a login session", reporter("success", unit="session-4.scope"), False),
    ("another job's unit naming job a", reporter("success", unit="b.service", invocation="i4"), False),
    ("another job's activation, named for job a", reporter("success", unit=None, invocation="i4"), False),
    ("root inside u.service, whose processes run as uid 1000", reporter("success", job="u", unit="u.service"), False),
    ("uid 1000 outside u.service", reporter("success", job="u", unit="user@1000.service", uid="1000"), False),
    ("not the reporter's identifier", reporter("success", SYSLOG_IDENTIFIER="other"), False),
]


@pytest.mark.parametrize("what,line,counted", LINES, ids=[w for w, _, _ in LINES])
def test_a_line_counts_only_from_the_jobs_own_unit_and_user(what, line, counted):
    got = status.attest([*WITNESSES, line], SOURCES)
    assert [entry for _, entry in got] == ([line] if counted else [])


def test_a_forged_success_after_a_real_failure_changes_nothing():
    lines = [reporter("failed"), reporter("success", unit=None, uid="65534", invocation="", t=1_000_000)]
    (a,) = status.summarize(["a"], status.attest(lines, SOURCES), {})
    assert (a.last_outcome, {k: v for k, v in a.counts.items() if v}) == ("failed", {"failed": 1})


def test_one_run_outcome_per_activation():
    # the unit's own line wins over a line that only names the invocation
    lines = [manager("a.service", "i1"), reporter("failed", t=1), reporter("success", unit=None, t=2)]
    (a,) = status.summarize(["a"], status.attest(lines, SOURCES), {})
    assert (a.last_outcome, sum(a.counts.values())) == ("failed", 1)


def test_queue_events_are_kept_apart_from_run_outcomes():
    lines = [reporter("failed"),
             reporter("enqueued", job="q", unit="q.service", invocation="e1", t=1),
             reporter("started", job="q", unit="q-drain.service", invocation="d1", t=2),
             reporter("failed", job="q", unit="q-drain.service", invocation="d1", t=3),
             reporter("enqueued", job="a", unit="a.service", invocation="i5", t=4)]  # not a's queue: a word a run never ends with
    a, q = status.summarize(["a", "q"], status.attest(lines, SOURCES), {}, queued={"q"})
    assert (a.last_outcome, sum(a.counts.values()), a.queued) == ("failed", 1, False)
    assert (q.last_outcome, sum(q.counts.values())) == (None, 0)
    assert {k: v for k, v in q.queue_counts.items() if v} == {"enqueued": 1, "started": 1, "failed": 1}
    assert q.last_queue_event == "failed"
    prom = status.as_prometheus([a, q]).splitlines()
    assert 'jobgen_last_outcome{jobgen_job="a",outcome="failed"} 1' in prom
    assert not any(line.startswith("jobgen_last_outcome{jobgen_job=\"q\"") for line in prom)
    assert 'jobgen_queue_events{jobgen_job="q",event="enqueued"} 1' in prom
    assert not any(line.startswith('jobgen_queue_events{jobgen_job="a"') for line in prom)


# journalctl -o json prints a field sent twice as an array, one with bytes that are not
# printable UTF-8 as an array of numbers, one past 4096 bytes as null (journalctl(1)); any
# sender can make them: `logger --journald` from a shell, or the job's own command.
ODD_VALUES = [
    ("an invocation sent twice, from a shell", reporter("success", unit=None, uid="65534", JOBGEN_INVOCATION_ID=["i2", "i3"])),
    ("an invocation sent twice, no unit, as the job's user", reporter("success", unit=None, JOBGEN_INVOCATION_ID=["i2", "i2"])),
    ("an outcome sent twice by the job's command", reporter(["success", "success"], invocation="i7", t=1)),
    ("an outcome with a control byte", reporter([115, 117, 99, 99, 101, 115, 115, 1], invocation="i7", t=1)),
    ("an outcome past 4096 bytes", reporter(None, invocation="i7", t=1)),
    ("a queue event sent twice", reporter(["done", "done"], job="q", unit="q-drain.service", invocation="d1", t=1)),
    ("a job name sent twice", reporter("success", job=["a", "a"], invocation="i7", t=1)),
]


@pytest.mark.parametrize("what,line", ODD_VALUES, ids=[w for w, _ in ODD_VALUES])
def test_a_field_that_is_not_one_string_counts_nothing_and_stops_nothing(what, line):
    text = [json.dumps(e) for e in (*WITNESSES, reporter("failed"), line)]
    a, q = status.summarize(["a", "q"], status.attest(status.read_journal(text), SOURCES), {}, queued={"q"})
    assert (a.last_outcome, {k: v for k, v in a.counts.items() if v}) == ("failed", {"failed": 1})
    assert sum(q.queue_counts.values()) == 0


def test_outcome_words_are_the_contracts():
    # the reporter's case arms and the policies' conflict outcomes use only RUN
    written = set(re.findall(r"o=([a-z-]+) ;;", REPORTER)) | {p.conflict_outcome for p in OVERLAP.values()}
    assert written <= set(RUN)
    assert status.OUTCOMES is RUN
    assert "enqueued" in QUEUE_EVENTS and "enqueued" not in RUN


def test_uid_of():
    assert (status.uid_of(None), status.uid_of("root"), status.uid_of("1234")) == (0, 0, 1234)
    assert status.uid_of("no-such-user-jobgen") is None


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
JOURNAL = [
    json.dumps(reporter("success", invocation="r1")),
    json.dumps(reporter("skipped", invocation="r2", JOBGEN_EXIT_STATUS="75", t=60_500_000)),
    "not json",
]
B = [status.Source("b", "b.service", status.RUN, 0)]


def test_counts_last_run_and_timer():
    a, b = status.summarize(["a", "b"], status.attest(status.read_journal(JOURNAL), SOURCES + B), status.read_show(SHOW))
    assert {k: v for k, v in a.counts.items() if v} == {"success": 1, "skipped": 1}
    assert (a.last_outcome, a.last_exit_status, a.last_run) == ("skipped", "75", 1798761660.5)
    assert (a.next_elapse, a.timer_enabled, a.timer_active) == (1798761600.0, True, True)
    assert (b.last_run, b.next_elapse, b.timer_enabled) == (None, None, None)  # no runs, no timer here


def test_prometheus_textfile():
    text = status.as_prometheus(status.summarize(["a"], status.attest(status.read_journal(JOURNAL), SOURCES), status.read_show(SHOW)))
    lines = text.splitlines()
    assert 'jobgen_runs{jobgen_job="a",outcome="skipped"} 1' in lines
    assert 'jobgen_last_outcome{jobgen_job="a",outcome="skipped"} 1' in lines
    assert 'jobgen_last_outcome{jobgen_job="a",outcome="success"} 0' in lines
    assert 'jobgen_last_run_timestamp_seconds{jobgen_job="a"} 1798761660.5' in lines
    assert 'jobgen_next_elapse_timestamp_seconds{jobgen_job="a"} 1798761600' in lines
    # every sample belongs to a metric announced with HELP and TYPE before it
    announced = set()
    for line in lines:
        if line.startswith("# TYPE "):
            announced.add(line.split()[2])
        elif not line.startswith("#"):
            assert line.split("{")[0] in announced, line


def test_a_user_who_sees_only_their_own_lines_is_told_so():
    """journalctl exits 0 for a user outside the journal's groups who can read some journal
    files, with this notice on stderr (src/shared/journal-util.c, 252 and 257, the form
    without ACLs): every job would look idle."""
    hint = ("Hint: You are currently not seeing messages from other users and the system.\n"
            "      Users in the 'systemd-journal' group can see all messages. Pass -q to\n"
            "      turn off this notice.\n")

    def journalctl(argv, **kw):
        return subprocess.CompletedProcess(argv, 0, "", hint)

    with pytest.raises(status.StatusError) as e:
        status.collect(SOURCES, run=journalctl)
    assert (e.value.kind, str(e.value)) == ("journal", "cannot read the system journal as this user (journalctl shows "
                                            "it only to root and the groups systemd-journal and adm); run jobgen status as one of them")


def test_the_queue_commands_log_only_contract_words(tmp_path):
    """A real spool and drain: every outcome the spool and the drainer hand to the journal
    is a queue event of contract/outcomes.py (a word outside it would be dropped by status)."""
    from jobgen.runtime.queue.drain import drain
    from jobgen.runtime.queue.spool import Spool

    for name in ("spool", "slow"):
        (tmp_path / name).mkdir(mode=0o700)  # tmpfiles.d makes the spool itself
    spool = Spool(tmp_path / "spool", max_pending=2, on_full="reject", max_attempts=1)
    words = [spool.enqueue(("ok",)).outcome, spool.enqueue(("bad",)).outcome]
    script = ("/bin/sh", "-c", '[ "$1" = ok ] || exit 3', "job")
    drain(spool, script, dict(os.environ), lambda word, req, message: words.append(word))
    slow = Spool(tmp_path / "slow")
    slow.enqueue(("30",))
    drain(slow, ("/bin/sleep",), dict(os.environ), lambda word, req, message: words.append(word), timeout=1)
    assert words[:3] == ["enqueued", "enqueued", "started"]
    assert set(words) <= set(QUEUE_EVENTS), sorted(set(words) - set(QUEUE_EVENTS))
    assert {"done", "failed", "timeout"} <= set(words)


# ----------------------------------------------------------------------------- what Prometheus sees

RULES = ROOT / "examples" / "prometheus" / "jobgen.rules.yml"
PROMTOOL = shutil.which("promtool")  # Debian's prometheus package (scripts/bootstrap)
needs_promtool = pytest.mark.skipif(PROMTOOL is None and not os.environ.get("CI"), reason="promtool is not installed")


def _statuses() -> list[status.JobStatus]:
    ok = status.JobStatus("catalog-refresh", last_run=1798761660.5, last_outcome="success", next_elapse=1798761900, timer_enabled=True)
    ok.counts |= {"success": 3, "skipped": 2}
    broken = status.JobStatus("nightly-billing", last_run=1798761000, last_outcome="failed", timer_enabled=True)
    broken.counts |= {"success": 0, "failed": 2}
    queue = status.JobStatus("nightly-import", queued=True, last_queue_event="enqueued", timer_enabled=True)
    queue.queue_counts |= {"enqueued": 15, "done": 2, "rejected": 1}
    return [ok, broken, queue]


def _promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL or "promtool", *args], input=stdin, capture_output=True, text=True, timeout=60)


def test_the_job_label_is_not_prometheus_job_label():
    """Prometheus sets `job` (the scrape job) on every series it scrapes: a textfile `job`
    label would arrive renamed `exported_job` (honor_labels: false, the default)."""
    labels = set(re.findall(r"[{,]([a-z_]+)=", status.as_prometheus(_statuses())))
    assert labels == {status.JOB_LABEL, status.OUTCOME_LABEL, status.EVENT_LABEL}
    assert "job" not in labels and "instance" not in labels


def test_the_example_rules_use_jobgens_label_names_and_words():
    """The rules name only labels status.py writes, and only outcome and event words of contract/outcomes.py."""
    import yaml

    exprs = [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    matchers = [m for e in exprs for m in re.findall(r'([a-z_]+)=~?"([^"]*)"', e)]
    assert {name for name, _ in matchers} <= {status.OUTCOME_LABEL, status.EVENT_LABEL}
    for name, value in matchers:
        assert set(value.split("|")) <= set(RUN if name == status.OUTCOME_LABEL else QUEUE_EVENTS), value
    grouping = {label for e in exprs for by in re.findall(r"(?:by|on) \(([^)]*)\)", e) for label in by.split(", ")}
    assert grouping == {"instance", status.JOB_LABEL}


@needs_promtool
def test_promtool_accepts_the_metrics_and_the_rules():
    metrics = _promtool("check", "metrics", stdin=status.as_prometheus(_statuses()))
    assert (metrics.returncode, metrics.stdout + metrics.stderr) == (0, "")
    # every lint promtool has, fatal: a lint finding fails the check instead of being printed
    rules = _promtool("check", "rules", "--lint=all", "--lint-fatal", str(RULES))
    assert rules.returncode == 0 and rules.stdout.split() == ["Checking", str(RULES), "SUCCESS:", "4", "rules", "found"], rules.stdout + rules.stderr


@needs_promtool
def test_the_example_rules_fire_on_jobgens_own_output(tmp_path):
    """jobgen's textfile as node_exporter's scrape delivers it (plus instance and job), held
    for two hours, through `promtool test rules`: which alerts fire, for which job."""
    import yaml

    series = []
    for line in status.as_prometheus(_statuses()).splitlines():
        if not line.startswith("#"):
            sample, value = line.rsplit(" ", 1)
            series.append({"series": sample.replace("{", '{instance="web1",job="node",', 1), "values": f"{value}+0x120"})

    def alert(summary: str, name: str, **labels: str) -> dict:
        return {"exp_labels": {"instance": "web1", status.JOB_LABEL: name, "severity": "warning", **labels},
                "exp_annotations": {"summary": summary}}

    expected = {  # catalog-refresh (succeeded last) is in none of them
        "JobgenNoRecentSuccess": [alert("nightly-billing on web1 has not succeeded within the status window",
                                        "nightly-billing", job="node", outcome="success")],
        "JobgenLastRunFailed": [alert("nightly-billing on web1: last run failed", "nightly-billing", job="node", outcome="failed")],
        "JobgenQueueBacklog": [alert("nightly-import on web1: 13 queued requests not finished", "nightly-import")],
        "JobgenQueueRejected": [alert("nightly-import on web1: 1 requests were not recorded", "nightly-import", job="node", event="rejected")],
    }
    tests = {"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "alert_rule_test": [{"eval_time": "90m", "alertname": name, "exp_alerts": alerts}
                            for name, alerts in expected.items()]}]}  # fmt: skip
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(tests))
    result = _promtool("test", "rules", str(path))
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stdout + result.stderr


# ----------------------------------------------------------------------------- a real scrape

NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
PROMETHEUS = shutil.which("prometheus")
SCRAPE_DEADLINE = 120  # s: the first scrape and rule evaluation on a loaded machine


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict | str | None:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = response.read().decode()
    except (urllib.error.URLError, OSError):
        return None
    return json.loads(body) if "/api/" in url else body


def _until(what: str, probe, procs: list[subprocess.Popen], logs: list):
    """probe() until it answers something true, or a server died, or the deadline passed."""
    import time

    deadline = time.monotonic() + SCRAPE_DEADLINE
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        if answer := probe():
            return answer
        time.sleep(0.2)  # polling interval, not a wait for an assumed duration
    tails = "\n".join(log.read_text(errors="replace")[-1500:] for log in logs if log.exists())
    raise AssertionError(f"no {what} within {SCRAPE_DEADLINE}s:\n{tails}")


def _readme_queries() -> list[str]:
    """The PromQL queries README's jobgen status section gives for a node_exporter scrape."""
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    sentence = readme[readme.index("So after a scrape of node_exporter the queries read"):]
    return re.findall(r"`([^`]+)`", sentence.split(". ")[0])


def test_the_readme_gives_two_queries():
    assert _readme_queries() == ['jobgen_last_outcome{jobgen_job="nightly-billing",outcome="failed"} == 1',
                                 'sum by (instance, jobgen_job) (jobgen_runs{outcome="skipped"})']  # fmt: skip


@pytest.mark.skipif((NODE_EXPORTER is None or PROMETHEUS is None) and not os.environ.get("CI"),
                    reason="prometheus and prometheus-node-exporter are not installed")  # fmt: skip
def test_a_real_scrape_keeps_the_job_label_and_the_readme_queries_answer(tmp_path):
    """node_exporter's textfile collector serves jobgen's file, Prometheus scrapes it as job
    "node" with the example rules loaded: jobgen_job arrives as written, a `job` label would
    arrive as exported_job, the README's queries answer and the failed job's alert fires."""
    import urllib.parse

    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    (textfiles / "jobgen.prom").write_text(status.as_prometheus(_statuses()))
    # What jobgen wrote before the label had its own name: Prometheus renames it.
    (textfiles / "old.prom").write_text('# HELP old_runs a job label\n# TYPE old_runs gauge\nold_runs{job="catalog-refresh"} 1\n')
    node_port, prom_port = _free_port(), _free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        f"rule_files: [{RULES}]\n"
        f"scrape_configs: [{{job_name: node, static_configs: [{{targets: ['127.0.0.1:{node_port}']}}]}}]\n"
    )
    logs = [tmp_path / "node-exporter.log", tmp_path / "prometheus.log"]
    procs: list[subprocess.Popen] = []
    try:
        procs.append(subprocess.Popen(
            [NODE_EXPORTER or "prometheus-node-exporter", f"--web.listen-address=127.0.0.1:{node_port}",
             "--collector.disable-defaults", "--collector.textfile", f"--collector.textfile.directory={textfiles}"],
            stdout=subprocess.DEVNULL, stderr=logs[0].open("w")))  # fmt: skip
        procs.append(subprocess.Popen(
            [PROMETHEUS or "prometheus", f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=logs[1].open("w")))  # fmt: skip
        metrics = _until("jobgen metrics from node_exporter",
                         lambda: (m := _get(f"http://127.0.0.1:{node_port}/metrics")) and "jobgen_runs{" in m and m, procs, logs)  # fmt: skip
        assert 'jobgen_last_outcome{jobgen_job="nightly-billing",outcome="failed"} 1' in metrics

        def query(promql: str) -> list[dict]:
            answer = _get(f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
            return answer["data"]["result"] if answer and answer.get("status") == "success" else []

        # The README's queries, as the README writes them, after a real scrape.
        first, second = _readme_queries()
        failed = _until("the README's first query to answer", lambda: query(first), procs, logs)
        assert [(r["metric"]["jobgen_job"], r["metric"]["job"], r["metric"]["instance"]) for r in failed] == [
            ("nightly-billing", "node", f"127.0.0.1:{node_port}")]
        skipped = query(second)
        assert {r["metric"]["jobgen_job"]: r["value"][1] for r in skipped} == {"catalog-refresh": "2", "nightly-billing": "0", "nightly-import": "0"}
        # A `job` label from the textfile is the scrape job's no more.
        old = query("old_runs")
        assert [(r["metric"]["job"], r["metric"]["exported_job"]) for r in old] == [("node", "catalog-refresh")]
        assert query('old_runs{job="catalog-refresh"}') == []
        # The example rules, loaded by Prometheus: the alert without `for:` fires at once.
        alerts = _until("JobgenLastRunFailed to fire", lambda: [
            a for a in (_get(f"http://127.0.0.1:{prom_port}/api/v1/alerts") or {}).get("data", {}).get("alerts", [])
            if a["labels"]["alertname"] == "JobgenLastRunFailed" and a["state"] == "firing"], procs, logs)  # fmt: skip
        assert [a["labels"][status.JOB_LABEL] for a in alerts] == ["nightly-billing"]
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
