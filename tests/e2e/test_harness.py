"""The harness itself, on units written by hand in the shape jobgen renders (brief: host lock
with flock, exit 75 = lock busy, an ExecStopPost= reporter). If these fail, the scenario
tests cannot be trusted either."""

from pathlib import Path

import pytest

from container import format_journal

pytestmark = pytest.mark.e2e

REPORTER = (
    # $SERVICE_RESULT/$EXIT_STATUS are set for ExecStopPost= (systemd.exec(5), 232+).
    # $$ and %% are systemd's escapes for a literal $ and %.
    """ExecStopPost=/bin/sh -c 'case "$$SERVICE_RESULT:$$EXIT_STATUS" in """
    """success:0) o=success;; success:75) o=skipped;; timeout:*) o=timeout;; *) o=failed;; esac; """
    """printf "SYSLOG_IDENTIFIER=jobgen\\\\nMESSAGE=%%s: %%s\\\\nJOBGEN_JOB=%%s\\\\nJOBGEN_OUTCOME=%%s\\\\n" """
    """"$$1" "$$o" "$$1" "$$o" | logger --journald' sh {job}"""
)


def handmade(tmp: Path, job: str, command: str, calendar: str) -> Path:
    out = tmp / "handmade"
    (out / "tmpfiles.d").mkdir(parents=True)
    (out / "tmpfiles.d" / "jobgen.conf").write_text("d /run/jobgen 0755 root root -\n")
    (out / f"{job}.service").write_text(
        f"""[Unit]
Description=hand-written job {job}

[Service]
Type=oneshot
ExecStart=/usr/bin/flock --nonblock --conflict-exit-code 75 /run/jobgen/{job}.lock {command}
SuccessExitStatus=75
{REPORTER.format(job=job)}
"""
    )
    (out / f"{job}.timer").write_text(
        f"""[Timer]
OnCalendar={calendar}
AccuracySec=1ms
"""
    )
    return out


def test_boots_the_expected_systemd(systemd):
    version = systemd.run("systemctl", "--version").stdout.split()[1]
    assert version == systemd.release
    assert systemd.run("systemctl", "is-system-running").stdout.strip() == "running"


def test_handmade_timer_job_reports_its_outcome(scenario, tmp_path):
    job = "smoke-handmade"
    installed = scenario.container.install_units(handmade(tmp_path, job, "/bin/echo hello", "*:*:0/2"))
    scenario.units += installed
    assert sorted(installed) == [f"{job}.service", f"{job}.timer"]
    assert scenario.sh("stat -c %U:%a /run/jobgen").stdout.strip() == "root:755"

    scenario.container.systemctl("start", f"{job}.timer")
    assert scenario.wait_outcomes(job, 1, timeout=10)[0] == "success", scenario.journal_text()
    scenario.stop(f"{job}.timer")

    (run, *_) = [r for r in scenario.runs(f"{job}.service") if r.outcome]
    assert "hello" in run.messages(), format_journal(run.entries)
    assert scenario.unit_result(run) == "success", format_journal(run.entries)


def test_handmade_lock_conflict_is_a_skip(scenario, tmp_path):
    job = "smoke-conflict"
    scenario.units += scenario.container.install_units(handmade(tmp_path, job, "/bin/echo ran", "yearly"))
    holder = scenario.hold_lock(job)
    scenario.container.systemctl("start", f"{job}.service")  # exit 0: 75 counts as success
    scenario.release_lock(holder)
    assert scenario.wait_outcomes(job, 1) == ["skipped"], scenario.journal_text()
    (run,) = scenario.runs(f"{job}.service")
    assert "ran" not in run.messages(), format_journal(run.entries)
