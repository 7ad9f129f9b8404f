"""`jobgen import-crontab` on realistic crontabs, with each translation proved over a year.

tests/crontabs/ holds Debian's /etc/crontab as shipped, a cron.d file (Debian's php
sessionclean fragment plus e2scrub and an @reboot line) and a user crontab with the cases
that matter (shell syntax, %, CRON_TZ, nicknames, the day-of-month OR weekday rule, bad lines).

The proof: CronOracle below reads cron's five fields on its own (it shares no code with
compiler/cron.py) and lists the minutes cron fires at, over a year of wall-clock time, by the
rules of crontab(5); jobgen's calendar engine must list exactly the same elapses for the
OnCalendar= expression the importer wrote. Wall-clock time is UTC here: cron and systemd read
the same local time, and their DST handling differs (README: import-crontab), which the importer
says in a note for CRON_TZ zones with DST.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from jobgen.compiler import load, validate
from jobgen.compiler.diagnostics import ManifestError
from jobgen.compiler.timespec import parse_calendar
from jobgen.tools import crontab as tool

ROOT = Path(__file__).resolve().parent.parent
CRONTABS = ROOT / "tests" / "crontabs"
# A year that holds a February 29th and every month length.
PROOF_START = datetime(2027, 12, 1, tzinfo=timezone.utc)
PROOF_END = PROOF_START + timedelta(days=366)


class CronOracle:
    """crontab(5), written out plainly: which minutes does a schedule fire at?"""

    NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                 "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
    MONTHS = "jan feb mar apr may jun jul aug sep oct nov dec".split()
    WEEKDAYS = "sun mon tue wed thu fri sat".split()

    def __init__(self, schedule: str):
        fields = self.NICKNAMES.get(schedule.lower(), schedule).split()
        minute, hour, dom, month, dow = fields
        self.minutes = self._values(minute, 0, 59)
        self.hours = self._values(hour, 0, 23)
        self.doms = self._values(dom, 1, 31)
        self.months = self._values(month, 1, 12, self.MONTHS, 1)
        self.dows = {d % 7 for d in self._values(dow, 0, 7, self.WEEKDAYS, 0)}
        # "If both fields are restricted (i.e., do not contain the "*" character), the command
        # will be run when either field matches the current time." (crontab(5))
        self.either = not dom.startswith("*") and not dow.startswith("*")

    @staticmethod
    def _values(text, low, high, names=(), first=0):
        def number(word):
            return names.index(word.lower()) + first if word.lower() in names else int(word)

        out = set()
        for part in text.split(","):
            span, _, step = part.partition("/")
            if span == "*":
                a, b = low, high
            elif "-" in span:
                a, b = map(number, span.split("-"))
            else:
                a = b = number(span)
            out.update(range(a, b + 1, int(step or 1)))
        return out

    def day_matches(self, day: datetime) -> bool:
        dom = day.day in self.doms
        dow = day.isoweekday() % 7 in self.dows
        return day.month in self.months and ((dom or dow) if self.either else (dom and dow))

    def fires(self, start: datetime, end: datetime) -> list[datetime]:
        out = []
        day = start.replace(hour=0, minute=0)
        while day <= end:
            if self.day_matches(day):
                for minute_of_day in range(24 * 60):
                    t = day + timedelta(minutes=minute_of_day)
                    if t.hour in self.hours and t.minute in self.minutes and start < t <= end:
                        out.append(t)
            day += timedelta(days=1)
        return out


def _import(name: str, **kw) -> tool.Imported:
    path = CRONTABS / name
    return tool.read(path.read_text(), path.name, system=kw.pop("system", tool.system_format(str(path))), **kw)


def _jobgen(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "jobgen", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)


ALL = [("etc/crontab", {}), ("cron.d/php", {}), ("shop", {"user": "shop"})]


def _all_jobs():
    for name, kw in ALL:
        for job in _import(name, **kw).jobs:
            yield pytest.param(job, id=f"{name}:{job.line}")


# ----------------------------------------------------------------------------- the proof


@pytest.mark.parametrize("job", [j for j in _all_jobs() if isinstance(j.values[0].schedule, str)])
def test_each_schedule_fires_exactly_when_cron_would_over_a_year(job):
    expected = CronOracle(job.cron_schedule).fires(PROOF_START, PROOF_END)
    assert expected, "a schedule that never fires proves nothing"
    got = parse_calendar(job.schedule + " UTC").next_elapses(PROOF_START, len(expected) + 1)
    assert got[: len(expected)] == expected
    assert len(got) == len(expected) or got[-1] > PROOF_END


def test_the_oracle_applies_the_day_of_month_or_weekday_rule():
    # 1st and 15th, or any Friday: January 2027 has Fridays 1, 8, 15, 22, 29.
    days = {t.day for t in CronOracle("30 4 1,15 * fri").fires(datetime(2027, 1, 1, tzinfo=timezone.utc) - timedelta(minutes=1),
                                                               datetime(2027, 1, 31, 23, 59, tzinfo=timezone.utc))}
    assert days == {1, 8, 15, 22, 29}
    # A '*' (even '*/2') in one of them makes it AND: odd days that are Mondays.
    days = {t.day for t in CronOracle("0 0 */2 * mon").fires(datetime(2027, 1, 1, tzinfo=timezone.utc) - timedelta(minutes=1),
                                                             datetime(2027, 1, 31, 23, 59, tzinfo=timezone.utc))}
    assert days == {11, 25}


# ----------------------------------------------------------------------------- what each file becomes


def test_debian_etc_crontab():
    imported = _import("etc/crontab")
    assert imported.problems == [] and imported.notes == []
    assert [(j.line, j.name, j.schedule, j.user) for j in imported.jobs] == [
        (19, "crontab-cron-hourly-l19", "*-*-* *:17:00", None),
        (20, "crontab-anacron-l20", "*-*-* 06:25:00", None),
        (21, "crontab-anacron-l21", "Sun *-*-* 06:47:00", None),
        (22, "crontab-anacron-l22", "*-*-01 06:52:00", None),
    ]
    hourly = imported.jobs[0]
    # cron runs every command with $SHELL -c: shell syntax keeps that, explicitly.
    assert hourly.command == ("/bin/sh", "-c", "cd / && run-parts --report /etc/cron.hourly")
    assert dict(hourly.environment) == {"PATH": "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin"}


def test_a_cron_d_file_with_reboot_and_mailto():
    imported = _import("cron.d/php")
    assert [(j.line, j.schedule, j.user, j.command) for j in imported.jobs] == [
        (14, "*-*-* *:09,39:00", None, ("/bin/sh", "-c", "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; "
                                        "then /usr/lib/php/sessionclean; fi")),
        (16, "Sun *-*-* 03:30:00", None, ("/sbin/e2scrub_all", "-A", "-r")),
        (17, {"after_boot": "1s"}, "www-data", ("/usr/local/bin/warm-cache", "--all")),
    ]
    assert [str(n) for n in imported.notes] == [
        "line 15: MAILTO=ops@example.com: jobgen does not mail a job's output; it goes to the journal "
        "(add on_failure: [a unit that alerts] to be told of failures)"]


def test_a_user_crontab():
    imported = _import("shop", user="shop")
    jobs = {j.line: j for j in imported.jobs}
    assert sorted(jobs) == [5, 7, 11, 14, 15, 17, 18, 19, 20, 21]
    assert {j.user for j in imported.jobs} == {"shop"}
    assert jobs[5].command == ("/bin/sh", "-c", "cd /srv/shop && /usr/bin/php artisan schedule:run >> /var/log/shop/schedule.log 2>&1")
    assert jobs[7].command == ("/usr/local/bin/export-invoices", "--yesterday")
    assert jobs[7].schedule == "Mon..Fri *-*-* 02:00:00"
    assert jobs[11].command == ("/bin/sh", "-c", "/usr/bin/date +%F > /srv/shop/storage/today")  # \% is a literal %
    assert (jobs[14].schedule, jobs[15].schedule) == ("*-*-* 00:00:00", "Sun *-*-* 00:00:00")  # @weekly is Sunday
    assert jobs[17].schedule == "Sun *-01..03,10..12-* 00/4:00:00" and jobs[17].timezone == "Europe/Berlin"
    assert jobs[7].timezone is None  # CRON_TZ applies to the lines after it
    assert dict(jobs[5].environment) == {"APP_ENV": "production"}


def test_untranslatable_lines_are_reported_with_their_number():
    imported = _import("shop", user="shop")
    assert [str(p) for p in imported.problems] == [
        "line 9: '30 4 1,15 * fri' runs when the day of the month OR the weekday matches (crontab(5)), which takes two "
        "OnCalendar= expressions: '*-*-01,15 04:30:00' and 'Fri *-*-* 04:30:00'; one job has one schedule, so make two jobs by hand",
        "line 13: an unescaped '%' ends the command in cron and sends the rest of the line to its standard input; rewrite it "
        "(e.g. with a here-document in a script) or escape it as '\\%' if it is meant literally",
        "line 22: '61 * * * *': minute: 61 is out of range 0-59",
        "line 23: '0 0 5/2 * *': day of month: '5/2' means different things to different crons; write '5-31/2'",
    ]
    assert [str(n) for n in imported.notes] == [
        "line 16: CRON_TZ=Europe/Berlin has DST: a job whose time falls in the hour the clocks skip runs right after the "
        "change in cron, not at all in systemd; in the repeated hour cron runs '*' minutes twice, systemd once "
        "(`jobgen plan` lists those days)"]


@pytest.mark.parametrize(("name", "kw"), ALL)
def test_the_manifest_is_valid_and_names_each_line(name, kw):
    imported = _import(name, **kw)
    text = tool.manifest(imported, name)
    manifest, _ = validate.validate(load.load_text(text, "imported.yaml"), "imported.yaml")
    assert [j.name for j in manifest.jobs] == sorted(j.name for j in imported.jobs)
    doc = yaml.safe_load(text)
    for job in imported.jobs:
        assert f"  # line {job.line}: {job.source}\n" in text
        assert doc["jobs"][job.name]["command"] == list(job.command)


# ----------------------------------------------------------------------------- the command


def test_cli_writes_the_manifest_and_exits_1_when_lines_were_left_out(tmp_path):
    out = tmp_path / "shop.yaml"
    result = _jobgen("import-crontab", "tests/crontabs/shop", "--user", "shop", "-o", str(out))
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == "jobgen: 10 jobs imported; 4 lines not translated"
    assert "tests/crontabs/shop:9: error: '30 4 1,15 * fri' runs when" in result.stderr
    assert "tests/crontabs/shop:2: note" not in result.stderr  # MAILTO="" asks for no mail: nothing to say
    assert result.stdout == ""
    # The real tools accept what it wrote.
    assert _jobgen("check", str(out)).returncode == 0
    plan = _jobgen("plan", str(out), "--from", "2027-01-01T00:00:00Z", "--job", "shop-export-invoices-l7", "--next", "1")
    assert "  next      Fri 2027-01-01 02:00:00 UTC" in plan.stdout
    # Never overwrites without being asked.
    again = _jobgen("import-crontab", "tests/crontabs/shop", "-o", str(out))
    assert (again.returncode, again.stderr.strip()) == (2, f"jobgen: error: {out} exists; pass --force to overwrite it")


def test_cli_prints_to_stdout_and_exits_0_when_everything_translated():
    result = _jobgen("import-crontab", "tests/crontabs/etc/crontab")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Imported by `jobgen import-crontab` from crontab.\n")
    assert result.stderr == "jobgen: 4 jobs imported\n"


# ----------------------------------------------------------------------------- cron where it does not belong


def _validate(jobs: str):
    text = f"jobgen: 1\ntarget: {{systemd: '252'}}\njobs:\n{jobs}"
    return validate.validate(load.load_text(text, "m.yaml"), "m.yaml")


@pytest.mark.parametrize("command", [
    "/bin/echo 'a > b' \"c | d\"",   # quoted: plain arguments
    "/usr/bin/find /tmp -name x",
    "/bin/echo a\\;b",                # escaped
])  # fmt: skip
def test_quoted_or_escaped_operators_are_plain_arguments(command):
    quoted = json.dumps(command)  # a YAML double-quoted scalar
    manifest, _ = _validate(f"  j: {{command: {quoted}, schedule: daily}}\n")
    assert manifest.jobs[0].command[0].startswith("/")


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "@daily", "@weekly", "0 3 1,15 * 1-5", "30 4 * * mon-fri", "0 0 1-31 * 1"])
def test_every_cron_suggestion_is_a_valid_and_equivalent_calendar(schedule):
    with pytest.raises(ManifestError) as exc:
        _validate(f"  j: {{command: [/bin/true], schedule: '{schedule}'}}\n")
    message = exc.value.diagnostics[0].message
    suggested = re.findall(r"'([^']+ [^' ]+:[^' ]+:00)'", message)  # the OnCalendar= expressions it shows
    assert suggested
    oracle = CronOracle(schedule)
    expected = oracle.fires(PROOF_START, PROOF_START + timedelta(days=62))
    got = sorted({t for s in suggested for t in parse_calendar(s + " UTC").next_elapses(PROOF_START, len(expected) + 1)
                  if t <= PROOF_START + timedelta(days=62)})
    assert got == expected, message
