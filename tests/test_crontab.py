"""`jobgen import-crontab` on realistic crontabs, with each translation proved over a year.

tests/crontabs/ holds Debian's /etc/crontab as shipped, a cron.d file (Debian's php
sessionclean fragment plus e2scrub and an @reboot line) and a user crontab with the cases
that matter (shell syntax, %, CRON_TZ, nicknames, the day-of-month OR weekday rule, bad lines).

The proof: CronOracle below reads cron's five fields on its own (it shares no code with
compiler/cron.py) and lists the minutes cron fires at, over a year of wall-clock time, by the
rules of crontab(5); jobgen's calendar engine must list exactly the same elapses for the
OnCalendar= expression the importer wrote, or, for a list (cron's day-of-month OR weekday
rule), the union of every expression's elapses: a timer elapses at each of its OnCalendar=
lines (systemd.timer(5)). Wall-clock time is UTC here: cron and systemd read
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
from functools import partial
from pathlib import Path

import pytest
import yaml

from jobgen.compiler import load, validate
from jobgen.compiler.diagnostics import ManifestError
from jobgen.compiler.timespec import parse_calendar
from jobgen.tools import crontab as tool
from support.cli import jobgen

ROOT = Path(__file__).resolve().parent.parent
CRONTABS = ROOT / "tests" / "crontabs"
# A year that holds a February 29th and every month length.
PROOF_START = datetime(2027, 12, 1, tzinfo=timezone.utc)
PROOF_END = PROOF_START + timedelta(days=366)


class CronOracle:
    """crontab(5), written out plainly: which minutes does a schedule fire at?"""

    NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                 "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
                 # systemd-cron's crontab(5): "@quarterly ... 0 0 1 */3 *", "@semiannually ... 0 0 1 */6 *"
                 "@quarterly": "0 0 1 */3 *", "@semiannually": "0 0 1 */6 *"}
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
    imported = tool.read(path.read_text(), path.name, system=kw.pop("system", tool.system_format(str(path))), **kw)
    tool.settle(imported, path.name, "<import>")  # what the validator refuses is reported, as the CLI does
    return imported


_jobgen = partial(jobgen, cwd=ROOT)


ALL = [("etc/crontab", {}), ("cron.d/php", {}), ("shop", {"user": "shop"}), ("tricky", {"user": "shop"})]


def _all_jobs():
    for name, kw in ALL:
        for job in _import(name, **kw).jobs:
            yield pytest.param(job, id=f"{name}:{job.line}")


# ----------------------------------------------------------------------------- the proof


def _union(calendars: tuple[str, ...], start: datetime, most: int) -> list[datetime]:
    """The first `most` elapses of a timer with these OnCalendar= lines."""
    return sorted({t for c in calendars for t in parse_calendar(c + " UTC").next_elapses(start, most)})[:most]


@pytest.mark.parametrize("job", [j for j in _all_jobs() if not isinstance(j.values[0].schedule, dict)])
def test_each_schedule_fires_exactly_when_cron_would_over_a_year(job):
    expected = CronOracle(job.cron_schedule).fires(PROOF_START, PROOF_END)
    assert expected, "a schedule that never fires proves nothing"
    calendars = (job.schedule,) if isinstance(job.schedule, str) else job.schedule
    got = _union(calendars, PROOF_START, len(expected) + 1)
    assert got[: len(expected)] == expected
    assert len(got) == len(expected) or got[-1] > PROOF_END


def test_the_proof_covers_the_day_of_month_or_weekday_rule():
    either = [j.values[0] for j in _all_jobs() if isinstance(j.values[0].schedule, tuple)]
    assert sorted(j.cron_schedule for j in either) == ["0 0 1,15 * 5", "30 4 1,15 * fri"]
    # Neither item alone is cron's schedule: the union is what the proof holds to it.
    for job in either:
        expected = CronOracle(job.cron_schedule).fires(PROOF_START, PROOF_END)
        for one in job.schedule:
            assert _union((one,), PROOF_START, len(expected)) != expected


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
        (19, "crontab-cron-hourly-l19", "*-*-* *:17:00", "root"),
        # `test -x /usr/sbin/anacron || { cd / && run-parts ... }` runs the folder, not anacron
        (20, "crontab-cron-daily-l20", "*-*-* 06:25:00", "root"),
        (21, "crontab-cron-weekly-l21", "Sun *-*-* 06:47:00", "root"),
        (22, "crontab-cron-monthly-l22", "*-*-01 06:52:00", "root"),
    ]
    hourly = imported.jobs[0]
    # cron runs every command with $SHELL -c: shell syntax keeps that, explicitly.
    assert hourly.command == ("/bin/sh", "-c", "cd / && run-parts --report /etc/cron.hourly")
    # SHELL as cron sets it for the job (the crontab's here); root's user: systemd sets HOME,
    # LOGNAME and USER for a unit with User= only, as cron does for every job.
    assert dict(hourly.environment) == {"PATH": "/usr/local/sbin:/usr/local/bin:/sbin:/bin:/usr/sbin:/usr/bin", "SHELL": "/bin/sh"}


def test_a_cron_d_file_with_reboot_and_mailto():
    imported = _import("cron.d/php")
    assert [(j.line, j.schedule, j.user, j.command) for j in imported.jobs] == [
        (14, "*-*-* *:09,39:00", "root", ("/bin/sh", "-c", "[ -x /usr/lib/php/sessionclean ] && if [ ! -d /run/systemd/system ]; "
                                          "then /usr/lib/php/sessionclean; fi")),
        (16, "Sun *-*-* 03:30:00", "root", ("/sbin/e2scrub_all", "-A", "-r")),
        (17, {"after_boot": "1min"}, "www-data", ("/usr/local/bin/warm-cache", "--all")),
    ]
    assert [str(n) for n in imported.notes] == [
        "line 15: MAILTO=ops@example.com: the jobs after it get mail_on_failure: cron mails any output a job prints, "
        "jobgen mails when a run fails (its status and last journal lines, through the host's sendmail); output goes "
        "to the journal"]
    # MAILTO applies to the lines after it (compiler/notify.py: the mail template).
    assert [(j.line, j.mail) for j in imported.jobs] == [(14, None), (16, "ops@example.com"), (17, "ops@example.com")]
    assert '    mail_on_failure: "ops@example.com"\n' in tool.manifest(imported, "php")


@pytest.mark.parametrize(("line", "mail", "note"), [
    ('MAILTO=""', None, None),  # cron: no mail
    ("MAILTO=root", "root", "MAILTO=root: the jobs after it get mail_on_failure"),
    ("MAILTO=a@example.com,b@example.com", None, "MAILTO=a@example.com,b@example.com: 'a@example.com,b@example.com' is "
     "not an address such as ops@example.com, or a local user such as root, so the jobs after it mail no one "
     "(mail_on_failure takes one address)"),
])  # fmt: skip
def test_mailto_becomes_mail_on_failure(line, mail, note):
    imported = tool.read(f"MAILTO=ops@example.com\n{line}\n0 0 * * * /bin/true\n", "t", system=False)
    assert [j.mail for j in imported.jobs] == [mail]
    assert [n.message[: len(note)] for n in imported.notes[1:]] == ([note] if note else [])


def test_a_user_crontab():
    imported = _import("shop", user="shop")
    jobs = {j.line: j for j in imported.jobs}
    assert sorted(jobs) == [5, 7, 9, 11, 14, 15, 17, 18, 19, 20, 21]
    assert {j.user for j in imported.jobs} == {"shop"}
    assert jobs[5].command == ("/bin/sh", "-c", "cd /srv/shop && /usr/bin/php artisan schedule:run >> /var/log/shop/schedule.log 2>&1")
    assert jobs[7].command == ("/usr/local/bin/export-invoices", "--yesterday")
    assert jobs[7].schedule == "Mon..Fri *-*-* 02:00:00"
    assert jobs[11].command == ("/bin/sh", "-c", "/usr/bin/date +%F > /srv/shop/storage/today")  # \% is a literal %
    assert (jobs[14].schedule, jobs[15].schedule) == ("*-*-* 00:00:00", "Sun *-*-* 00:00:00")  # @weekly is Sunday
    assert jobs[17].schedule == "Sun *-01..03,10..12-* 00/4:00:00" and jobs[17].timezone == "Europe/Berlin"
    assert jobs[7].timezone is None  # CRON_TZ applies to the lines after it
    # cron's OR rule: the 1st and the 15th, or any Friday, is two OnCalendar= lines.
    assert jobs[9].schedule == ("*-*-01,15 04:30:00", "Fri *-*-* 04:30:00")
    assert dict(jobs[5].environment) == {"APP_ENV": "production", "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh"}  # cron's, unless set


def test_untranslatable_lines_are_reported_with_their_number():
    imported = _import("shop", user="shop")
    assert [str(p) for p in imported.problems] == [
        "line 13: an unescaped '%' ends the command in cron and sends the rest of the line to its standard input; rewrite it "
        "(e.g. with a here-document in a script) or escape it as '\\%' if it is meant literally",
        "line 22: '61 * * * *': minute: 61 is out of range 0-59",
        "line 23: '0 0 5/2 * *': day of month: '5/2' means different things to different crons; write '5-31/2'",
    ]
    assert [str(n) for n in imported.notes] == [
        "line 16: CRON_TZ=Europe/Berlin has DST: a job with a fixed minute and hour that falls in the hour the clocks "
        "skip runs right after the change in cron, not at all in systemd; in the repeated hour cron runs a job whose "
        "minute or hour starts with '*' in both passes, systemd once (`jobgen plan` lists those days)"]


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
    # cronie's rules: it skips a line it refuses and runs the others (Debian's cron ignores
    # the whole file then: test_debian_s_cron_runs_no_line_of_a_file_with_a_line_it_refuses).
    out = tmp_path / "shop.yaml"
    result = _jobgen("import-crontab", "tests/crontabs/shop", "--user", "shop", "-o", str(out), "--cron", "cronie")
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == "jobgen: 11 jobs imported; 3 lines not translated"
    assert "tests/crontabs/shop:9:" not in result.stderr
    assert "tests/crontabs/shop:2: note" not in result.stderr  # MAILTO="" asks for no mail: nothing to say
    assert result.stdout == ""
    # The real tools accept what it wrote.
    assert _jobgen("check", str(out)).returncode == 0
    plan = _jobgen("plan", str(out), "--from", "2027-01-01T00:00:00Z", "--job", "shop-export-invoices-l7", "--next", "1")
    assert "  next      Fri 2027-01-01 02:00:00 UTC" in plan.stdout
    # The OR rule's list: plan shows both lines and merges their elapses.
    plan = _jobgen("plan", str(out), "--from", "2027-01-01T00:00:00Z", "--job", "shop-payout-report-l9", "--next", "3")
    assert ("  schedule  OnCalendar=*-*-01,15 04:30:00; OnCalendar=Fri *-*-* 04:30:00 (host local time, shown in UTC)\n"
            "  next      Fri 2027-01-01 04:30:00 UTC\n"
            "            Fri 2027-01-08 04:30:00 UTC\n"
            "            Fri 2027-01-15 04:30:00 UTC\n") in plan.stdout, plan.stdout
    # Never overwrites without being asked.
    again = _jobgen("import-crontab", "tests/crontabs/shop", "-o", str(out))
    assert (again.returncode, again.stderr.strip()) == (2, f"jobgen: error: {out} exists; pass --force to overwrite it")


@pytest.mark.parametrize(("setup", "out", "message"), [
    (lambda t: None, "{t}/missing/m.yaml", "jobgen: error: cannot write {t}/missing/m.yaml: {t}/missing does not exist; nothing written"),
    (lambda t: (t / "file").write_text("x"), "{t}/file/m.yaml", "jobgen: error: cannot write {t}/file/m.yaml: {t}/file is not a folder; nothing written"),
    (lambda t: (t / "link.yaml").symlink_to("/etc/hostname"), "{t}/link.yaml",
     "jobgen: error: cannot write {t}/link.yaml: it is a symbolic link (to /etc/hostname); jobgen writes only regular files and never through a link; nothing written"),
])  # fmt: skip
def test_a_manifest_that_cannot_be_written_is_one_line_and_exit_73(tmp_path, setup, out, message):
    # The single manifest goes through the compiler's write rules, like --host's folder:
    # a typo'd folder is not made, a link is never written through, nothing is left behind.
    setup(tmp_path)
    before = sorted((p.relative_to(tmp_path), p.is_symlink()) for p in tmp_path.rglob("*"))
    r = _jobgen("import-crontab", "--user-crontab", "--zone", "UTC", "tests/crontabs/shop", "--force", "-o", out.format(t=tmp_path))
    assert (r.returncode, r.stdout) == (73, "")
    assert r.stderr.splitlines()[-1] == message.format(t=tmp_path)
    assert "jobs imported" not in r.stderr
    assert sorted((p.relative_to(tmp_path), p.is_symlink()) for p in tmp_path.rglob("*")) == before


def test_a_read_only_folder_is_one_line_and_exit_73(tmp_path):
    # A read-only mount (as root, permissions would not stop the write), in a private
    # mount namespace: once this crashed with exit 70 from the temporary file.
    ro = tmp_path / "ro"
    ro.mkdir()
    script = (f"mount -t tmpfs -o ro jobgen-test {ro} || exit 99; "
              f"exec {sys.executable} -m jobgen import-crontab --user-crontab --zone UTC tests/crontabs/shop -o {ro}/m.yaml")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    if r.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount namespaces): {r.stderr.strip()}")
    assert (r.returncode, r.stdout) == (73, "")
    assert r.stderr.splitlines()[-1] == f"jobgen: error: cannot write {ro}/m.yaml: Read-only file system; nothing written"


def test_the_summary_counts_lines_not_problems(tmp_path):
    # One line, two problems (a minute out of range and an unescaped '%'): two error lines,
    # and one line not translated.
    crontab = tmp_path / "two"
    crontab.write_text("61 * * * * date +%F\n0 * * * * true\n")
    result = _jobgen("import-crontab", "--user-crontab", "--zone", "UTC", "--cron", "cronie", str(crontab))
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert [line.split(": error: ")[0] for line in errors] == [f"{crontab}:1", f"{crontab}:1"]
    assert result.stderr.splitlines()[-1] == "jobgen: 1 job imported; 1 line not translated"


def test_a_crontab_on_standard_input_is_named_stdin():
    # `crontab -l | jobgen import-crontab -`: its jobs and its lines go by the name "stdin".
    result = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", "cronie", "-",
                     input="@monthly true\n@every 5m true\n")
    assert result.returncode == 1, result.stderr
    assert "  stdin-job-l1:\n" in result.stdout
    assert 'schedule: "*-*-01 00:00:00"' in result.stdout
    assert result.stderr.splitlines() == [
        "stdin:2: error: '@every' is not cron syntax (Go's cron libraries have it); for a run every SPAN write schedule: {every: SPAN}",
        "jobgen: 1 job imported; 1 line not translated",
    ]


def test_cli_prints_to_stdout_and_exits_0_when_everything_translated():
    # --zone: the DST notes of the machine's own zone are not this test's subject
    result = _jobgen("import-crontab", "tests/crontabs/etc/crontab", "--zone", "UTC")
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


# ----------------------------------------------------------------------------- tricky lines


def test_steps_that_do_not_divide_their_field_become_lists():
    # systemd 252 carries a repetition over the end of its field ('00/5' runs at 05:00, not
    # 00:00, after a month's last day; '00/7' cannot be computed in Europe/Berlin): a list is exact.
    jobs = {j.command[0].rsplit("/", 1)[1]: j.schedule for j in _import("tricky", user="shop").jobs}
    assert jobs["every-5-hours"] == "*-*-* 00,05,10,15,20:00:00"
    assert jobs["every-7-hours"] == "*-*-* 00,07,14,21:00:00"
    assert jobs["every-7-minutes"] == "*-*-* *:00,07,14,21,28,35,42,49,56:00"
    assert jobs["every-5-months"] == "*-01,06,11-01 00:00:00"
    assert jobs["odd-days"] == "*-*-01,03,05,07,09,11,13,15,17,19,21,23,25,27,29,31 00:00:00"
    # A step that divides its field stays a repetition.
    assert jobs["every-15-minutes"] == "*-*-* *:00/15:00"
    assert jobs["five-past-every-ten"] == "*-*-* *:05/10:00"


def test_control_variables_become_timer_keys_or_notes_never_environment():
    imported = _import("tricky", user="shop")
    for job in imported.jobs:
        assert job.environment == (("PATH", "/usr/bin:/bin"), ("SHELL", "/bin/sh"))  # cron's own: the control variables are not there
        assert dict(job.timer) == {"randomized_delay": "3min", "persistent": "true"}
    assert [str(n) for n in imported.notes] == [
        "line 5: BATCH=1 is systemd-cron's run-when-idle; jobgen has no equivalent (set nice/CPU weight in the job); not passed to the jobs"]


def test_lines_that_cannot_be_translated_say_why():
    imported = _import("tricky", user="shop")
    assert [str(p) for p in sorted(imported.problems, key=lambda p: p.line)] == [
        "line 21: '@quarterly' is systemd-cron's, not cron's: Debian's cron and cronie refuse the line (bad time "
        "specifier), so it never ran here; not imported (for those runs write schedule: '*-01/3-01 00:00:00')",
        "line 22: '@semiannually' is systemd-cron's, not cron's: Debian's cron and cronie refuse the line (bad time "
        "specifier), so it never ran here; not imported (for those runs write schedule: '*-01,07-01 00:00:00')",
        "line 25: '0 0 31 2 *': cron never runs this line: no month it names has that day (a way to switch a line off); "
        "there is nothing to import",
        "line 26: '@every' is not cron syntax (Go's cron libraries have it); for a run every SPAN write schedule: {every: SPAN}",
    ]


def test_a_line_that_never_runs_is_reported_and_the_rest_written(tmp_path):
    out = tmp_path / "tricky.yaml"
    r = _jobgen("import-crontab", str(CRONTABS / "tricky"), "--user", "shop", "-o", str(out), "--cron", "cronie")
    assert r.returncode == 1, r.stderr
    assert (f"{CRONTABS / 'tricky'}:25: error: '0 0 31 2 *': cron never runs this line: no month it names has that day "
            "(a way to switch a line off); there is nothing to import") in r.stderr.splitlines()
    assert r.stderr.splitlines()[-1] == "jobgen: 17 jobs imported; 4 lines not translated"
    written = out.read_text()
    assert "# line 25 not imported: '0 0 31 2 *': cron never runs this line" in written
    assert not [name for name in yaml.safe_load(written)["jobs"] if "switched-off" in name]
    assert _jobgen("check", str(out)).returncode == 0



# Debian's cron ignores the whole file when it refuses one line ("Syntax error, this crontab
# file will be ignored"; user.c load_user); cronie skips that line and runs the rest. The
# other lines of such a file never ran on Debian: imported, they would start running.
@pytest.mark.parametrize("text, refused", [
    ("61 * * * * /usr/local/bin/bad-minute\n0 2 * * * /usr/local/bin/backup\n",
     "'61 * * * *': minute: 61 is out of range 0-59"),
    ("0 2 * * * * /usr/local/bin/six-fields\n0 2 * * * /usr/local/bin/backup\n",
     "the command starts with '*': cron refuses the line (a sixth time field? cron has five); "
     "got '0 2 * * * * /usr/local/bin/six-fields'"),
    ("@Daily /usr/local/bin/cleanup\n0 2 * * * /usr/local/bin/backup\n",
     "'@Daily': cron's nicknames are lower case; cron refuses '@Daily' and never runs the line (write '@daily' to run it)"),
], ids=["bad minute", "sixth field", "nickname case"])
def test_debian_s_cron_runs_no_line_of_a_file_with_a_line_it_refuses(tmp_path, text, refused):
    src = tmp_path / "shop"
    src.write_text(text)
    debian = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", "debian", str(src),
                     "-o", str(tmp_path / "debian.yaml"))
    assert debian.returncode == 1
    assert debian.stderr.splitlines() == [
        f"{src}:1: error: {refused}",
        f"{src}:2: error: cron runs no line of this file: it refuses line 1 (see there), and Debian's cron then ignores "
        "the whole file (\"this crontab file will be ignored\"); not imported (fix line 1 if these jobs should run)",
        "jobgen: 0 jobs imported; 2 lines not translated",
    ]
    assert yaml.safe_load((tmp_path / "debian.yaml").read_text())["jobs"] == {}
    cronie = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", "cronie", str(src),
                     "-o", str(tmp_path / "cronie.yaml"))
    assert cronie.stderr.splitlines() == [f"{src}:1: error: {refused}", "jobgen: 1 job imported; 1 line not translated"]
    assert list(yaml.safe_load((tmp_path / "cronie.yaml").read_text())["jobs"]) == ["shop-backup-l2"]


def test_a_line_cron_runs_and_jobgen_does_not_translate_leaves_the_others(tmp_path):
    """Only a line cron itself refuses stops Debian's cron reading the file: one it runs and
    jobgen declines (a day no month has) leaves the others imported."""
    src = tmp_path / "shop"
    src.write_text("0 0 31 2 * /usr/local/bin/never\n0 2 * * * /usr/local/bin/backup\n")
    r = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", "debian", str(src),
                "-o", str(tmp_path / "m.yaml"))
    assert r.stderr.splitlines()[-1] == "jobgen: 1 job imported; 1 line not translated"
    assert list(yaml.safe_load((tmp_path / "m.yaml").read_text())["jobs"]) == ["shop-backup-l2"]


def test_a_crontab_saved_with_cr_lf_is_imported_with_a_note_of_what_cron_ran(tmp_path):
    """cron keeps a CR before the line's '\\n' in the command (the shell looked for
    `backup.sh\\r`): the import drops it, and says once that those jobs most likely failed."""
    src = tmp_path / "shop"
    src.write_bytes(b"MAILTO=\"\"\r\n0 2 * * * /usr/local/bin/backup.sh\r\n0 3 * * * /usr/local/bin/other\r\n")
    r = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", "debian", str(src), "-o", str(tmp_path / "m.yaml"))
    assert (r.returncode, r.stderr.splitlines()) == (0, [
        f"{src}:2: note: the lines end in CR LF (a file saved on Windows): cron kept the CR as the last character of each "
        "command, so these jobs most likely failed under cron ('...\\r: not found'); imported without it, they run: "
        "check that they should",
        "jobgen: 2 jobs imported",
    ])
    jobs = yaml.safe_load((tmp_path / "m.yaml").read_text())["jobs"]
    assert [job["command"] for job in jobs.values()] == [["/usr/local/bin/backup.sh"], ["/usr/local/bin/other"]]

@pytest.mark.parametrize("cron, jobs, summary", [
    ("debian", [], "jobgen: 0 jobs imported; 2 lines not translated"),
    ("cronie", ["shop-backup-l1"], "jobgen: 1 job imported; 1 line not translated"),
])
def test_a_last_line_without_a_line_break_is_refused_as_cron_refuses_it(tmp_path, cron, jobs, summary):
    # Debian's cron: "Missing newline before EOF, this crontab file will be ignored"; cronie's
    # entry.c refuses that line ("a file without a \n before the EOF is rude").
    src = tmp_path / "shop"
    src.write_text("0 2 * * * /usr/local/bin/backup\n0 3 * * * /usr/local/bin/last")
    r = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", cron, str(src),
                "-o", str(tmp_path / "m.yaml"))
    assert r.returncode == 1
    assert (f"{src}:2: error: the last line has no line break at its end, and cron refuses a line without one"
            in r.stderr.splitlines())
    assert r.stderr.splitlines()[-1] == summary
    assert list(yaml.safe_load((tmp_path / "m.yaml").read_text())["jobs"]) == jobs

@pytest.mark.parametrize("text", ["", "# only a comment\n", "0 0 31 2 * /bin/true\n", "@every 1h /bin/true\n"])
def test_a_file_with_nothing_to_import_writes_the_reasons_and_exits_1(tmp_path, text):
    src = tmp_path / "crontab"
    src.write_text(text)
    r = _jobgen("import-crontab", "--user-crontab", str(src), "-o", str(tmp_path / "out.yaml"))
    assert r.returncode == 1, r.stderr
    assert "internal error" not in r.stderr
    assert r.stderr.splitlines()[-1].startswith("jobgen: 0 jobs imported")
    assert yaml.safe_load((tmp_path / "out.yaml").read_text())["jobs"] == {}


def test_a_system_crontab_read_as_a_user_crontab_is_caught(tmp_path):
    src = tmp_path / "backup"  # a copy of a cron.d file: its name says nothing
    src.write_text("*/5 * * * * root /usr/bin/true\n")
    r = _jobgen("import-crontab", str(src))
    assert r.returncode == 1
    assert (f"{src}:1: error: 'root' after the schedule is a user of this host: this looks like a system crontab (a user "
            "column before the command, as in /etc/crontab and /etc/cron.d); pass --system to read it so, or "
            "--user-crontab if the command really is 'root ...'") in r.stderr.splitlines()
    ok = _jobgen("import-crontab", "--system", str(src))
    assert ok.returncode == 0 and '"/usr/bin/true"' in ok.stdout



@pytest.mark.parametrize("line", ["0 2 * * * * /usr/bin/backup --all", "0 2 * * * *\t/usr/bin/backup"])
def test_a_sixth_time_field_is_refused_as_cron_refuses_it(tmp_path, line):
    """cron's entry.c refuses a command that starts with '*' ("catch a common typo"): read
    as the command, `* /usr/bin/backup` ran the first name the shell's '*' expanded to."""
    src = tmp_path / "shop"
    src.write_text(line + "\n")
    r = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--cron", "debian", str(src), "-o", str(tmp_path / "m.yaml"))
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        f"{src}:1: error: the command starts with '*': cron refuses the line (a sixth time field? cron has five); "
        f"got '{line}'".replace("\t", "\\t"),  # one line, whatever the crontab holds
        "jobgen: 0 jobs imported; 1 line not translated",
    ]
    assert yaml.safe_load((tmp_path / "m.yaml").read_text())["jobs"] == {}

# cron's do_command.c: a backslash escapes the one character after it, so in `\\%` the
# backslash is escaped and the '%' ends the command; only `\%` is a literal '%'.
@pytest.mark.parametrize(("command", "argv"), [
    (r"echo a\%b", ("/bin/sh", "-c", "echo a%b")),
    (r"echo a\%b\\\%c", ("/bin/sh", "-c", r"echo a%b\\%c")),
    (r"echo a\b\%", ("/bin/sh", "-c", r"echo a\b%")),
    (r"echo a\\%b", None),
    (r"echo a\\\\%b", None),
])  # fmt: skip
def test_percent_is_read_as_cron_reads_it(tmp_path, command, argv):
    src, out = tmp_path / "crontab", tmp_path / "out.yaml"
    src.write_text(f"0 1 * * * {command}\n")
    r = _jobgen("import-crontab", "--user-crontab", str(src), "-o", str(out))
    jobs = yaml.safe_load(out.read_text())["jobs"]
    if argv is None:
        assert r.returncode == 1
        assert (f"{src}:1: error: an unescaped '%' ends the command in cron and sends the rest of the line to its "
                "standard input; rewrite it (e.g. with a here-document in a script) or escape it as '\\%' if it is "
                "meant literally") in r.stderr.splitlines()
        assert jobs == {}
    else:
        assert r.returncode == 0, r.stderr
        assert [tuple(job["command"]) for job in jobs.values()] == [argv]


# A crontab that sets no PATH: its jobs run with cron's, not systemd's (which puts
# /usr/local/bin and the sbin folders first): a bare command name finds what cron found.
@pytest.mark.parametrize(("crontab", "path"), [
    ("0 0 * * * mytool --now\n", "/usr/bin:/bin"),
    ("PATH=/opt/app/bin:/usr/bin\n0 0 * * * mytool --now\n", "/opt/app/bin:/usr/bin"),
])  # fmt: skip
def test_the_jobs_get_crons_path_unless_the_crontab_sets_one(crontab, path):
    imported = tool.read(crontab, "t", system=False)
    assert [(job.command, dict(job.environment)) for job in imported.jobs] == [(("/bin/sh", "-c", "mytool --now"),
                                                                                 {"PATH": path, "SHELL": "/bin/sh"})]


# cron's env.c load_env(): what a NAME=VALUE line sets, quotes and all.
@pytest.mark.parametrize(("line", "environment"), [
    ('A = "a b"  ', {"A": "a b"}),
    ("A='x'", {"A": "x"}),
    ('"A"=x', {"A": "x"}),
    ('A=a"b"', {"A": 'a"b"'}),
    ("A=  x y \t", {"A": "x y"}),
])  # fmt: skip
def test_a_variable_is_read_as_cron_reads_it(line, environment):
    imported = tool.read(f"{line}\n0 0 * * * /bin/true\n", "t", system=False)
    assert imported.problems == []
    assert [dict(job.environment) for job in imported.jobs] == [{**environment, "PATH": "/usr/bin:/bin", "SHELL": "/bin/sh"}]


@pytest.mark.parametrize("line", ["A='it's'", 'A="a"b', 'A="unclosed', "A='"])
def test_a_variable_line_cron_does_not_read_sets_nothing(tmp_path, line):
    src, out = tmp_path / "crontab", tmp_path / "out.yaml"
    src.write_text(f"{line}\n0 0 * * * /bin/true\n")
    r = _jobgen("import-crontab", "--user-crontab", "--cron", "cronie", str(src), "-o", str(out))
    assert r.returncode == 1
    assert (f"{src}:1: error: cron does not read '{line}' as a variable (a quoted value must be closed, and only "
            "blanks may follow its closing quote) nor as a job: it sets nothing in cron; rewrite it") in r.stderr.splitlines()
    assert [job.get("environment") for job in yaml.safe_load(out.read_text())["jobs"].values()] == [{"PATH": "/usr/bin:/bin",
                                                                                                     "SHELL": "/bin/sh"}]


@pytest.mark.parametrize("nickname", ["@Daily", "@HOURLY", "@Reboot"])
def test_a_nickname_cron_does_not_know_in_that_case_is_refused(tmp_path, nickname):
    src, out = tmp_path / "crontab", tmp_path / "out.yaml"
    src.write_text(f"{nickname} /bin/true\n")
    r = _jobgen("import-crontab", "--user-crontab", str(src), "-o", str(out))
    assert r.returncode == 1
    assert (f"{src}:1: error: '{nickname}': cron's nicknames are lower case; cron refuses '{nickname}' and never runs "
            f"the line (write '{nickname.lower()}' to run it)") in r.stderr.splitlines()
    assert yaml.safe_load(out.read_text())["jobs"] == {}


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.symlink_to("/dev/zero"), "cannot read: not a regular file"),
    (lambda p: p.mkdir(), "cannot read: not a regular file: a folder"),
    (lambda p: p.write_text("#" * (1 << 20) + "\n"), "cannot read: more than 1,048,576 bytes, larger than any crontab an operator wrote"),
])  # fmt: skip
def test_a_crontab_that_is_a_device_a_folder_or_huge_is_one_line_and_nothing_written(tmp_path, make, message):
    src, out = tmp_path / "crontab", tmp_path / "out.yaml"
    make(src)
    r = _jobgen("import-crontab", "--user-crontab", str(src), "-o", str(out))
    assert (r.returncode, r.stderr) == (2, f"jobgen: error: {src}: {message}\n")
    assert not out.exists()


def test_a_fifo_nobody_writes_does_not_hang_the_import_and_a_pipe_is_read(tmp_path):
    fifo, out = tmp_path / "crontab", tmp_path / "out.yaml"
    os.mkfifo(fifo)
    r = _jobgen("import-crontab", "--user-crontab", str(fifo), "-o", str(out))  # support.cli's timeout would end a hang
    assert (r.returncode, r.stderr) == (1, "jobgen: 0 jobs imported\n")
    assert yaml.safe_load(out.read_text())["jobs"] == {}
    piped = subprocess.run(["bash", "-c", f"{sys.executable} -m jobgen import-crontab --user-crontab "
                            "--user alice <(printf '0 1 * * * /bin/true\\n')"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert (piped.returncode, piped.stderr) == (0, "jobgen: 1 job imported\n")


# cron runs every command as `$SHELL -c`; a plain command becomes an argv only where that
# shell would run exactly those words and read nothing first.
@pytest.mark.parametrize(("lines", "command"), [
    (["SHELL=/bin/bash"], ["/usr/bin/app", "run"]),
    (["SHELL=/bin/bash", "BASH_ENV=/etc/app.env"], ["/bin/bash", "-c", "/usr/bin/app run"]),  # bash reads it first
    (["SHELL=/usr/bin/fish"], ["/usr/bin/fish", "-c", "/usr/bin/app run"]),  # its own quoting rules
    (["SHELL=/usr/local/bin/wrapper"], ["/usr/local/bin/wrapper", "-c", "/usr/bin/app run"]),
])  # fmt: skip
def test_a_plain_command_keeps_a_shell_that_would_do_more_than_run_it(tmp_path, lines, command):
    src, out = tmp_path / "crontab", tmp_path / "out.yaml"
    src.write_text("\n".join([*lines, "0 1 * * * /usr/bin/app run", ""]))
    r = _jobgen("import-crontab", "--user-crontab", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert [job["command"] for job in yaml.safe_load(out.read_text())["jobs"].values()] == [command]


def test_a_user_crontab_without_its_user_says_its_jobs_now_run_as_root(tmp_path):
    src, out = tmp_path / "shop", tmp_path / "out.yaml"
    src.write_text("# shop's\n0 1 * * * /usr/bin/app run\n")
    r = _jobgen("import-crontab", "--user-crontab", str(src), "-o", str(out))
    assert (r.returncode, r.stderr.splitlines()) == (0, [
        f"{src}:2: note: no --user: these jobs get no user: and run as root, while cron ran a user crontab's jobs as "
        "the user it belongs to; pass --user NAME to keep that",
        "jobgen: 1 job imported"])
    named = _jobgen("import-crontab", "--user-crontab", "--user", "shop", str(src), "-o", str(out), "--force")
    assert (named.returncode, named.stderr) == (0, "jobgen: 1 job imported\n")
    assert [job["user"] for job in yaml.safe_load(out.read_text())["jobs"].values()] == ["shop"]


# Whose cron read the crontab decides what CRON_TZ and RANDOM_DELAY do (host/crontabs.Flavour.acts_on):
# (the variable's line, --cron, the job's field it sets and its value, the environment, the note at line 1).
PATH_ONLY = {"PATH": "/usr/bin:/bin", "SHELL": "/bin/sh"}  # cron's own for every job
SCHEDULING_CASES = [
    ("CRON_TZ=America/New_York", "cronie", "timezone", "America/New_York", PATH_ONLY,
     "CRON_TZ=America/New_York has DST: a job with a fixed minute and hour that falls in the hour the clocks skip runs "
     "right after the change in cron, not at all in systemd; in the repeated hour cron runs a job whose minute or hour "
     "starts with '*' in both passes, systemd once (`jobgen plan` lists those days)"),
    ("CRON_TZ=America/New_York", "debian", "timezone", None, {"CRON_TZ": "America/New_York", **PATH_ONLY},
     "CRON_TZ=America/New_York: Debian's cron runs every job in the host's time zone (cron(8)), so the jobs after it "
     "ran, and run, in that zone, with CRON_TZ in their environment. To run them in America/New_York, add "
     "`timezone: America/New_York` (or import with --cron cronie if cronie read this crontab)"),
    ("RANDOM_DELAY=10", "cronie", "randomized_delay", "10min", PATH_ONLY, None),
    ("RANDOM_DELAY=10", "debian", "randomized_delay", None, {"RANDOM_DELAY": "10", **PATH_ONLY},
     "RANDOM_DELAY=10: cronie's; Debian's cron does not delay jobs by it, so the jobs after it started on time, and do, "
     "with RANDOM_DELAY in their environment. To spread their starts, add `randomized_delay: 10min` (or import with "
     "--cron cronie if cronie read this crontab)"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "cron", "field", "value", "environment", "note"), SCHEDULING_CASES,
                         ids=[f"{c[0].split('=')[0]}, {c[1]}" for c in SCHEDULING_CASES])
def test_cronie_acts_on_cron_tz_and_random_delay_debian_s_cron_passes_them_on(tmp_path, line, cron, field, value, environment, note):
    src = tmp_path / "report"
    src.write_text(f"{line}\n30 9 * * * /usr/bin/report\n")
    out = tmp_path / "m.yaml"
    r = _jobgen("import-crontab", "--user-crontab", "--user", "shop", "--zone", "UTC", "--cron", cron, str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    (job,) = yaml.safe_load(out.read_text())["jobs"].values()
    assert (job["schedule"], job.get(field), job["environment"]) == ("*-*-* 09:30:00", value, environment)
    notes = [n for n in r.stderr.splitlines() if n.startswith(f"{src}:1: note: ")]
    assert notes == ([] if note is None else [f"{src}:1: note: {note}"])


def test_an_unknown_cron_is_refused_and_nothing_is_written(tmp_path):
    src = tmp_path / "report"
    src.write_text("CRON_TZ=America/New_York\n30 9 * * * /usr/bin/report\n")
    r = _jobgen("import-crontab", "--user-crontab", "--cron", "bsd", str(src), "-o", str(tmp_path / "m.yaml"))
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "jobgen: error: --cron bsd: choose one of debian, cronie\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
