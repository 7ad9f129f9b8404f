"""`jobgen plan`: facts and risks per job, one manifest per behaviour with its expectation beside it.

The elapses themselves come from compiler/timespec.py, held to real `systemd-analyze calendar`
by tests/test_calendar_parity.py; here the DST facts are also stated as dates a reader can check.
"""

from __future__ import annotations

import json
import textwrap
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import jsonschema
import pytest

from jobgen.compiler import load, plan as compiler_plan, validate
from jobgen.contract.policies import DEFAULT_SCOPE, OVERLAP, SCOPES
from jobgen.contract.locks import advisory_key
from jobgen.tools import plan as tool
from support.cli import jobgen

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 3, 1, tzinfo=timezone.utc)


def _report(tmp_path: Path, jobs: str, start: datetime = START, target: str = "252", **kw) -> tool.Report:
    path = tmp_path / "app.yaml"
    path.write_text(f"jobgen: 1\ntarget: {{systemd: '{target}'}}\njobs:\n" + textwrap.indent(textwrap.dedent(jobs), "  "))
    manifest, _ = validate.validate(load.load_file(str(path)), str(path))
    return tool.report(manifest, compiler_plan.plan(manifest), start, **kw)


def _job(report: tool.Report, name: str) -> tool.JobReport:
    return next(j for j in report.jobs if j.name == name)


def _codes(report: tool.Report, name: str) -> list[str]:
    return [r.code for r in _job(report, name).risks]


def _risk(report: tool.Report, name: str, code: str) -> tool.Risk:
    return next(r for r in _job(report, name).risks if r.code == code)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


# ----------------------------------------------------------------------------- facts


def test_next_elapses_in_the_manifest_zone_across_the_spring_change(tmp_path):
    r = _report(tmp_path, """
        nightly:
          command: [/bin/true]
          schedule: "*-*-* 01:30"
          timezone: Europe/Berlin
          timeout: 10min
    """, start=utc(2026, 3, 27), n=4)
    j = _job(r, "nightly")
    # 01:30 CET is 00:30 UTC; from 2026-03-29 (CEST) 01:30 is 23:30 UTC the day before.
    assert j.next == (utc(2026, 3, 27, 0, 30), utc(2026, 3, 28, 0, 30), utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 23, 30))
    assert j.time_zone == "Europe/Berlin" and j.zone_from_manifest


def test_a_schedule_without_zone_is_computed_in_the_local_zone_given(tmp_path):
    jobs = """
        nightly:
          command: [/bin/true]
          schedule: "*-*-* 01:30"
          timeout: 10min
    """
    assert _job(_report(tmp_path, jobs, n=1), "nightly").next == (utc(2026, 3, 1, 1, 30),)
    berlin = _report(tmp_path, jobs, n=1, local_zone="Europe/Berlin")
    assert _job(berlin, "nightly").next == (utc(2026, 3, 1, 0, 30),)
    assert "host-local-time" in _codes(berlin, "nightly")


def test_effective_accuracy_and_randomized_delay(tmp_path):
    r = _report(tmp_path, """
        emulated:
          command: [/bin/true]
          schedule: hourly
          timeout: 1min
        spread:
          command: [/bin/true]
          schedule: hourly
          overlap: wait
          wait_timeout: 1min
          timeout: 1min
          randomized_delay: 5min
          fixed_random_delay: true
    """)
    emulated, spread = _job(r, "emulated"), _job(r, "spread")
    # The overrun emulation below 257 sets AccuracySec=1s; otherwise systemd's default 1min.
    assert (emulated.accuracy_usec, emulated.accuracy_default, emulated.deferral) == (1_000_000, False, "emulated")
    assert (spread.accuracy_usec, spread.accuracy_default, spread.deferral) == (60_000_000, True, "none")
    assert spread.as_json()["start"]["latest_after_elapse_usec"] == 6 * 60_000_000
    assert spread.fixed_random_delay


def test_deferral_is_native_on_257(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: hourly, timeout: 1min}\n", target="257")
    assert _job(r, "j").deferral == "DeferReactivation"
    assert _job(r, "j").accuracy_default


def test_runners_and_what_guards_each(tmp_path):
    r = _report(tmp_path, """
        host-job: {command: [/bin/true], schedule: hourly, timeout: 1min}
        unit-job: {command: [/bin/true], schedule: hourly, timeout: 1min, lock: unit}
        free-job: {command: [/bin/true], schedule: hourly, timeout: 1min, overlap: allow}
        cluster-job:
          command: [/bin/true]
          schedule: hourly
          timeout: 1min
          lock: {scope: cluster, name: "shop:billing", backend: "postgresql://db.internal/locks"}
    """)

    def guarded(name):
        return {x.path: x.guarded for x in _job(r, name).runners}

    assert guarded("host-job") == {"timer": True, "systemctl": True, "jobgen-run": True, "other-hosts": False}
    # systemd's unit serialization does not see `jobgen run`.
    assert guarded("unit-job") == {"timer": True, "systemctl": True, "jobgen-run": False, "other-hosts": False}
    assert guarded("free-job") == {"timer": False, "systemctl": False, "jobgen-run": False, "other-hosts": False}
    assert guarded("cluster-job") == {"timer": True, "systemctl": True, "jobgen-run": True, "other-hosts": True}
    assert _job(r, "host-job").lock == {"scope": "host", "name": "host-job", "identity": "flock /run/jobgen/host-job.lock"}
    # The identity is the holder's own derivation: other tools can take the same lock.
    assert _job(r, "cluster-job").lock["identity"] == f"pg_advisory_lock({advisory_key('shop:billing')})"
    assert "jobgen run" in _job(r, "cluster-job").runners[2].how


# ----------------------------------------------------------------------------- risks, one each


@pytest.mark.parametrize(("overlap", "extra", "consequence"), [
    ("skip", "", "following elapses be skipped every time"),
    ("wait", "wait_timeout: 2min\n", "pile up"),
    ("allow", "", "runs overlap"),
])  # fmt: skip
def test_timeout_longer_than_the_interval(tmp_path, overlap, extra, consequence):
    r = _report(tmp_path, f"""
        refresh:
          command: [/bin/true]
          schedule: "*:0/5"
          overlap: {overlap}
          timeout: 10min
    """ + textwrap.indent(extra, "      "))
    risk = _risk(r, "refresh", "timeout-exceeds-interval")
    assert risk.severity == "warning"
    assert "elapses can be 5min apart" in risk.message and consequence in risk.message


def test_the_shortest_interval_counts_not_the_usual_one(tmp_path):
    # 09:00 and 09:20 each day: 20min apart once a day, 23h40min otherwise.
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: '*-*-* 09:00,20', timeout: 30min}\n")
    assert "elapses can be 20min apart" in _risk(r, "j", "timeout-exceeds-interval").message


def test_timeout_within_the_interval_is_fine(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: '*:0/5', timeout: 4min}\n")
    assert "timeout-exceeds-interval" not in _codes(r, "j")


def test_every_with_skip_counts_from_the_end_of_the_run(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: {every: 5min}, timeout: 10min}\n")
    assert "timeout-exceeds-interval" not in _codes(r, "j")
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: {every: 5min}, timeout: 10min, overlap: allow}\n")
    assert "timeout-exceeds-interval" in _codes(r, "j")


def test_no_timeout(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: hourly}\n")
    assert _risk(r, "j", "no-timeout").message == "no 'timeout': a run that hangs is never stopped; every later run is skipped until it ends"


def test_a_date_in_the_past_never_elapses(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: '2025-06-01 12:00', timeout: 1min}\n")
    assert _job(r, "j").next == ()
    assert _risk(r, "j", "never-elapses").message == (
        "OnCalendar=2025-06-01 12:00:00 has no elapse after 2026-03-01T00:00:00Z: the timer will never start the job")
    # Before that date it is a plain one-off.
    earlier = _report(tmp_path, "j: {command: [/bin/true], schedule: '2025-06-01 12:00', timeout: 1min}\n", start=utc(2025, 1, 1))
    assert _job(earlier, "j").next == (utc(2025, 6, 1, 12),)
    assert "never-elapses" not in _codes(earlier, "j")


def test_a_local_time_dst_skips(tmp_path):
    r = _report(tmp_path, """
        j:
          command: [/bin/true]
          schedule: "*-*-* 02:30"
          timezone: Europe/Berlin
          timeout: 1min
    """, n=40)
    assert _risk(r, "j", "dst-skipped").message == (
        "on 2026-03-29 the clocks in Europe/Berlin jump over 02:00-03:00: the elapse at 02:30:00 does not exist "
        "and systemd skips it (no run that day at that time)")
    # The fact behind it: no elapse on 2026-03-29 at all.
    days = [t.astimezone(tool._zone("Europe/Berlin")).date().isoformat() for t in _job(r, "j").next]
    assert "2026-03-28" in days and "2026-03-30" in days and "2026-03-29" not in days


def test_a_local_time_dst_repeats(tmp_path):
    r = _report(tmp_path, """
        j:
          command: [/bin/true]
          schedule: "*-*-* 02:30"
          timezone: Europe/Berlin
          timeout: 1min
    """, start=utc(2026, 10, 24, 12), n=2)
    assert _risk(r, "j", "dst-repeated").message == (
        "on 2026-10-25 the clocks in Europe/Berlin go through 02:00-03:00 twice: 02:30:00 happens twice "
        "and systemd runs only at the first")
    # The first 02:30 is CEST (00:30 UTC); the next run is the next day's.
    assert _job(r, "j").next == (utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30))


def test_times_away_from_the_change_have_no_dst_risk(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: '*-*-* 04:00', timezone: Europe/Berlin, timeout: 1min}\n")
    assert not {"dst-skipped", "dst-repeated"} & set(_codes(r, "j"))


def test_dst_risk_for_a_zoneless_schedule_in_the_local_zone_given(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: '*-*-* 02:15', timeout: 1min}\n",
                local_zone="America/New_York")
    assert "on 2026-03-08 the clocks in America/New_York jump over 02:00-03:00" in _risk(r, "j", "dst-skipped").message
    # New York repeats 01:00-02:00 in the autumn, so 02:15 happens once.
    assert "dst-repeated" not in _codes(r, "j")
    assert "dst-skipped" not in _codes(_report(tmp_path, "j: {command: [/bin/true], schedule: '*-*-* 02:15', timeout: 1min}\n"), "j")


def test_persistent_catch_up(tmp_path):
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: daily, timeout: 1min, persistent: true}\n")
    risk = _risk(r, "j", "persistent-catch-up")
    assert risk.severity == "info" and "one run starts as soon as the timer is back" in risk.message
    assert "persistent-catch-up" not in _codes(_report(tmp_path, "j: {command: [/bin/true], schedule: daily, timeout: 1min}\n"), "j")


@pytest.mark.parametrize(("keys", "target", "weakened"), [
    ("randomized_delay: 30s", "252", "randomized_delay 30s"),
    ("accuracy: 1min", "252", "accuracy 1min"),
    ("accuracy: 1s", "252", None),  # the emulation's own setting
    ("", "252", None),
    ("randomized_delay: 30s", "257", None),  # DeferReactivation=yes: no emulation to weaken
])  # fmt: skip
def test_accuracy_or_delay_weakens_the_overrun_emulation(tmp_path, keys, target, weakened):
    r = _report(tmp_path, f"""
        j:
          command: [/bin/true]
          schedule: hourly
          timeout: 1min
          {keys}
    """, target=target)
    if weakened is None:
        assert "overrun-emulation-weakened" not in _codes(r, "j")
    else:
        message = _risk(r, "j", "overrun-emulation-weakened").message
        assert f"within 2s after a run ended; {weakened} let the catch-up come" in message


def test_many_jobs_in_the_same_second(tmp_path):
    r = _report(tmp_path, """
        a: {command: [/bin/true], schedule: daily, timeout: 1min}
        b: {command: [/bin/true], schedule: "*-*-* 00:00:00", timeout: 1min}
        c: {command: [/bin/true], schedule: "*-*-* 0/6:00", timeout: 1min}
        d: {command: [/bin/true], schedule: daily, timeout: 1min, randomized_delay: 10min}
        e: {command: [/bin/true], schedule: "*-*-* 03:00", timeout: 1min}
    """)
    assert _risk(r, "a", "same-second").message.startswith("starts in the same second as b, c (3 jobs)")
    assert "same-second" in _codes(r, "c")
    # spread by its randomized delay / at another time
    assert "same-second" not in _codes(r, "d") and "same-second" not in _codes(r, "e")


def test_two_jobs_together_are_not_a_herd(tmp_path):
    r = _report(tmp_path, """
        a: {command: [/bin/true], schedule: daily, timeout: 1min}
        b: {command: [/bin/true], schedule: daily, timeout: 1min}
    """)
    assert "same-second" not in _codes(r, "a")


def test_elapses_that_depend_on_the_systemd_release(tmp_path):
    # A repetition of days that runs past December: 252 skips January 1st, newer releases do not.
    r = _report(tmp_path, "j: {command: [/bin/true], schedule: '*-*-1/7 12:00', timeout: 1min}\n", start=utc(2026, 12, 20))
    assert _risk(r, "j", "release-dependent").message.startswith(
        "systemd with the new-year fix (PR #40266: 259+, Debian 257.13) also runs at 2027-01-01T12:00:00Z,")
    assert _job(r, "j").next[:2] == (utc(2026, 12, 22, 12), utc(2026, 12, 29, 12))
    assert utc(2027, 1, 1, 12) not in _job(r, "j").next
    assert "release-dependent" not in _codes(_report(tmp_path, "j: {command: [/bin/true], schedule: daily, timeout: 1min}\n"), "j")


def test_every_risk_code_has_a_test_here():
    source = Path(__file__).read_text()
    assert [code for code in tool.RISKS if f'"{code}"' not in source] == []


# ----------------------------------------------------------------------------- the CLI


_jobgen = partial(jobgen, cwd=ROOT)


@pytest.mark.parametrize("manifest", sorted(str(p.relative_to(ROOT)) for p in [*ROOT.glob("examples/*.yaml"), *ROOT.glob("tests/cases/*.yaml")]))
def test_json_output_has_the_documented_shape(manifest):
    result = _jobgen("plan", manifest, "--from", "2026-03-01T00:00:00Z", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, tool.JSON_SCHEMA, format_checker=jsonschema.FormatChecker())
    assert doc["format"] == tool.FORMAT_VERSION and doc["from"] == "2026-03-01T00:00:00Z"


def test_readme_documents_every_json_field():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### `jobgen plan --format json`"):]
    section = section[: section.index("\n## ")]

    def fields(schema):
        for name, sub in schema.get("properties", {}).items():
            yield name
            yield from fields(sub)
            yield from fields(sub.get("items", {}))
            for alt in sub.get("oneOf", ()):
                yield from fields(alt)

    assert sorted({f for f in fields(tool.JSON_SCHEMA) if f"`{f}`" not in section and f"`{f}[]`" not in section}) == []


def test_text_output_at_a_glance():
    result = _jobgen("plan", "examples/shop.yaml", "--from", "2026-03-28T00:00:00Z", "--job", "invoice-export", "--next", "3")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:6] == [
        "examples/shop.yaml: 1 job, target systemd >=252 (252 ... newest), from Sat 2026-03-28 00:00:00 UTC",
        "",
        "invoice-export",
        "  schedule  OnCalendar=*-*-* 01:30:00 Europe/Berlin",
        "  next      Sat 2026-03-28 01:30:00 CET (00:30:00 UTC)",
        "            Sun 2026-03-29 01:30:00 CET (00:30:00 UTC)",
    ]
    assert "  info      persistent-catch-up: Persistent=yes" in result.stdout
    assert "catalog-refresh" not in result.stdout


OUTSIDE = "outside the times systemd's calendar covers (1970-01-01 to 2199-12-31 UTC)"


@pytest.mark.parametrize(("args", "message"), [
    (["--job", "nope"], "jobgen: error: examples/shop.yaml: no job 'nope'; jobs: catalog-refresh, invoice-export, sales-report"),
    (["--from", "yesterday"], "jobgen: error: --from yesterday: expected an ISO 8601 time such as 2026-03-29T00:00:00Z"),
    (["--local-zone", "Mars/Base"], "jobgen: error: --local-zone Mars/Base: not a time zone (e.g. Europe/Berlin, UTC)"),
    # outside systemd's calendar; the first two were years Python's datetime cannot hold (a crash)
    (["--from", "0001-01-01T00:00:00+14:00"], f"jobgen: error: --from 0001-01-01T00:00:00+14:00: {OUTSIDE}"),
    (["--from", "9999-12-31T23:59:59-05:00"], f"jobgen: error: --from 9999-12-31T23:59:59-05:00: {OUTSIDE}"),
    (["--from", "1969-12-31T23:59:59Z"], f"jobgen: error: --from 1969-12-31T23:59:59Z: {OUTSIDE}"),
    (["--from", "2200-01-01T00:00:00Z"], f"jobgen: error: --from 2200-01-01T00:00:00Z: {OUTSIDE}"),
])  # fmt: skip
def test_bad_options(args, message):
    result = _jobgen("plan", "examples/shop.yaml", *args)
    assert (result.returncode, result.stderr.strip(), result.stdout) == (2, message, "")


@pytest.mark.parametrize(("start", "zone"), [("1970-01-01T00:00:00Z", "Pacific/Pago_Pago"), ("2199-12-31T23:59:59Z", "Pacific/Kiritimati")])
def test_the_first_and_last_second_systemd_covers_in_the_farthest_zones(start, zone):
    result = _jobgen("plan", "examples/shop.yaml", "--from", start, "--local-zone", zone)
    assert (result.returncode, result.stderr) == (0, "")


def test_an_invalid_manifest_is_reported_like_check():
    case = "tests/errors/calendar-hour-25.yaml"
    assert _jobgen("plan", case).stderr == _jobgen("check", case).stderr
    assert _jobgen("plan", case).returncode == 2


# ----------------------------------------------------------------------------- every policy x every scope

_SCOPE_LOCK = {  # a lock of each scope, as a manifest names it
    "unit": "unit",
    "host": "{scope: host, name: shop-export}",
    "cluster": "{scope: cluster, name: 'shop:export', backend: 'postgresql://db.internal/locks'}",
}


@pytest.mark.parametrize("scope", [*sorted(SCOPES), None])  # None: no `lock:` key
@pytest.mark.parametrize("policy", sorted(OVERLAP))
def test_plan_answers_for_every_policy_and_scope(tmp_path, policy, scope):
    """What plan says per policy and scope is a column of contract/policies.py: a policy or
    scope added without its answers fails here (or at import), never with a traceback."""
    assert set(_SCOPE_LOCK) == set(SCOPES), "a new scope needs a lock here"
    wait = "wait_timeout: 2min\n" if OVERLAP[policy].waits else ""
    lock = f"lock: {_SCOPE_LOCK[scope]}" if scope else ""
    body = f"""\
        jobgen: 1
        target: {{systemd: '252'}}
        jobs:
          slow:
            command: [/bin/true]
            schedule: "*:0/5"
            overlap: {policy}
            {lock}
            timeout: 20min
            {wait}
          hung:
            command: [/bin/true]
            schedule: {{every: 5min}}
            overlap: {policy}
            {lock}
            {wait}
    """
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(body))
    check = _jobgen("check", str(path))
    text = _jobgen("plan", str(path), "--from", "2026-03-01T00:00:00Z")
    as_json = _jobgen("plan", str(path), "--from", "2026-03-01T00:00:00Z", "--format", "json")
    if check.returncode != 0:  # a combination the validator refuses (allow takes no lock, unit cannot wait...)
        assert (text.returncode, text.stderr, text.stdout) == (2, check.stderr, "")
        check_json = _jobgen("check", str(path), "--format", "json")
        assert (as_json.returncode, as_json.stdout) == (2, check_json.stdout)
        return
    assert (text.returncode, text.stderr) == (0, ""), text.stderr
    assert (as_json.returncode, as_json.stderr) == (0, ""), as_json.stderr
    doc = json.loads(as_json.stdout)
    jsonschema.validate(doc, tool.JSON_SCHEMA, format_checker=jsonschema.FormatChecker())
    slow = next(j for j in doc["jobs"] if j["name"] == "slow")
    assert slow["overlap"] == policy
    overrun = next(r["message"] for r in slow["risks"] if r["code"] == "timeout-exceeds-interval")
    assert OVERLAP[policy].overrun_consequence and overrun.endswith(OVERLAP[policy].overrun_consequence)
    assert f"  warning   timeout-exceeds-interval: {overrun}" in text.stdout.splitlines()
    guards = {r["path"]: r["guarded"] for r in slow["runners"]}
    if not OVERLAP[policy].locks:
        assert slow["lock"] is None and not any(guards.values())
        assert f"  lock      none (overlap: {policy})" in text.stdout.splitlines()
        return
    kind = SCOPES[scope or DEFAULT_SCOPE]
    assert slow["lock"]["scope"] == kind.name
    assert guards == {"timer": True, "systemctl": True, "jobgen-run": kind.covers_manual_run, "other-hosts": kind.covers_other_hosts}


def test_a_queue_job_whose_timeout_outlasts_its_interval(tmp_path):
    # examples/queue.yaml with a 20min timeout on its 15min schedule: requests pile up.
    path = tmp_path / "queue.yaml"
    path.write_text((ROOT / "examples/queue.yaml").read_text().replace("timeout: 10min", "timeout: 20min"))
    result = _jobgen("plan", str(path), "--from", "2026-03-01T00:00:00Z", "--format", "json")
    assert result.returncode == 0, result.stderr
    (job,) = json.loads(result.stdout)["jobs"]
    assert [r for r in job["risks"] if r["code"] == "timeout-exceeds-interval"] == [{
        "code": "timeout-exceeds-interval", "severity": "warning",
        "message": "a run may take 20min (timeout) but elapses can be 15min apart: requests arrive faster than the "
                   "drainer runs them: the queue grows to max_pending, then triggers are handled by on_full (reject or coalesce)",
    }]


# ----------------------------------------------------------------------------- what systemd cannot compute

LOOPING = """\
jobgen: 1
target: {systemd: '252'}
jobs:
  quarterly:
    command: [/bin/true]
    schedule: "*-01/5-01 00:00:00"
    timeout: 1min
  seventh-hour:
    command: [/bin/true]
    schedule: "*-*-* 00/7:00:00"
    timezone: Europe/Berlin
    timeout: 1min
"""


def test_plan_says_in_one_line_where_systemd_cannot_compute_the_next_elapse(tmp_path):
    # systemd-analyze calendar of 252 and 257 fails on both at these very starts
    # (tests/test_timespec.py holds the starts to the real releases).
    path = tmp_path / "loops.yaml"
    path.write_text(LOOPING)
    for fmt in ("text", "json"):
        result = _jobgen("plan", str(path), "--local-zone", "Europe/Berlin", "--from", "2026-01-01T00:00:00Z", "--format", fmt)
        assert result.returncode == 2
        if fmt == "text":
            assert result.stdout == ""
        else:  # the same problem, as the one JSON document --format json answers every outcome with
            doc = json.loads(result.stdout)
            assert (doc["ok"], doc["exit_code"], [(d["line"], d["col"], d["severity"]) for d in doc["diagnostics"]]) == (False, 2, [(6, 5, "error")])
            assert doc["error"] == doc["diagnostics"][0]["message"] and doc["error"].startswith("job 'quarterly': systemd 252 and 257 cannot")
        assert result.stderr == (
            f"{path}:6:5: error: job 'quarterly': systemd 252 and 257 cannot compute the next elapse of "
            "OnCalendar=*-01/5-01 00:00:00 in Europe/Berlin (--local-zone) after 2026-10-31 23:00:00 UTC "
            "(\"Infinite loop in calendar calculation\"); its timer stops there\n"
        )
    # In UTC the first is computable; the second carries its own zone.
    result = _jobgen("plan", str(path), "--job", "seventh-hour", "--from", "2026-03-01T00:00:00Z")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"{path}:10:5: error: job 'seventh-hour': systemd 252 and 257 cannot compute the next elapse of "
        "OnCalendar=*-*-* 00/7:00:00 Europe/Berlin after 2026-03-28 20:00:00 UTC "
        "(\"Infinite loop in calendar calculation\"); its timer stops there\n"
    )


def test_check_warns_where_systemd_cannot_compute_the_next_elapse_in_the_zone_named(tmp_path):
    path = tmp_path / "loops.yaml"
    path.write_text(LOOPING)
    result = _jobgen("check", str(path))
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if ": warning: " in line]
    # Only the expression with a zone: without one it runs in each host's local time.
    assert warnings == [
        f"{path}:10:15: warning: job 'seventh-hour': 'schedule': systemd 252 and 257 cannot compute the next elapse of "
        "'*-*-* 00/7:00:00' in Europe/Berlin after 2026-03-28 20:00:00 UTC (\"Infinite loop in calendar calculation\"): "
        "the timer stops there and the job runs no more until the timer is started again"
    ]


def test_user_root_and_no_user_are_one_identity_for_a_shared_lock_and_a_queue_spool():
    """An imported root job names `user: root` (import-crontab); a hand-written one leaves
    user: out. Sharing a host lock, they were refused as two owners of one file, and a
    queue spool of `user: root` got the group '-' where no user: gets root's."""
    text = textwrap.dedent("""\
        jobgen: 1
        target: {systemd: "252"}
        jobs:
          imported:
            command: [/bin/true]
            schedule: daily
            user: root
            lock: {name: shared}
          written:
            command: [/bin/true]
            schedule: hourly
            lock: {name: shared}
          drained:
            command: [/bin/true]
            schedule: hourly
            user: root
            overlap: queue
        """)
    manifest, _ = validate.validate(load.load_text(text, "m.yaml"), "m.yaml")
    the_plan = compiler_plan.plan(manifest)
    (snippet,) = [f for f in the_plan.files if f.kind == "tmpfiles"]
    assert "d /var/lib/jobgen/queue/drained 0700 root root -" in snippet.lines
    assert "f /run/jobgen/shared.lock 0600 root root -" in snippet.lines
