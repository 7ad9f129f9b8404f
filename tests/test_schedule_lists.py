"""`schedule:` as a list of calendar expressions: one OnCalendar= line each, the union of
their elapses in `jobgen plan`.

The bad lists (empty, a repeated time, a mapping among them, zones that differ) are cases in
tests/errors/schedule-list-*.yaml; the rendered units are the golden case
tests/cases/schedule-lists.yaml, judged by real systemd-analyze in tests/test_verify.py.
"""

from __future__ import annotations

import textwrap
from datetime import datetime, timezone
from pathlib import Path

import jsonschema
import pytest
import yaml

from jobgen.compiler import load, pipeline, plan as compiler_plan, validate
from jobgen.compiler.diagnostics import ManifestError
from jobgen.compiler.target import parse_target
from jobgen.tools import plan as tool
from jobgen.tools import schema
from support.cli import jobgen

START = datetime(2027, 1, 1, tzinfo=timezone.utc)  # a Friday, the 1st


def _manifest(tmp_path: Path, job: str):
    path = tmp_path / "app.yaml"
    path.write_text("jobgen: 1\ntarget: {systemd: '252'}\njobs:\n  j:\n" + textwrap.indent(textwrap.dedent(job), "    "))
    return validate.validate(load.load_file(str(path)), str(path))[0], path


def test_each_item_is_one_oncalendar_line_in_the_order_written(tmp_path):
    _, path = _manifest(tmp_path, """\
        command: [/bin/true]
        schedule: ["Sat,Sun 06:00", "Mon..Fri 02:30"]
        timezone: Europe/Berlin
    """)
    timer = pipeline.build(str(path), parse_target("252")).files["j.timer"].decode()
    assert [line for line in timer.splitlines() if line.startswith("OnCalendar=")] == [
        "OnCalendar=Sat,Sun *-*-* 06:00:00 Europe/Berlin",
        "OnCalendar=Mon..Fri *-*-* 02:30:00 Europe/Berlin",
    ]


def test_plan_merges_the_elapses_of_every_item(tmp_path):
    manifest, _ = _manifest(tmp_path, """\
        command: [/bin/true]
        schedule: ["*-*-01,15 00:00:00", "Fri *-*-* 00:00:00"]
        timezone: UTC
    """)
    report = tool.report(manifest, compiler_plan.plan(manifest), START, n=6)
    job = report.jobs[0]
    # cron's '0 0 1,15 * 5' after Friday 2027-01-01 00:00: Fridays 8, 15 (also the 15th:
    # one elapse, not two), 22, 29, then February 1st and Friday the 5th.
    assert [t.strftime("%m-%d") for t in job.next] == ["01-08", "01-15", "01-22", "01-29", "02-01", "02-05"]
    assert job.on_calendars == ("*-*-01,15 00:00:00 UTC", "Fri *-*-* 00:00:00 UTC")
    text = tool.as_text(report)
    assert "  schedule  OnCalendar=*-*-01,15 00:00:00 UTC; OnCalendar=Fri *-*-* 00:00:00 UTC" in text
    data = report.as_json()
    jsonschema.validate(data, tool.JSON_SCHEMA)
    assert data["jobs"][0]["schedule"]["on_calendars"] == list(job.on_calendars)
    assert data["jobs"][0]["schedule"]["on_calendar"] == job.on_calendars[0]


def test_plan_of_a_single_expression_is_unchanged(tmp_path):
    manifest, _ = _manifest(tmp_path, "command: [/bin/true]\nschedule: 'Fri 00:00'\ntimezone: UTC\n")
    job = tool.report(manifest, compiler_plan.plan(manifest), START, n=2).jobs[0]
    assert job.on_calendars == ("Fri *-*-* 00:00:00 UTC",)
    assert [t.day for t in job.next] == [8, 15]


def test_items_written_differently_are_compared_normalized(tmp_path):
    manifest, _ = _manifest(tmp_path, "command: [/bin/true]\nschedule: [weekly, 'Mon *-*-* 12:00']\n")
    assert manifest.jobs[0].schedule.calendars == ("Mon *-*-* 00:00:00", "Mon *-*-* 12:00:00")


JOB_SCHEMA = schema.schema()["properties"]["jobs"]["additionalProperties"]["properties"]["schedule"]


@pytest.mark.parametrize(("value", "valid"), [
    (["daily", "Fri 04:00"], True),
    ([], False),                     # at least one
    (["daily", "daily"], False),     # no duplicates
    (["daily", {"every": "6h"}], False),  # calendar expressions only
])  # fmt: skip
def test_the_json_schema_takes_a_list_as_check_does(tmp_path, value, valid):
    errors = list(jsonschema.Draft202012Validator(JOB_SCHEMA).iter_errors(value))
    assert (errors == []) is valid
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"jobgen": 1, "jobs": {"j": {"command": ["/bin/true"], "schedule": value}}}))
    try:
        validate.validate(load.load_file(str(path)), str(path))
        accepted = True
    except ManifestError:  # the exact messages are tests/errors/schedule-list-*.yaml
        accepted = False
    assert accepted is valid


def test_an_item_that_never_elapses_is_an_error_at_its_own_place(tmp_path):
    # Each item is its own OnCalendar= line: the second one here could never fire, and is
    # refused as a single expression would be, at the item's place; nothing is written.
    path = tmp_path / "app.yaml"
    path.write_text("jobgen: 1\ntarget: {systemd: '252'}\njobs:\n  j:\n    command: [/bin/true]\n"
                    "    schedule: [\"Mon 02:00\", \"*-02-30 00:00\"]\n")
    out = tmp_path / "out"
    r = jobgen("render", str(path), "-o", str(out))
    assert (r.code, r.stdout) == (2, "")
    assert r.stderr == (f"{path}:6:29: error: job 'j': 'schedule' item 2: calendar expression '*-02-30 00:00' never "
                        "elapses: no date from 1970 to 2199 matches it (systemd would accept it and never run the job)\n"
                        "jobgen: 1 error; nothing written\n")
    assert not out.exists()
