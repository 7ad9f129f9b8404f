"""Scheduled jobs rendered by jobgen, run by real systemd 252 and 257.

Each test writes a small manifest, renders it with `jobgen render --systemd <release>`, installs
the output in the container, acts (timers, manual runs from a shell, kills) and reads what
happened from the journal: the reporter's JOBGEN_OUTCOME line and systemd's own lines, grouped
per activation by invocation ID. Job names differ per test: the container is shared.
"""

import json
import textwrap
import time

import pytest

from container import format_journal

pytestmark = pytest.mark.e2e

EX_TEMPFAIL = 75  # jobgen's exit code for "lock busy", everywhere (sysexits.h EX_TEMPFAIL)


def manifest(jobs: str) -> str:
    """A v1 manifest holding `jobs` (YAML, any indentation). Jobs run as root in the container.

    Timers here fire every 3 s and say `accuracy: 1ms`: systemd's default AccuracySec=1min
    would let them fire up to a minute late (systemd.timer(5))."""
    return 'jobgen: 1\ntarget: {systemd: ">=252"}\njobs:\n' + textwrap.indent(textwrap.dedent(jobs).strip(), "  ") + "\n"


def lines(run, text):
    return [m for m in run.messages() if m == text]


def job_runs(scenario, unit):
    """Activations in which the job's command itself began (its first line is "begin"), as
    opposed to activations that ended before it: lock busy, or a skipped catch-up."""
    return [r for r in scenario.runs(unit) if "begin" in r.messages()]


# 1 ------------------------------------------------------------------------------------------


def test_timer_fires_and_the_outcome_is_reported(scenario):
    scenario.deploy(
        manifest("""
        e2e-fires:
          command: [/bin/echo, fired by the timer]
          schedule: "*:*:0/3"
          accuracy: 1ms
        """)
    )
    scenario.container.systemctl("start", "e2e-fires.timer")

    assert scenario.wait_outcomes("e2e-fires", 1, timeout=20) == ["success"]
    scenario.stop("e2e-fires.timer")
    run = next(r for r in scenario.runs("e2e-fires.service") if r.outcome)
    explain = format_journal(run.entries)
    assert "fired by the timer" in run.messages(), explain
    assert scenario.unit_result(run) == "success", explain


# 2 ------------------------------------------------------------------------------------------


def test_runs_never_overlap_when_the_job_outlasts_its_interval(scenario):
    scenario.deploy(
        manifest("""
        e2e-no-overlap:
          command: [/bin/sh, -c, "echo begin; sleep 4; echo end"]
          schedule: "*:*:0/3"
          accuracy: 1ms
        """)
    )
    scenario.container.systemctl("start", "e2e-no-overlap.timer")
    scenario.wait_for(
        lambda: [r for r in job_runs(scenario, "e2e-no-overlap.service") if r.end],
        lambda finished: len(finished) >= 2,
        40,
        "two finished runs",
    )
    scenario.stop("e2e-no-overlap.timer")

    runs = scenario.runs("e2e-no-overlap.service")  # every activation, whatever it did
    windows = [(r.start, r.end if r.end is not None else float("inf")) for r in runs]
    overlapping = [(a, b) for a, b in zip(windows, windows[1:]) if b[0] < a[1]]
    explain = scenario.journal_text()
    assert overlapping == [], explain
    for run in job_runs(scenario, "e2e-no-overlap.service")[:2]:
        assert lines(run, "begin") == ["begin"] and lines(run, "end") == ["end"], format_journal(run.entries)


# 3 ------------------------------------------------------------------------------------------

ALARM = {
    # An operator's failure alarm, attached by drop-in: it must fire on failures only.
    # $MONITOR_UNIT names the unit that failed (systemd 251+).
    "e2e-alarm.service": "[Service]\nType=oneshot\nExecStart=/bin/sh -c 'echo ALARM for $$MONITOR_UNIT'\n",
}


def alarm_lines(scenario) -> list[str]:
    return [e["MESSAGE"] for e in scenario.container.unit_journal("e2e-alarm.service") if "ALARM" in e.get("MESSAGE", "")]


def test_a_lock_conflict_is_a_skip_on_both_sides(scenario):
    command = ["/bin/sh", "-c", "echo begin; sleep 3; echo end"]
    scenario.deploy(
        manifest("""
        e2e-skip:
          command: [/bin/sh, -c, "echo begin; sleep 3; echo end"]
          schedule: yearly
        e2e-skip-control:
          command: [/bin/false]
          schedule: yearly
        """)
    )
    scenario.install_files(
        {
            **ALARM,
            "e2e-skip.service.d/alarm.conf": "[Unit]\nOnFailure=e2e-alarm.service\n",
            "e2e-skip-control.service.d/alarm.conf": "[Unit]\nOnFailure=e2e-alarm.service\n",
        }
    )

    # (a) the unit runs; the same job started from a shell meets the lock and gets 75
    scenario.container.systemctl("start", "--no-block", "e2e-skip.service")
    scenario.wait_for(
        lambda: [m for r in scenario.runs("e2e-skip.service") for m in r.messages()],
        lambda msgs: "begin" in msgs,
        10,
        "the unit's job to begin",
    )
    manual = scenario.manual_run("e2e-skip", command)
    assert manual.returncode == EX_TEMPFAIL, (manual, scenario.journal_text())
    assert "begin" not in manual.stdout
    assert scenario.wait_outcomes("e2e-skip", 1) == ["success"]

    # (b) a shell holds the lock; the unit started now ends as skipped, and succeeds.
    # Below 257 a start within 2 s of the previous run's end is deferred by the overrun
    # emulation (README "Overrun"; test_a_start_right_after_a_run_is_deferred_below_257),
    # so step out of that window first.
    time.sleep(2.2)
    holder = scenario.hold_lock("e2e-skip")
    started = scenario.container.systemctl("start", "e2e-skip.service", check=False)
    scenario.release_lock(holder)
    assert started.returncode == 0, (started, scenario.journal_text())
    assert scenario.wait_outcomes("e2e-skip", 2) == ["success", "skipped"]
    skipped = [r for r in scenario.runs("e2e-skip.service") if r.outcome == "skipped"][0]
    assert lines(skipped, "begin") == [], format_journal(skipped.entries)
    assert scenario.unit_result(skipped) == "success", format_journal(skipped.entries)

    # a real failure does trigger the alarm (so its absence above means something) ...
    scenario.container.systemctl("start", "e2e-skip-control.service", check=False)
    assert scenario.wait_outcomes("e2e-skip-control", 1) == ["failed"]
    scenario.wait_for(lambda: alarm_lines(scenario), bool, 10, "the alarm of the failed control job")
    # ... and it fired for the control job only
    assert alarm_lines(scenario) == ["ALARM for e2e-skip-control.service"], scenario.journal_text("e2e-alarm.service", "e2e-skip.service")


# 4 ------------------------------------------------------------------------------------------


def test_wait_policy_runs_after_the_holder_and_gives_up_at_its_bound(scenario):
    scenario.deploy(
        manifest("""
        e2e-wait:
          command: [/bin/echo, begin]
          schedule: yearly
          overlap: wait
          wait_timeout: 4s
        """)
    )

    # (a) a shell holds the lock; the unit waits for it, then runs
    holder = scenario.hold_lock("e2e-wait")
    scenario.container.systemctl("start", "--no-block", "e2e-wait.service")
    scenario.wait_for(
        lambda: scenario.container.systemctl("is-active", "e2e-wait.service", check=False).stdout.strip(),
        lambda state: state == "activating",
        10,
        "e2e-wait.service to be activating",
    )
    time.sleep(1)  # let it wait a while: it must not have begun yet
    assert scenario.outcomes("e2e-wait") == [], scenario.journal_text()
    released_at = time.time()
    scenario.release_lock(holder)
    assert scenario.wait_outcomes("e2e-wait", 1) == ["success"]
    (first,) = scenario.runs("e2e-wait.service")
    begin = next(e for e in first.entries if e.get("MESSAGE") == "begin")
    assert int(begin["__REALTIME_TIMESTAMP"]) / 1e6 >= released_at - 0.05, format_journal(first.entries)

    # (b) the holder keeps the lock past the bound: the unit gives up with its own outcome
    holder = scenario.hold_lock("e2e-wait")
    scenario.container.systemctl("start", "e2e-wait.service", check=False, timeout=60)
    assert scenario.wait_outcomes("e2e-wait", 2) == ["success", "wait-expired"]
    scenario.release_lock(holder)
    expired = [r for r in scenario.runs("e2e-wait.service") if r.outcome == "wait-expired"][0]
    assert lines(expired, "begin") == [], format_journal(expired.entries)


# 5 ------------------------------------------------------------------------------------------


def test_kill_9_of_the_job_frees_the_lock_and_the_next_run_proceeds(scenario):
    scenario.deploy(
        manifest("""
        e2e-kill:
          # first run: hangs; later runs: finish at once
          command: [/bin/sh, -c, "if [ -e /run/e2e-kill.once ]; then echo second run; exit 0; fi; touch /run/e2e-kill.once; echo begin; sleep 60"]
          schedule: "*:*:0/3"
          accuracy: 1ms
        """)
    )
    scenario.container.systemctl("start", "e2e-kill.timer")
    scenario.wait_for(
        lambda: [m for r in scenario.runs("e2e-kill.service") for m in r.messages()],
        lambda msgs: "begin" in msgs,
        15,
        "the first run to begin",
    )
    # The job's own process is the child of flock (the unit's main process).
    main_pid = scenario.container.systemctl("show", "-P", "MainPID", "e2e-kill.service").stdout.strip()
    job_pid = scenario.sh(f"pgrep -P {main_pid} -x sh").stdout.split()
    assert len(job_pid) == 1, (main_pid, job_pid, scenario.journal_text())
    killed_at = time.monotonic()
    scenario.sh(f"kill -9 {job_pid[0]}")

    # the lock is free again as soon as systemd has ended the rest of the unit's processes
    scenario.wait_for(
        lambda: scenario.manual_run("e2e-kill", ["/bin/true"]).returncode,
        lambda rc: rc == 0,
        3,
        "the lock to be free after kill -9",
        interval=0.05,
    )
    freed_after = time.monotonic() - killed_at
    outcomes = scenario.wait_for(
        lambda: [e["JOBGEN_OUTCOME"] for e in scenario.outcomes("e2e-kill")],
        lambda found: "success" in found,
        20,
        "a successful run after the kill",
    )
    scenario.stop("e2e-kill.timer")
    # The killed run failed; the next run that starts the job succeeds. In between, only
    # catch-up activations skipped by design (overrun handling) may appear.
    explain = scenario.journal_text()
    assert outcomes[0] == "failed" and outcomes[-1] == "success", explain
    assert set(outcomes[1:-1]) <= {"skipped"}, explain
    second = [r for r in scenario.runs("e2e-kill.service") if r.outcome == "success"][0]
    assert "second run" in second.messages(), format_journal(second.entries)
    print(f"systemd {scenario.release}: lock free {freed_after:.2f}s after kill -9")


# 6 ------------------------------------------------------------------------------------------


def test_overrun_waits_for_the_next_slot(scenario):
    # 257: DeferReactivation=yes. 252 has no such key: jobgen emulates it (an ExecCondition=
    # that skips an activation starting right after the previous run ended). Without either,
    # 252 starts the job again the moment an overrunning run ends (back to back).
    scenario.deploy(
        manifest("""
        e2e-overrun:
          command: [/bin/sh, -c, "echo begin; sleep 4; echo end"]
          schedule: "*:*:0/3"
          accuracy: 1ms
        """)
    )
    scenario.container.systemctl("start", "e2e-overrun.timer")
    scenario.wait_for(
        lambda: [r for r in job_runs(scenario, "e2e-overrun.service") if r.end],
        lambda finished: len(finished) >= 3,
        45,
        "three finished runs",
    )
    scenario.stop("e2e-overrun.timer")

    runs = [r for r in job_runs(scenario, "e2e-overrun.service") if r.end is not None][:3]
    gaps = [round(b.start - a.end, 3) for a, b in zip(runs, runs[1:])]
    explain = f"gaps between runs: {gaps}\n{scenario.journal_text()}"
    assert len(runs) == 3, explain
    assert all(g >= 1.0 for g in gaps), explain
    outcomes = [o["JOBGEN_OUTCOME"] for o in scenario.outcomes("e2e-overrun")]
    if scenario.release == "252":
        # The emulation did the deferring: its catch-up activations are logged as such.
        assert "deferred" in outcomes, explain
    else:
        assert "deferred" not in outcomes, explain  # DeferReactivation=yes: no catch-up at all


def test_a_start_right_after_a_run_is_deferred_below_257(scenario):
    """The emulation's documented cost (README "Overrun"): it cannot tell a manual
    `systemctl start` from the timer's catch-up, so one within 2 s of the previous run's end
    is deferred on 252. On 257 (DeferReactivation=yes) it runs."""
    scenario.deploy(
        manifest("""
        e2e-again:
          command: [/bin/echo, ran]
          schedule: yearly
        """)
    )
    scenario.container.systemctl("start", "e2e-again.service")
    scenario.container.systemctl("start", "e2e-again.service", check=False)
    expected = ["success", "deferred"] if scenario.release == "252" else ["success", "success"]
    assert scenario.wait_outcomes("e2e-again", 2) == expected, scenario.journal_text()
    time.sleep(2.2)
    scenario.container.systemctl("start", "e2e-again.service")
    assert scenario.wait_outcomes("e2e-again", 3)[-1] == "success", scenario.journal_text()


# 7 ------------------------------------------------------------------------------------------


def test_a_job_over_its_timeout_is_stopped_and_recorded_as_timeout(scenario):
    scenario.deploy(
        manifest("""
        e2e-timeout:
          command: [/bin/sh, -c, "echo begin; sleep 60; echo end"]
          schedule: yearly
          timeout: 2s
        """)
    )
    started = scenario.container.systemctl("start", "e2e-timeout.service", check=False, timeout=60)
    assert started.returncode != 0, started
    assert scenario.wait_outcomes("e2e-timeout", 1) == ["timeout"]
    (run,) = scenario.runs("e2e-timeout.service")
    explain = format_journal(run.entries)
    assert lines(run, "begin") == ["begin"] and lines(run, "end") == [], explain
    assert scenario.unit_result(run) == "timeout", explain
    assert scenario.manual_run("e2e-timeout", ["/bin/true"]).returncode == 0, "lock still held after the timeout"


# 8 ------------------------------------------------------------------------------------------

HOSTILE = [
    "two words",
    "  padded  ",
    "",
    'double"quote',
    "single'quote",
    "back\\slash",
    "trailing\\",
    "\\n not a newline",
    "tab\there",
    "100%",
    "%n%h%%",
    "$HOME",
    "${HOME}",
    "$$",
    "`id`",
    "$(id)",
    ";|&<>*?~#",
    "ünïcødé ✓ 日本",
    "-dash",
    "--flag=x",
    "@at",
    "+plus",
    "!bang",
    ":colon",
    "|pipe",
]


def test_hostile_arguments_reach_the_process_exactly(scenario):
    command = ["/bin/sh", "-c", 'printf "%s\\0" "$@" > /run/e2e-argv.bin', "sh", *HOSTILE]
    scenario.deploy(
        manifest(f"""
        e2e-argv:
          command: {json.dumps(command, ensure_ascii=False)}
          schedule: yearly
        """)
    )
    scenario.container.systemctl("start", "e2e-argv.service", check=False)
    assert scenario.wait_outcomes("e2e-argv", 1) == ["success"]
    got = scenario.container.read_file("/run/e2e-argv.bin").split(b"\0")[:-1]
    assert [g.decode() for g in got] == HOSTILE
