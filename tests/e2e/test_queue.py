"""overlap: queue on real systemd 252 and 257, with jobgen installed in the container.

A job slower than its timer: every elapse records a request (NAME.service runs `jobgen
enqueue`), the drainer (NAME-drain.service, started by the enqueuer and by NAME-drain.path)
runs them one at a time under the job's flock, in order; past max_pending a trigger is
rejected and says so in the journal. `jobgen enqueue` from a shell lands in the same queue,
and a request whose command is killed with SIGKILL is run again.
"""

from __future__ import annotations

import json

import pytest

from container import format_journal

pytestmark = pytest.mark.e2e

LOG = "/var/lib/jobgen-e2e-queue.log"


def manifest(job: str, schedule: str, seconds: int, max_pending: int) -> str:
    # hardening: none -- the log lives outside the spool (ProtectSystem would allow /var/lib,
    # but keep the test about the queue, not about hardening).
    script = f'echo "start $JOBGEN_REQUEST_ID $*" >> {LOG}; sleep {seconds}; echo "end $JOBGEN_REQUEST_ID" >> {LOG}'
    return (
        "jobgen: 1\njobs:\n"
        f"  {job}:\n"
        f"    command: [/bin/sh, -c, '{script}', {job}]\n"
        f"    schedule: '{schedule}'\n"
        "    accuracy: 1s\n"
        "    hardening: none\n"
        "    overlap: queue\n"
        f"    queue: {{max_pending: {max_pending}, on_full: reject, max_attempts: 3}}\n"
    )


def log_lines(c) -> list[str]:
    r = c.run("cat", LOG, check=False)
    return r.stdout.splitlines() if r.returncode == 0 else []


def queue_state(c, job: str) -> dict:
    out = c.run("jobgen", "queue", "--spool", f"/var/lib/jobgen/queue/{job}", "--job", job, "--format", "json").stdout
    return json.loads(out)


def assert_one_at_a_time_in_order(lines: list[str]) -> list[str]:
    starts = []
    for i in range(0, len(lines) - 1, 2):
        start, end = lines[i].split(), lines[i + 1].split()
        assert start[0] == "start" and end == ["end", start[1]], f"two runs at once or a run cut off: {lines}"
        starts.append(start[1])
    assert starts == sorted(starts), f"not drained in arrival order: {starts}"
    return starts


def test_a_slow_job_accumulates_requests_and_drains_them_in_order(scenario, systemd_jobgen):
    c = systemd_jobgen
    c.run("rm", "-f", LOG)
    job = "q-slow"
    units = scenario.deploy(manifest(job, "*:*:0/2", 3, 3))
    assert sorted(units) == [f"{job}-drain.path", f"{job}-drain.service", f"{job}.service", f"{job}.timer"]
    c.systemctl("start", f"{job}-drain.path", f"{job}.timer")
    # The timer fires every 2 s, each run takes 3 s: the queue fills to max_pending and the
    # triggers past it are rejected (a journal line each), while the drainer keeps going.
    scenario.wait_for(
        lambda: [e.get("JOBGEN_OUTCOME") for e in scenario.outcomes(job)],
        lambda o: "rejected" in o and o.count("done") >= 3,
        240,
        "a rejected trigger and three drained requests",
    )
    # From a shell: the operator's form, with an argument for the command.
    c.write_file("/root/q.yaml", manifest(job, "*:*:0/2", 3, 3))
    c.systemctl("stop", f"{job}.timer")
    scenario.wait_for(lambda: queue_state(c, job)["requests"], lambda r: len(r) < 3, 120, "room in the queue")
    shell = c.run("jobgen", "enqueue", "/root/q.yaml", job, "--systemd", scenario.release, "--", "from-shell", check=False)
    assert shell.returncode == 0, shell.stderr
    shell_id = shell.stdout.strip()
    scenario.wait_for(lambda: queue_state(c, job)["requests"], lambda r: r == [], 180, "the queue drained")
    scenario.wait_for(lambda: log_lines(c), lambda lines: f"end {shell_id}" in lines, 60, "the shell's request run")
    lines = log_lines(c)
    starts = assert_one_at_a_time_in_order(lines)
    assert len(starts) == len(set(starts))  # each request ran once
    assert f"start {shell_id} from-shell" in lines
    rejected = [e for e in scenario.outcomes(job) if e.get("JOBGEN_OUTCOME") == "rejected"]
    assert rejected and all("queue full" in e["MESSAGE"] for e in rejected)


def test_a_request_whose_command_is_killed_runs_again(scenario, systemd_jobgen):
    c = systemd_jobgen
    c.run("rm", "-f", LOG)
    job = "q-kill"
    scenario.deploy(manifest(job, "2099-01-01", 600, 5))  # never by the timer: by hand only
    c.systemctl("start", f"{job}-drain.path")
    rid = c.run("jobgen", "enqueue", "--spool", f"/var/lib/jobgen/queue/{job}", "--job", job).stdout.strip()
    scenario.wait_for(lambda: log_lines(c), lambda lines: any(line.startswith(f"start {rid}") for line in lines), 120, "the run to start")
    # SIGKILL the command itself (its shell; flock and the drainer stay): the drainer sees 137, keeps the request first
    # in line with its attempt counted, and the path unit starts the drainer again.
    c.run("pkill", "-KILL", "-f", "^/bin/sh -c echo")
    scenario.wait_for(
        lambda: [l for l in log_lines(c) if l.startswith(f"start {rid}")],
        lambda starts: len(starts) >= 2,
        120,
        "the killed request to run again",
    )
    state = queue_state(c, job)["requests"]
    assert [(r["id"], r["state"], r["attempts"], r["last_status"]) for r in state] == [(rid, "running", 2, 137)]
    outcomes = [e.get("JOBGEN_OUTCOME") for e in scenario.outcomes(job)]
    assert "retry" in outcomes
    c.run("pkill", "-KILL", "-f", "^/bin/sh -c echo")  # the second attempt too; the third is left to finish
    c.systemctl("stop", f"{job}-drain.path", f"{job}-drain.service")


# ---------------------------------------------------------------------------------------------
# Across a reboot: the spool is on disk (/var/lib), and the watch starts the drainer at boot.

def test_requests_survive_a_reboot_and_are_drained_in_order_at_boot(host):
    host.boot()
    host.install()
    job = "q-reboot"
    code, doc = host.apply(manifest(job, "2099-01-01", 0, 10))  # never by the timer
    assert code == 0 and doc["ok"], doc
    assert f"systemctl enable --now {job}-drain.path" in [" ".join(a["argv"]) for a in doc["actions"]]
    # Requests recorded while nothing drains them (the watch is stopped, as if the host went
    # down right after they were enqueued).
    host.c.systemctl("stop", f"{job}-drain.path")
    spool = ["--spool", f"/var/lib/jobgen/queue/{job}", "--job", job]
    ids = [host.c.run("jobgen", "enqueue", *spool, "--", f"n{i}").stdout.strip() for i in range(3)]
    assert [r["id"] for r in queue_state(host.c, job)["requests"]] == ids
    host.reboot()
    # The watch is enabled (paths.target): at boot it finds the spool non-empty and starts
    # the drainer, which runs the three requests in the order they were recorded.
    lines = host.wait(lambda: log_lines(host.c), lambda got: len(got) >= 6, "the requests drained after the reboot", timeout=180)
    assert [line.split()[1:] for line in lines if line.startswith("start")] == [[i, f"n{n}"] for n, i in enumerate(ids)]
    assert_one_at_a_time_in_order(lines)
    assert queue_state(host.c, job)["requests"] == []


# ---------------------------------------------------------------------------------------------
# A poweroff in the middle of a request, and a backlog at boot.

HOLDER = "/usr/local/bin/jobgen"  # README "Install": a virtualenv in /opt, its commands linked here


def install_like_the_readme(host) -> None:
    """jobgen in its virtualenv under /opt with `jobgen` linked into /usr/local/bin, not /usr/bin."""
    host.install()
    host.sh(f"rm -f /usr/bin/jobgen /usr/bin/jobgen-generator && ln -sfn /opt/jobgen/bin/jobgen {HOLDER}")
    assert host.sh("command -v jobgen").stdout.strip() == HOLDER


def test_a_poweroff_mid_request_is_a_stop_and_a_backlog_does_not_hold_up_boot(host):
    host.boot()
    install_like_the_readme(host)
    # A persistent journal, so the lines written while powering off can be read afterwards.
    host.sh("mkdir -p /var/log/journal && journalctl --flush")
    job, plain = "q-boot", "q-plain"
    script = (f'echo "start $JOBGEN_REQUEST_ID attempt=$JOBGEN_REQUEST_ATTEMPT" >> {LOG}; sleep 30; '
              f'echo "end $JOBGEN_REQUEST_ID" >> {LOG}')
    text = (
        "jobgen: 1\njobs:\n"
        f"  {job}:\n"
        f"    command: [/bin/sh, -c, '{script}', {job}]\n"
        "    schedule: '2099-01-01'\n"  # never by the timer: requests by hand
        "    hardening: none\n"
        "    overlap: queue\n"
        "    queue: {max_pending: 5, on_full: reject, max_attempts: 2}\n"
        # A plain job (overlap: skip) running when the host powers off.
        f"  {plain}:\n"
        "    command: [/bin/sleep, '600']\n"
        "    schedule: '2099-01-01'\n"
        "    hardening: none\n"
    )
    code, doc = host.apply(text, "--holder", HOLDER)
    assert code == 0 and doc["ok"], doc
    rid = host.c.run("jobgen", "enqueue", "--spool", f"/var/lib/jobgen/queue/{job}", "--job", job).stdout.strip()
    host.wait(lambda: log_lines(host.c), lambda got: f"start {rid} attempt=1" in got, "the request to start")
    host.c.systemctl("start", "--no-block", f"{plain}.service")
    host.wait(lambda: host.state(f"{plain}.service")[1], lambda s: s == "activating", "the plain job to run")

    # Power off in the middle of both (an orderly shutdown: SIGTERM to the container's
    # nspawn), and boot again with the request still waiting.
    host.reboot()
    # Booted: `systemctl is-system-running --wait` said "running" (Container.boot). The
    # request takes 30 s: had the drain held up boot, it would have ended by now.
    at_ready = log_lines(host.c)
    boot_seconds = host.c.boot_seconds
    assert f"end {rid}" not in at_ready, f"boot waited for the request to finish: {at_ready}"
    # The drainer started by the .path unit at boot runs the request as attempt 1 again:
    # the poweroff did not spend an attempt. While it runs, the system is up and no job is
    # pending (a oneshot drainer would keep its start job, and the state "starting").
    lines = host.wait(lambda: log_lines(host.c), lambda got: got.count(f"start {rid} attempt=1") == 2, "the request to run again")
    assert f"start {rid} attempt=2" not in lines
    assert host.state(f"{job}-drain.service")[1] == "active"
    assert host.c.systemctl("is-system-running", check=False).stdout.strip() == "running"
    assert host.c.systemctl("list-jobs", "--no-legend", check=False).stdout.strip() == ""
    startup = host.c.run("systemd-analyze", "time", check=False).stdout.strip()
    blame = host.c.run("systemd-analyze", "blame", "--no-pager", check=False).stdout
    host.wait(lambda: log_lines(host.c), lambda got: f"end {rid}" in got, "the request to finish after boot", timeout=120)
    host.wait(lambda: queue_state(host.c, job)["requests"], lambda r: r == [], "the queue to empty")

    # What the poweroff logged: the request and the plain job were stopped, not failed.
    before = host.c.journal("-b", "-1", "SYSLOG_IDENTIFIER=jobgen")
    outcomes = {(e.get("JOBGEN_JOB"), e.get("JOBGEN_OUTCOME"), e.get("JOBGEN_REQUEST_ID", "")) for e in before}
    explain = format_journal(before)
    assert (job, "stopped", rid) in outcomes, explain
    assert (plain, "stopped", "") in outcomes, explain
    assert not any(o in ("failed", "retry") for _, o, _ in outcomes), explain
    print(f"systemd {host.release}: boot to running with a 30 s request pending: {boot_seconds:.1f}s; "
          f"{startup.splitlines()[0] if startup else '?'}; drain in blame: "
          f"{[l.strip() for l in blame.splitlines() if 'drain' in l]}")
