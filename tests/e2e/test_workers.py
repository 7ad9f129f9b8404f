"""Long-running workers rendered by jobgen, run by real systemd 252 and 257.

The test worker is a few lines of sh standing in for a queue worker: it prints "working", and
its SIGTERM trap plays "finish the current job, then exit". What is checked is what systemd
does with jobgen's unit: the stop signal and its deadline, SIGKILL after it, restarts with
their delay and the start limit, and restarting every instance through the target.
"""

import textwrap
import time

import pytest

from container import format_journal

pytestmark = pytest.mark.e2e


def manifest(workers: str) -> str:
    """A v1 manifest holding `workers` (YAML, any indentation); they run as root."""
    return 'jobgen: 1\ntarget: {systemd: ">=252"}\nworkers:\n' + textwrap.indent(textwrap.dedent(workers).strip(), "  ") + "\n"


def messages(scenario, unit) -> list[str]:
    return [e.get("MESSAGE", "") for e in scenario.container.unit_journal(unit)]


def wait_message(scenario, unit, text, count=1, timeout=15):
    return scenario.wait_for(
        lambda: [m for m in messages(scenario, unit) if m == text],
        lambda found: len(found) >= count,
        timeout,
        f"{count}x {text!r} from {unit}",
    )


def stamp(entry) -> float:
    return int(entry["__REALTIME_TIMESTAMP"]) / 1e6


def test_stop_lets_the_worker_finish_its_job_within_stop_timeout(scenario):
    scenario.deploy(
        manifest("""
        e2e-graceful:
          command: [/bin/sh, -c, "trap 'echo finishing current job; sleep 1; echo job done; exit 0' TERM; echo working; while :; do sleep 0.1; done"]
          stop_timeout: 10s
        """)
    )
    unit = "e2e-graceful.service"
    scenario.container.systemctl("start", unit)
    wait_message(scenario, unit, "working")

    t0 = time.monotonic()
    scenario.container.systemctl("stop", unit)
    took = time.monotonic() - t0

    msgs = messages(scenario, unit)
    explain = scenario.journal_text(unit)
    assert "finishing current job" in msgs and "job done" in msgs, explain
    assert not any("SIGKILL" in m or "timed out" in m for m in msgs), explain
    assert not any("Failed with result" in m for m in msgs), explain
    assert took < 10, f"stop took {took:.1f}s, beyond stop_timeout\n{explain}"


def test_a_worker_ignoring_sigterm_is_killed_at_the_deadline(scenario):
    scenario.deploy(
        manifest("""
        e2e-stubborn:
          command: [/bin/sh, -c, "trap 'echo ignoring SIGTERM' TERM; echo working; while :; do sleep 0.1; done"]
          stop_timeout: 2s
        """)
    )
    unit = "e2e-stubborn.service"
    scenario.container.systemctl("start", unit)
    wait_message(scenario, unit, "working")

    t0 = time.monotonic()
    scenario.container.systemctl("stop", unit, check=False)
    took = time.monotonic() - t0

    entries = scenario.container.unit_journal(unit)
    msgs = [e.get("MESSAGE", "") for e in entries]
    explain = format_journal(entries)
    assert "ignoring SIGTERM" in msgs, explain  # SIGTERM came first ...
    assert any("State 'stop-sigterm' timed out. Killing." in m for m in msgs), explain  # ... then the deadline
    assert any("with signal SIGKILL" in m for m in msgs), explain
    assert any("Failed with result 'timeout'" in m for m in msgs), explain
    ignored = next(stamp(e) for e in entries if e.get("MESSAGE") == "ignoring SIGTERM")
    killed = next(stamp(e) for e in entries if "with signal SIGKILL" in e.get("MESSAGE", ""))
    assert killed - ignored >= 1.9, f"SIGKILL {killed - ignored:.2f}s after SIGTERM, before the 2s deadline\n{explain}"
    print(f"systemd {scenario.release}: stop of a SIGTERM-ignoring worker took {took:.2f}s (stop_timeout 2s)")


def test_a_crashing_worker_restarts_after_its_delay_until_the_start_limit(scenario):
    scenario.deploy(
        manifest("""
        e2e-crash:
          command: [/bin/sh, -c, "echo crashing; exit 3"]
          stop_timeout: 2s
          restart_delay: 1s
          start_limit_burst: 3
          start_limit_interval: 60s
        """)
    )
    unit = "e2e-crash.service"
    scenario.container.systemctl("start", unit, check=False)
    scenario.wait_for(
        lambda: messages(scenario, unit),
        lambda msgs: any("Start request repeated too quickly" in m or "start-limit-hit" in m for m in msgs),
        30,
        "the start limit to stop the restarts",
    )
    entries = scenario.container.unit_journal(unit)
    explain = format_journal(entries)
    crashes = [stamp(e) for e in entries if e.get("MESSAGE") == "crashing"]
    assert len(crashes) == 3, explain  # start_limit_burst
    gaps = [b - a for a, b in zip(crashes, crashes[1:])]
    assert all(g >= 1.0 for g in gaps), f"restart gaps {gaps}, restart_delay is 1s\n{explain}"
    assert scenario.container.systemctl("is-failed", unit, check=False).stdout.strip() == "failed", explain


def test_restarting_the_target_restarts_every_instance(scenario):
    scenario.deploy(
        manifest("""
        e2e-pool:
          command: [/bin/sh, -c, "echo working; while :; do sleep 0.2; done"]
          instances: 3
          stop_timeout: 5s
        """)
    )
    instances = [f"e2e-pool@{i}.service" for i in (1, 2, 3)]
    scenario.units += instances
    scenario.container.systemctl("start", "e2e-pool.target")
    for unit in instances:
        wait_message(scenario, unit, "working")
    before = {u: scenario.container.systemctl("show", "-P", "InvocationID", u).stdout.strip() for u in instances}

    scenario.container.systemctl("restart", "e2e-pool.target")
    for unit in instances:
        wait_message(scenario, unit, "working", count=2)
    after = {u: scenario.container.systemctl("show", "-P", "InvocationID", u).stdout.strip() for u in instances}
    states = {u: scenario.container.systemctl("is-active", u, check=False).stdout.strip() for u in instances}

    explain = scenario.journal_text(*instances)
    assert states == {u: "active" for u in instances}, explain
    assert all(before[u] and after[u] and before[u] != after[u] for u in instances), (before, after, explain)


def test_stopping_the_target_returns_only_after_every_instance_has_exited(scenario):
    # Each instance takes 1 s to finish its job after SIGTERM. `systemctl stop NAME.target &&
    # deploy` must not deploy while an old instance still runs: the stop returns only once
    # every instance is inactive and its processes are gone.
    scenario.deploy(
        manifest("""
        e2e-stoppool:
          command: [/bin/sh, -c, "trap 'echo finishing; sleep 1; echo finished; exit 0' TERM; echo working; while :; do sleep 0.1; done", e2e-stoppool-marker]
          instances: 3
          stop_timeout: 20s
        """)
    )
    instances = [f"e2e-stoppool@{i}.service" for i in (1, 2, 3)]
    scenario.units += instances
    c = scenario.container
    c.systemctl("start", "e2e-stoppool.target")
    for unit in instances:
        wait_message(scenario, unit, "working")

    t0 = time.monotonic()
    c.systemctl("stop", "e2e-stoppool.target")
    took = time.monotonic() - t0
    # Read at once, before anything else can happen: what the stop left behind.
    states = {u: c.systemctl("show", "-P", "ActiveState", u).stdout.strip() for u in instances}
    left = c.run("pgrep", "-f", "e2e-stoppool-marker", check=False).stdout.split()

    explain = scenario.journal_text(*instances, "e2e-stoppool.target")
    assert states == {u: "inactive" for u in instances}, f"stop returned with {states}\n{explain}"
    assert left == [], f"processes still running after the stop returned: {left}\n{explain}"
    for unit in instances:  # each finished its job (no SIGKILL): the stop waited for it
        wait_message(scenario, unit, "finished")
        assert not any("SIGKILL" in m for m in messages(scenario, unit)), explain
    print(f"systemd {scenario.release}: systemctl stop of a 3-instance target took {took:.2f}s (each instance 1 s to finish)")
