"""`jobgen apply` on real systemd 252 and 257, with reboots.

Each test boots its own container on a persistent tree (an overlay whose upper layer is kept
in a folder of the test), so "reboot" is what it is on a host: halt, then boot the same
disk with a fresh /run. jobgen itself (the wheel of this worktree) runs inside.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from container import RELEASES, format_journal, in_image
from support.cli import JOBGEN
from hosts import JOB_USER, OTHER_USER

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]

# beat runs every 3 s as svc through its host lock (accuracy 1ms: with systemd's default
# AccuracySec=1min its first run may come a minute late, past the tests' waits); slow is
# started by hand to be "running" when it is removed; queue is a worker that says how it
# was stopped.
V1 = f"""\
jobgen: 1
jobs:
  beat:
    command: [/bin/sh, -c, "echo beat-ran"]
    schedule: "*:*:0/3"
    accuracy: 1ms
    user: {JOB_USER}
  slow:
    command: [/bin/sh, -c, "echo slow-start; sleep 15; echo slow-done"]
    schedule: yearly
    user: {JOB_USER}
workers:
  queue:
    command: [/bin/sh, -c, "trap 'echo graceful-stop; exit 0' TERM; echo worker-up; while :; do sleep 1 & wait $!; done"]
    stop_timeout: 20s
"""
# slow removed, the worker changed (its stop timeout), beat unchanged.
V2 = V1.replace(
    f'''  slow:
    command: [/bin/sh, -c, "echo slow-start; sleep 15; echo slow-done"]
    schedule: yearly
    user: {JOB_USER}
''',
    "",
).replace("stop_timeout: 20s", "stop_timeout: 25s")


def actions(doc: dict) -> list[str]:
    return [" ".join(a["argv"]) for a in doc["actions"]]


# ---------------------------------------------------------------------------------------------


def test_apply_then_reboot_lock_files_come_back_and_runs_take_their_lock(host):
    host.boot()
    host.install()
    code, doc = host.apply(V1)
    assert code == 0 and doc["ok"], doc
    assert "systemctl enable --now beat.timer" in actions(doc)
    assert "systemctl enable --now queue.service" in actions(doc)
    assert any(a.startswith("systemd-tmpfiles --create /etc/tmpfiles.d/jobgen-shop.conf") for a in actions(doc))
    assert host.state("beat.timer") == ("enabled", "active")
    assert host.state("queue.service") == ("enabled", "active")
    # Lock files as the README documents them: root-only folder, 0600 owned by the job's user.
    assert host.sh("stat -c '%U %G %a' /run/jobgen").stdout.strip() == "root root 755"
    assert host.sh("stat -c '%U %G %a' /run/jobgen/beat.lock").stdout.strip() == f"{JOB_USER} root 600"
    host.wait(lambda: host.outcomes("beat"), lambda o: "success" in o, "a successful run of beat")

    # The denial of service of /run/lock, tried as another local user, fails at every step.
    dos = host.c.run(
        "setpriv", f"--reuid={OTHER_USER}", f"--regid={OTHER_USER}", "--init-groups", "/bin/sh", "-c",
        "flock --nonblock /run/jobgen/beat.lock true; echo flock=$?; "
        "touch /run/jobgen/x.lock; echo create=$?; "
        "rm -f /run/jobgen/beat.lock; echo remove=$?; "
        "mkdir /run/jobgen2; echo mkdir=$?",
        check=False,
    )  # fmt: skip
    assert [line for line in dos.stdout.split() if "=" in line] == ["flock=66", "create=1", "remove=1", "mkdir=1"], dos  # 66: flock cannot open the file
    assert dos.stderr.count("Permission denied") == 4, dos.stderr

    # Again: nothing to do, not one state-changing call.
    code, again = host.apply(V1)
    assert (code, again["changed"], again["actions"]) == (0, False, []), again
    assert {f["action"] for f in again["files"]} == {"identical"}

    host.reboot()
    assert host.state("beat.timer") == ("enabled", "active")
    assert host.state("queue.service") == ("enabled", "active")
    assert host.sh("stat -c '%U %G %a' /run/jobgen/beat.lock").stdout.strip() == f"{JOB_USER} root 600"
    # This boot's journal only: the first run after the reboot takes its lock and succeeds.
    # Started at once rather than waiting for the timer (whose next elapse after a boot is
    # not this test's subject): the same unit, the same lock.
    host.c.systemctl("start", "beat.service", check=False, timeout=120)
    first = host.wait(lambda: host.outcomes("beat"), lambda o: len(o) >= 1, "beat's first run after the reboot")
    assert first[0] == "success", first


def test_the_old_flat_copy_into_etc_systemd_system_loses_its_lock_folder_at_reboot(host):
    """What the README used to say: render -o /etc/systemd/system. The units load, and the
    snippet in /etc/systemd/system/tmpfiles.d/ is read by nobody: after a reboot /run/jobgen
    is missing and the job fails. render now warns; apply (test above) does not fail."""
    host.boot()
    host.install()
    c = host.c
    c.write_file("/root/m/shop.yaml", V1.replace(f"    user: {JOB_USER}\n", ""))
    r = c.run("jobgen", "render", "/root/m/shop.yaml", "-o", "/etc/systemd/system", "--systemd", host.release)
    assert "jobgen: warning: /etc/systemd/system/tmpfiles.d/jobgen-shop.conf is not read by systemd-tmpfiles" in r.stderr
    c.run("systemd-tmpfiles", "--create", "/etc/systemd/system/tmpfiles.d/jobgen-shop.conf")  # by hand, once
    c.systemctl("daemon-reload")
    c.systemctl("enable", "--now", "beat.timer")
    host.wait(lambda: host.outcomes("beat"), lambda o: "success" in o, "beat succeeding before the reboot")
    listed = c.run("systemd-tmpfiles", "--cat-config").stdout
    assert "jobgen-shop.conf" not in listed

    host.reboot()
    assert host.sh("test -e /run/jobgen", check=False).returncode == 1
    assert host.state("beat.timer") == ("enabled", "active")
    c = host.c
    c.systemctl("start", "beat.service", check=False, timeout=120)
    outcomes = host.wait(lambda: host.outcomes("beat"), lambda o: len(o) >= 1, "beat's first run after the reboot")
    assert outcomes[0] == "failed"
    status = [e for e in host.journal("_SYSTEMD_UNIT=beat.service") if "cannot open lock file" in e.get("MESSAGE", "")]
    assert status, format_journal(host.journal("_SYSTEMD_UNIT=beat.service", "+", "UNIT=beat.service"))


def test_removed_job_waits_for_its_run_changed_worker_restarts_gracefully(host):
    host.boot()
    host.install()
    assert host.apply(V1)[0] == 0
    c = host.c
    worker_pid = c.run("systemctl", "show", "-P", "MainPID", "queue.service").stdout.strip()
    c.systemctl("start", "--no-block", "slow.service")
    host.wait(lambda: [e.get("MESSAGE") for e in host.journal("_SYSTEMD_UNIT=slow.service")], lambda m: "slow-start" in m, "slow running")

    code, doc = host.apply(V2, "--stop-timeout", "60")
    assert code == 0 and doc["ok"], doc
    # Planned: stop the timer, wait for slow.service (up to 60 s), stop it if still running,
    # disable. The run ended within the wait, so no stop was sent to it.
    assert actions(doc)[:2] == ["systemctl stop slow.timer", "systemctl disable slow.timer"], doc["actions"]
    assert "systemctl stop slow.service" not in actions(doc)
    assert "systemctl restart queue.service" in actions(doc)
    removed = sorted(Path(f["path"]).name for f in doc["files"] if f["action"] == "remove")
    assert removed == ["slow.service", "slow.timer"]
    # The run in progress was not killed: it ran to its end, then the files went.
    messages = [e.get("MESSAGE") for e in host.journal("_SYSTEMD_UNIT=slow.service")]
    assert "slow-done" in messages, messages
    assert host.outcomes("slow") == ["success"]
    assert c.run("ls", "/etc/systemd/system/").stdout.split().count("slow.timer") == 0
    assert host.state("slow.timer")[0] in ("not-found", "")
    assert not c.run("test", "-e", "/etc/systemd/system/timers.target.wants/slow.timer", check=False).returncode == 0
    # The changed worker was restarted gracefully: SIGTERM reached its handler, a new process runs.
    worker_lines = [e.get("MESSAGE") for e in host.journal("_SYSTEMD_UNIT=queue.service")]
    assert "graceful-stop" in worker_lines and worker_lines.count("worker-up") == 2, worker_lines
    assert c.run("systemctl", "show", "-P", "MainPID", "queue.service").stdout.strip() != worker_pid
    assert c.run("systemctl", "show", "-P", "TimeoutStopUSec", "queue.service").stdout.strip() == "25s"


def test_apply_into_an_image_root_then_boot_it(host):
    manifest = host.persist.parent / f"{host.persist.name}-shop.yaml"
    manifest.write_text(V1.replace(f"    user: {JOB_USER}\n", ""))
    r = in_image(
        RELEASES[host.release], host.persist,
        [*JOBGEN, "apply", str(manifest), "--root", str(host.persist / "merged"), "--systemd", host.release, "--format", "json"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    manifest.unlink()
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert actions(doc) == [
        f"systemctl --root={host.persist / 'merged'} enable beat.timer",
        f"systemctl --root={host.persist / 'merged'} enable queue.service",
        f"systemctl --root={host.persist / 'merged'} enable slow.timer",
    ]
    host.boot()
    assert host.state("beat.timer") == ("enabled", "active")
    assert host.state("slow.timer") == ("enabled", "active")
    assert host.state("queue.service") == ("enabled", "active")
    assert host.sh("stat -c '%U %a' /run/jobgen/beat.lock").stdout.strip() == "root 600"
    outcomes = host.wait(lambda: host.outcomes("beat"), lambda o: len(o) >= 1, "beat fired in the booted image")
    assert outcomes[0] == "success"


def test_a_unit_that_fails_to_start_is_named_and_the_rest_is_applied(systemd_jobgen):
    c = systemd_jobgen
    manifest = """\
jobgen: 1
jobs:
  apply-fine:
    command: [/bin/true]
    schedule: yearly
workers:
  apply-broken:
    command: [/nonexistent/worker]
    stop_timeout: 5s
"""
    c.write_file("/root/m-fail/fail.yaml", manifest)
    r = c.run("jobgen", "apply", "/root/m-fail/fail.yaml", "--format", "json", check=False, timeout=300)
    try:
        doc = json.loads(r.stdout)
        assert (r.returncode, doc["ok"]) == (3, False), r
        (error,) = doc["errors"]
        assert error.startswith("`systemctl enable --now apply-broken.service` failed (new worker): "), error
        assert c.run("systemctl", "is-active", "apply-fine.timer", check=False).stdout.strip() == "active"
        assert c.run("systemctl", "is-enabled", "apply-broken.service", check=False).stdout.strip() == "enabled"
    finally:
        # The session's container is shared: leave it "running", not "degraded".
        c.run("systemctl", "disable", "--now", "apply-fine.timer", "apply-broken.service", check=False)
        c.run("systemctl", "reset-failed", "apply-broken.service", check=False)


# A queue job (its units run `jobgen enqueue` and `jobgen drain`) and a cluster job (`jobgen
# lock`, against a port nothing listens on): both exec the holder.
HOLDER_JOBS = """\
jobgen: 1
jobs:
  inbox:
    command: [/bin/sh, -c, "echo inbox-ran"]
    schedule: yearly
    overlap: queue
    lock: host
  ledger:
    command: [/bin/sh, -c, "echo ledger-ran"]
    schedule: yearly
    timeout: 1m
    lock: {scope: cluster, backend: "redis://127.0.0.1:9", name: "shop:ledger"}
"""


def test_apply_from_a_venv_linked_into_usr_local_bin_runs_the_units_with_that_jobgen(host):
    """jobgen in a virtualenv under /opt, linked from /usr/local/bin, nothing at
    /usr/bin/jobgen: apply's units exec the jobgen that ran apply, so they start (the
    cluster job fails to reach its server, not to find its executable: no 203/EXEC)."""
    host.boot()
    host.install()
    c = host.c
    c.run("/bin/sh", "-c", "rm -f /usr/bin/jobgen && ln -sfn /opt/jobgen/bin/jobgen /usr/local/bin/jobgen")
    c.write_file("/root/m/shop.yaml", HOLDER_JOBS)
    r = c.run("/usr/local/bin/jobgen", "apply", "/root/m/shop.yaml", "--format", "json", check=False, timeout=300)
    doc = json.loads(r.stdout)
    assert (r.returncode, doc["ok"]) == (0, True), (r.stderr, doc)
    assert not [d for d in doc["diagnostics"] if "--holder" in d["message"]], doc["diagnostics"]
    assert c.run("systemctl", "show", "-P", "ExecStart", "ledger.service").stdout.count("path=/opt/jobgen/bin/jobgen ") == 1

    c.systemctl("start", "inbox.service", check=False, timeout=120)
    host.wait(lambda: [e.get("MESSAGE") for e in host.journal("_SYSTEMD_UNIT=inbox-drain.service")], lambda m: "inbox-ran" in m, "the queued run of inbox")
    c.systemctl("start", "ledger.service", check=False, timeout=120)
    # Its holder ran: it could not reach the server, and its run was logged as an outcome.
    host.wait(lambda: host.outcomes("ledger"), lambda o: len(o) >= 1, "ledger's outcome")
    journal = format_journal(host.journal())
    assert "Failed to locate executable" not in journal and "status=203/EXEC" not in journal, journal[-4000:]

    # The default of before (/usr/bin/jobgen) is named where it would fail, at each job.
    c.write_file("/root/m2/shop.yaml", HOLDER_JOBS)
    warned = c.run("/usr/local/bin/jobgen", "apply", "/root/m2/shop.yaml", "--holder", "/usr/bin/jobgen", "--check", check=False)
    lines = [line for line in warned.stderr.splitlines() if "(--holder)" in line]
    assert [line.split(": warning: ")[0] for line in lines] == ["/root/m2/shop.yaml:6:5", "/root/m2/shop.yaml:12:5"], warned.stderr
    assert all("(the jobgen running now is /opt/jobgen/bin/jobgen)" in line for line in lines)
