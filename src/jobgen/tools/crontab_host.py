"""`jobgen import-crontab --host`: every crontab of a host as manifests, one per source, and
one report of what became of each line.

Pure: what host/crontabs.py read in, manifests and report lines out. Each source is read
as tools/crontab.py reads a single file; what a host adds:

* run-parts folders are mapped once. Debian's /etc/crontab runs /etc/cron.hourly itself and
  the daily, weekly and monthly folders with `test -x /usr/sbin/anacron || run-parts ...`
  (when anacron is installed, /etc/anacrontab runs them instead); RHEL's cronie runs the
  hourly folder from /etc/cron.d/0hourly and leaves the others to anacron. Translating those
  lines as they are would run each folder twice (a timer for the line, and the folder's),
  and one unit for a whole folder hides which script failed. So every line of every crontab
  that runs a folder (and, with anacron installed, of /etc/anacrontab) is a runner of it,
  reported as mapped, never translated; the folder becomes its own manifest: one job per
  script run-parts would run, on the schedule of its runners (_merge: every runner's
  calendars where cron's runs are the same, else the first's and the rest for review), with
  `persistent: true` where anacron was to run it (a run missed while the host was off is
  made up, anacron's purpose). The scripts start at the same time, where run-parts ran them
  one after another. A folder no line runs never ran: it is refused, not given a time.
* job names are unique across the host (unit names share one namespace).
* per line, what differs at the DST changes of the job's zone (tools/crontab_dst.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobgen.compiler import cron as cron_rules
from jobgen.compiler import notify
from jobgen.compiler.diagnostics import ManifestError
from jobgen.tools import crontab as tool
from jobgen.tools import crontab_dst

# The report's words; IGNORED: a file cron itself would not read.
TRANSLATED, REFUSED, REVIEW, MAPPED, IGNORED = "translated", "refused", "needs review", "mapped", "ignored"
MANIFEST_SUFFIX = ".yaml"
# `run-parts [options and their values] /etc/cron.PERIOD` anywhere in a command.
_RUN_PARTS = re.compile(r"(?:^|[\s;&|{(])(?:/bin/|/usr/bin/)?run-parts\s(?:[^;&|]*?\s)?/etc/cron\.(hourly|daily|weekly|monthly)/?"
                        r"(?=$|[\s;&|})])")
# A line is a runner of the folder, whose scripts become its jobs, only when running the
# folder is all it does, in the shapes the distributions ship: `run-parts [--report]
# /etc/cron.PERIOD` (RHEL's 0hourly), after `cd / &&` (Debian's /etc/crontab), behind
# Debian's anacron test (`test -x /usr/sbin/anacron || ( ... )` or `{ ...; }`) or cronie's
# 0anacron test (cronie-noanacron's dailyjobs), under `nice` (RHEL's anacrontab).
# run-parts(8) options that change nothing but its output (--report, -v, --verbose) are
# taken. Any other (--list and --test run nothing, --regex and --lsbsysinit change which
# scripts, --arg passes words, --umask), or any other command around it (a guard, a pipe),
# makes the line its own: it is translated as one job, which runs the folder as cron did.
_BODY = (r"(?:cd\s+/\s*&&\s*)?(?:nice\s+)?(?:/bin/|/usr/bin/)?run-parts(?:\s+(?:--report|-v|--verbose))*"
         r"\s+/etc/cron\.(?:hourly|daily|weekly|monthly)/?")
_RUNNER = re.compile(rf"(?:test\s+-x\s+/usr/sbin/anacron\s*\|\|\s*(?:\(\s*{_BODY}\s*\)|\{{\s*{_BODY}\s*;\s*\}}|{_BODY})"
                     rf"|\[\s+!\s+-f\s+/etc/cron\.hourly/0anacron\s+\]\s*&&\s*{_BODY}|{_BODY})")
_ANACRON_GUARD = re.compile(r"test\s+-x\s+/usr/sbin/anacron\s*\|\|")
_CD_ROOT = re.compile(r"(?:^|[({;|&]\s*)cd\s+/\s*&&")
# run-parts(8) --list and --test print the names it would run and run none of them.
_RUNS_NOTHING = re.compile(r"run-parts\s(?:[^;&|]*?\s)?--(?:list|test)\b")
_REVIEW_ALWAYS = ("hardening: none and overlap: skip: cron ran these jobs without a sandbox and started a run "
                  "while the last one was still going (README: import-crontab)")


@dataclass
class Source:
    """One file (or run-parts folder) and what became of it."""

    path: str
    manifest: str | None  # the manifest's file name, None when nothing is written for it
    imported: tool.Imported
    text: str | None = None  # the manifest
    mapped: list[tuple[int, str]] = field(default_factory=list)  # (line, what)
    review: list[tuple[int, str]] = field(default_factory=list)  # (line, what does not carry over)
    scripts_mapped: list[tuple[str, str]] = field(default_factory=list)  # (a folder's script, why it is no job)
    # a folder run by several lines: (each line's cron schedule, its calendars), for the DST report
    runs: list[tuple[str, str | tuple[str, ...]]] = field(default_factory=list)
    dst: dict[int, list[str]] = field(default_factory=dict)  # line -> differences


@dataclass
class HostImport:
    sources: list[Source] = field(default_factory=list)
    report: list[str] = field(default_factory=list)
    refused: int = 0
    jobs: int = 0

    @property
    def files(self) -> dict[str, str]:
        return {s.manifest: s.text for s in self.sources if s.manifest and s.text is not None}


# cronie reads a cron.d name of any bytes but a few (host/crontabs.FLAVOURS): in a manifest's
# file name every other byte is %XX, '%' included, so two names never share a file.
FILE_NAME_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def file_stem(name: str) -> str:
    """A cron.d file's name as a manifest's: `man-db.cron` as it is, `a b` as `a%20b`."""
    return "".join(chr(b) if b in FILE_NAME_BYTES else f"%{b:02X}" for b in os.fsencode(name))


def run_parts_folder(command: tuple[str, ...]) -> str | None:
    """The period of the /etc/cron.PERIOD folder a command runs with run-parts, or None."""
    m = _RUN_PARTS.search(_text(command))
    return m.group(1) if m else None


def runner_folder(command: tuple[str, ...]) -> str | None:
    """The period of the folder a command does nothing but run (_RUNNER), or None."""
    text = _text(command).strip()
    return run_parts_folder(command) if _RUNNER.fullmatch(text) else None


def _text(command: tuple[str, ...]) -> str:
    return command[2] if len(command) == 3 and command[1] == "-c" else " ".join(command)


def import_host(cron, zone: str | None) -> HostImport:
    """`cron`: a host/crontabs.HostCron; `zone`: the zone jobs without CRON_TZ run in (--zone,
    else the host's), for the DST report."""
    out = HostImport()
    taken: set[str] = set()
    runners: dict[str, list[_Runner]] = {}  # period -> the lines that run its folder, in source order
    within: dict[str, list[str]] = {}  # period -> the lines that run its folder inside a command of their own

    def take(src: Source, origin: str) -> None:
        """Every line of a crontab that runs a folder is one of its runners, never a job itself."""
        for job in list(src.imported.jobs):
            if (period := runner_folder(job.command)) is None:
                if (period := run_parts_folder(job.command)) is not None and not _RUNS_NOTHING.search(_text(job.command)):
                    within.setdefault(period, []).append(f"{src.path}:{job.line}")
                continue
            src.imported.jobs.remove(job)
            left = bool(_ANACRON_GUARD.search(job.command[-1])) and cron.anacron
            if left:  # the line does nothing: anacron runs the folder, and catches up on a missed run
                job = tool.ImportedJob(**{**job.__dict__, "timer": _with(job.timer, persistent="true")})
            runners.setdefault(period, []).append(_Runner(src, job.line, f"{origin} line {job.line}", job, left))

    # The image's cron's rules, as every crontab of it is read.
    rules = {"acts_on": cron.flavour.acts_on, "whole_file": cron.flavour.whole_file,
             "context": tool.Context(cron.home, cron.folder)}
    # Users are checked only where the root's /etc/passwd was read: without it, every line
    # would be "bad username".
    users = cron.user if cron.users else None
    if cron.crontab is not None:
        src = Source(cron.crontab.path, "crontab" + MANIFEST_SUFFIX, tool.read(cron.crontab.text, "crontab", system=True,
                                                                                      **rules, users=users))
        take(src, "/" + cron.crontab.rel)
        out.sources.append(src)
    for crontab in cron.cron_d:
        name = crontab.rel.rsplit("/", 1)[-1]
        src = Source(crontab.path, f"cron.d-{file_stem(name)}{MANIFEST_SUFFIX}", tool.read(crontab.text, name, system=True,
                                                                                                   **rules, users=users))
        take(src, "/" + crontab.rel)
        out.sources.append(src)
    folders_at = len(out.sources)
    anacron = None
    if cron.anacrontab is not None:
        anacron = _anacrontab(cron.anacrontab, cron.anacron)
        out.sources.append(anacron.source)
    for crontab in cron.spool:
        # No is_user: cron reads every file of its spool as a user crontab, so the format is
        # known, not guessed from a name, and a command that is also a user's name (`mail`)
        # is the command cron ran; there is no --system to pass under --host.
        imported = tool.read(crontab.text, crontab.user, system=False, user=crontab.user, **rules)
        src = Source(crontab.path, f"user-{file_stem(crontab.user)}{MANIFEST_SUFFIX}", imported)
        take(src, "/" + crontab.rel)
        out.sources.append(src)
    if anacron is not None:  # after cron's: a folder cron runs too is imported at cron's time first
        _anacron_runners(anacron, runners, cron.anacron)
    kept = {period: _merge(period, rs) for period, rs in runners.items()}
    from_anacron = any(r.anacron is not None for rs in kept.values() for r in rs)
    folders = [_folder(folder, kept.get(folder.period, []), anacron, cron.anacron, from_anacron, within.get(folder.period, []))
               for folder in cron.folders]
    out.sources[folders_at:folders_at] = folders

    for src in out.sources:
        _settle(src, taken)
        for job in src.imported.jobs:
            job_zone = job.timezone or zone
            if job_zone and not isinstance(job.schedule, dict) and crontab_dst.has_dst(job_zone):
                # a folder run at several lines' times: each line's cron schedule against its own calendars
                runs = src.runs or [(job.cron_schedule, job.schedule)]
                if diffs := [d for text, calendars in runs for d in crontab_dst.differences(text, calendars, job_zone)]:
                    src.dst[job.line] = diffs
    out.report = _report(out, cron)
    if anacron is not None and (twice := _anacron_twice(cron, anacron, folders)):
        out.report.append(twice)
    return out


def _anacron_twice(cron, tab: _Anacrontab, folders: list[Source]) -> str | None:
    """Where anacron has a starter of its own (Debian's anacron package: anacron.timer, hourly,
    and anacron.service), it goes on running the folders its anacrontab lines run after cron is
    gone: an imported folder would then run twice. cronie-anacron is started by cron's 0anacron
    and stops with cron: no line."""
    timer = cron.flavour.anacron_timer
    periods = {a.period for a in tab.lines}
    twice = [f"/etc/cron.{folder.period}" for folder, src in zip(cron.folders, folders)
             if src.imported.jobs and folder.period in periods]
    if not (cron.anacron and timer and twice):
        return None
    return (f"{tab.source.path}: {REVIEW}: anacron is installed and {timer} starts it apart from cron; it runs "
            f"{', '.join(twice)} from this file, whose scripts are now imported jobs: disable it (systemctl disable "
            f"--now {timer}) or remove the anacron package once the jobs are applied, or those scripts run twice")


def _with(timer: tuple[tuple[str, str], ...], **keys: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({**dict(timer), **keys}.items()))


@dataclass(frozen=True)
class _AnacronLine:
    """An anacrontab line that runs a folder with run-parts."""

    line: int
    period: str  # the folder's: hourly, daily, ...
    every: str  # the line's period as written: 1, 7, @monthly, ...
    delay: str  # minutes, as written
    environment: tuple[tuple[str, str], ...]
    mail: str | None


@dataclass
class _Anacrontab:
    source: Source
    lines: list[_AnacronLine]
    own: dict[str, tuple[int, str]]  # RANDOM_DELAY, START_HOURS_RANGE -> (line, value): anacron's, for all its jobs


@dataclass(frozen=True, eq=False)
class _Runner:
    """A line that runs a run-parts folder: its schedule and what its runs carry (user,
    environment, zone, mail, timer keys) become the folder's jobs'."""

    source: Source
    line: int
    origin: str  # as the jobs' description names it: "/etc/crontab line 20"
    job: tool.ImportedJob
    left_to_anacron: bool = False  # `test -x /usr/sbin/anacron || run-parts ...` with anacron installed
    anacron: _AnacronLine | None = None
    review: str = ""  # what of anacron's line does not carry over

    @property
    def where(self) -> str:
        return f"{self.source.path}:{self.line}"


# anacrontab(5) periods a calendar can hold (cronie's and Debian's anacron; systemd-cron's
# generator reads the same) -> (what it is said as, cron's day-of-month, month and weekday
# fields: systemd.time(7)'s daily, weekly, monthly, yearly). Any other number of days counts
# from the last run: no calendar.
ANACRON_PERIODS: dict[str, tuple[str, str]] = {
    "1": ("every day", "* * *"), "@daily": ("every day", "* * *"),
    "7": ("every week", "* * 1"), "@weekly": ("every week", "* * 1"),
    "@monthly": ("every month", "1 * *"),
    "@yearly": ("every year", "1 1 *"), "@annually": ("every year", "1 1 *"),
}
_ANACRON_OWN = ("RANDOM_DELAY", "START_HOURS_RANGE")
_ANACRON_ENV = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*")
_HOURS_RANGE = re.compile(r"(\d{1,2})-(\d{1,2})")
# cronie-anacron's /etc/cron.hourly/0anacron runs `anacron -s` (RHEL, Fedora). Imported as a
# job it would start anacron, which would run the folders imported from /etc/anacrontab again.
ANACRON_STARTERS = ("0anacron",)
_NOT_CALENDAR = ("anacron runs a job once every N days counted from its last run, which is no calendar: translate it "
                 "by hand (a schedule with persistent: true)")


def _anacrontab(crontab, installed: bool) -> _Anacrontab:
    """anacrontab(5): `period delay identifier command`, and NAME=value lines: the environment
    of the jobs after them (SHELL runs the command, MAILTO mails), but RANDOM_DELAY and
    START_HOURS_RANGE, anacron's own. Its run-parts lines run folders (_anacron_runners); any
    other job runs every N days counted from its last run, which no calendar expression is:
    reported for translation by hand. Without anacron installed nothing reads the file."""
    out = _Anacrontab(Source(crontab.path, None, tool.Imported()), [], {})
    env: dict[str, str] = {}
    mail: str | None = None
    for number, raw in enumerate(crontab.text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := _ANACRON_ENV.fullmatch(line):
            name, value = m.group(1), m.group(2)
            if name in _ANACRON_OWN:
                out.own[name] = (number, value)
            elif name == "MAILTO":
                mail = None if not value or notify.address_problem(value) else value
                if value and mail is None and installed:
                    out.source.imported.notes.append(tool.Problem(number, f"MAILTO={value}: {notify.address_problem(value)}, "
                                                                  "so the jobs after it mail no one (mail_on_failure takes one address)"))
            elif name != "SHELL":  # the shell anacron ran the line with; the jobs run the scripts themselves
                env[name] = value
            continue
        words = line.split(None, 3)
        if len(words) == 4 and (period := runner_folder(("/bin/sh", "-c", words[3]))) is not None:
            every = words[0].lower() if words[0].startswith("@") else words[0].lstrip("0")
            out.lines.append(_AnacronLine(number, period, every, words[1], tuple(sorted(env.items())), mail))
        else:
            out.source.imported.problems.append(tool.Problem(number, _NOT_CALENDAR if installed else (
                "anacron is not installed (no /usr/sbin/anacron), so nothing runs this line: not imported (if it should "
                "run, translate it by hand: anacron counts N days from the last run, which no calendar is)")))
    return out


def _anacron_runners(tab: _Anacrontab, runners: dict[str, list[_Runner]], installed: bool) -> None:
    """anacron, when installed, is one more runner of each folder its lines run, on a calendar
    of the line's period. The hour is START_HOURS_RANGE's first, before which anacron starts no
    job (systemd-cron's generator takes the same), the minute the line's delay; RANDOM_DELAY is
    randomized_delay (RandomizedDelaySec=: 0 up to the minutes given, as anacron adds);
    persistent: true makes up a run missed while the host was off, anacron's purpose. What does
    not carry over (the window's end, days counted from the last run) is reported for review.
    A folder that /etc/crontab leaves to anacron (`test -x /usr/sbin/anacron || ...`) keeps that
    line's time, as before: the anacrontab line is the same run, not a second one."""
    src = tab.source
    for a in tab.lines:
        cron_runners = runners.get(a.period, [])
        if not installed:
            src.mapped.append((a.line, f"runs /etc/cron.{a.period} with run-parts, but anacron is not installed (no "
                                       "/usr/sbin/anacron), so nothing runs this line: " + (
                                           f"the folder's scripts are imported from {cron_runners[0].where}"
                                           if cron_runners else "the folder is not imported from it")))
            continue
        if left := next((r for r in cron_runners if r.left_to_anacron), None):
            src.mapped.append((a.line, f"runs /etc/cron.{a.period} with run-parts: the folder's scripts are imported "
                                       f"once, from the folder, at the time of {left.where} (which leaves the folder to "
                                       "anacron) with persistent: true"))
            continue
        if a.every not in ANACRON_PERIODS:
            src.imported.problems.append(tool.Problem(a.line, _NOT_CALENDAR))
            continue
        runner = _anacron_runner(src, a, tab.own)
        if isinstance(runner, str):
            src.imported.problems.append(tool.Problem(a.line, runner))
            continue
        runners.setdefault(a.period, []).append(runner)


def _anacron_runner(src: Source, a: _AnacronLine, own: dict[str, tuple[int, str]]) -> _Runner | str:
    """The runner anacron's line is, or why it cannot be one."""
    every, days = ANACRON_PERIODS[a.every]
    start, end, window = 0, 24, ""
    if "START_HOURS_RANGE" in own:
        number, value = own["START_HOURS_RANGE"]
        m = _HOURS_RANGE.fullmatch(value)
        if m is None or not 0 <= int(m.group(1)) < int(m.group(2)) <= 24:
            return f"START_HOURS_RANGE={value} (line {number}) is not a range of hours (e.g. 3-22): when anacron ran the line is unknown"
        start, end = int(m.group(1)), int(m.group(2))
        window = f", only between {start:02}:00 and {end:02}:00 (START_HOURS_RANGE={value})"
    if not a.delay.isdigit():
        return f"the delay '{a.delay}' is not a number of minutes (anacrontab(5)): when anacron ran the line is unknown"
    minutes = start * 60 + int(a.delay)
    if minutes >= 24 * 60:
        return f"a delay of {a.delay} minutes after {start:02}:00 is the next day: no daily time"
    text = f"{minutes % 60} {minutes // 60} {days}"
    schedule = cron_rules.to_calendar(cron_rules.parse(text))
    timer = {"persistent": "true"}
    if "RANDOM_DELAY" in own:
        number, value = own["RANDOM_DELAY"]
        if not value.isdigit():
            return f"RANDOM_DELAY={value} (line {number}) is not a number of minutes"
        if int(value):
            timer["randomized_delay"] = f"{int(value)}min"
    job = tool.ImportedJob(name="", line=a.line, source="", cron_schedule=text, schedule=schedule[0], timezone=None,
                           command=(), user="root", environment=a.environment, timer=tuple(sorted(timer.items())), mail=a.mail)
    review = (f"anacron ran this line when it was started (hourly) and a {every[6:]} had passed since the date of the "
              f"last run{window}; the jobs' timer elapses at {minutes // 60:02}:{minutes % 60:02} {every} "
              f"('{schedule[0]}') instead, and makes up a missed run at boot" + (" at any hour" if window else ""))
    return _Runner(src, a.line, f"/etc/anacrontab line {a.line} (anacron)", job, anacron=a, review=review)


def _merge(period: str, runners: list[_Runner]) -> list[_Runner]:
    """The runners whose times the folder's jobs take; each runner's line reported.

    cron runs the folder at every runner's time, so each runner's calendars join the jobs'
    `schedule:` list (a timer elapses at each, systemd.timer(5); each was proved against cron's
    rules on its own) where the union is the same runs: same user, environment, zone, mail and
    timer keys, calendars only, and no minute two of them share (cron ran the folder twice
    then, a timer elapses once). A runner that differs is not guessed at: its line is reported
    for review, and the jobs keep the times of the runners that agree with the first."""
    kept: list[_Runner] = runners[:1]
    for r in runners[1:]:
        if (why := _differs(kept, r)) is None:
            kept.append(r)
            continue
        r.source.mapped.append((r.line, f"runs /etc/cron.{period} with run-parts: the folder's scripts are imported once, "
                                        f"from the folder, at the time of {kept[0].where}"))
        r.source.review.append((r.line, f"runs /etc/cron.{period} too, but {why}; this line's runs "
                                        f"('{r.job.cron_schedule}') are dropped: add them by hand if they matter"))
    for r in kept:
        others = [o.where for o in kept if o is not r]
        also = f", and at the time{'s' if len(others) > 1 else ''} of {', '.join(others)} (cron ran it at each)" if others else ""
        r.source.mapped.append((r.line, _mapped(period, r) + also))
        if r.review:
            r.source.review.append((r.line, r.review))
    return kept


def _mapped(period: str, r: _Runner) -> str:
    if r.anacron is not None:
        every = ANACRON_PERIODS[r.anacron.every][0]
        return (f"runs /etc/cron.{period} with run-parts {every}: the folder's scripts are imported once, from the folder, "
                f"at {r.job.schedule.split()[-1][:5]} {every} (the first hour anacron starts jobs at, then the line's delay "
                f"of {r.anacron.delay} minutes) with persistent: true"
                + "".join(f" and randomized_delay: {v} (RANDOM_DELAY={v.removesuffix('min')}, anacron's random delay)"
                          for k, v in r.job.timer if k == "randomized_delay"))
    if r.left_to_anacron:
        return (f"runs /etc/cron.{period} with run-parts when anacron is not installed; anacron is, and runs it: the "
                "folder's scripts are imported once, from the folder, at this line's time with persistent: true")
    return f"runs /etc/cron.{period} with run-parts: the folder's scripts are imported once, from the folder, at this line's time"


def _differs(kept: list[_Runner], r: _Runner) -> str | None:
    """Why the runner's runs do not join the kept runners' as more calendars, or None."""
    first, job = kept[0], r.job
    if isinstance(job.schedule, dict) or isinstance(first.job.schedule, dict):
        return f"{'it' if isinstance(job.schedule, dict) else first.where} runs the folder at boot, not at a calendar's times"
    if job.user != first.job.user:
        return f"it runs the folder as {job.user or 'root'}, {first.where} as {first.job.user or 'root'}"
    if job.timezone != first.job.timezone:
        zones = [z or "the host's zone" for z in (job.timezone, first.job.timezone)]
        return f"it runs the folder in {zones[0]}, {first.where} in {zones[1]}"
    if job.timer != first.job.timer:
        shown = [", ".join(f"{k}: {v}" for k, v in t) or "no timer keys" for t in (job.timer, first.job.timer)]
        return f"its jobs would get {shown[0]}, {first.where}'s {shown[1]}"
    if job.environment != first.job.environment:
        return f"it runs the folder with another environment than {first.where}"
    if job.mail != first.job.mail:
        return f"it mails {job.mail or 'no one'}, {first.where} {first.job.mail or 'no one'}"
    for other in kept:
        if (when := _first_common(cron_rules.parse(job.cron_schedule), cron_rules.parse(other.job.cron_schedule))):
            return (f"it runs the folder at minutes {other.where} runs it at too (first {when:%Y-%m-%d %H:%M}): cron ran "
                    "it twice then, a timer elapses once")
    return None


# Two cron schedules share a minute iff they do within 28 years: every combination of
# weekday, date and leap year the Gregorian calendar has until 2100.
COMMON_FROM = datetime(2028, 1, 1)
COMMON_DAYS = (datetime(2056, 1, 1) - COMMON_FROM).days


def _first_common(a, b) -> datetime | None:
    """The first minute from COMMON_FROM both cron schedules run at, or None."""
    minutes, hours = sorted(a.minutes & b.minutes), sorted(a.hours & b.hours)
    if not minutes or not hours:
        return None
    for n in range(COMMON_DAYS):
        day = COMMON_FROM + timedelta(days=n)
        if _day_runs(a, day) and _day_runs(b, day):
            return day.replace(hour=hours[0], minute=minutes[0])
    return None


def _day_runs(s, day: datetime) -> bool:
    """crontab(5): the month, and the day of month and of week (either, when both are restricted)."""
    day_ok, dow_ok = day.day in s.days, (day.weekday() + 1) % 7 in s.weekdays
    return day.month in s.months and ((day_ok or dow_ok) if s.either_day else (day_ok and dow_ok))


def _folder(folder, kept: list[_Runner], tab: _Anacrontab | None, installed: bool, from_anacron: bool,
            within: list[str]) -> Source:
    src = Source(folder.path, f"cron.{folder.period}{MANIFEST_SUFFIX}", tool.Imported())
    scripts = list(folder.scripts)
    if from_anacron and folder.period == "hourly":
        for starter in [s for s in scripts if s in ANACRON_STARTERS]:
            scripts.remove(starter)
            src.scripts_mapped.append((starter, "starts anacron, which runs /etc/anacrontab: the folders it runs are "
                                                "imported from there, so it is not imported as a job (they would run twice)"))
    if not kept:
        if scripts and within:  # run as part of a line's own command: that line's job runs it as cron did
            src.scripts_mapped += [(script, f"run by run-parts inside the command of {' and '.join(within)}, which is "
                                            "imported as it is (its job runs the folder as cron did); not a job of its own")
                                   for script in scripts]
        elif scripts:
            src.imported.problems.append(tool.Problem(0, _unrun(folder.period, tab, installed)))
        return src
    first = kept[0].job
    schedule = first.schedule
    if len(kept) > 1:
        schedule = tuple(c for r in kept for c in ((r.job.schedule,) if isinstance(r.job.schedule, str) else r.job.schedule))
        src.runs = [(r.job.cron_schedule, r.job.schedule) for r in kept]
    names: set[str] = set()
    for script in scripts:
        name = tool.unique_name(f"cron-{folder.period}-{tool.name_part(script, tool.BASE_MAX, 'job')}", names)
        names.add(name)
        src.imported.jobs.append(tool.ImportedJob(
            name=name, line=kept[0].line,
            source=f"/etc/cron.{folder.period}/{script}, run by run-parts from {' and '.join(r.origin for r in kept)}",
            cron_schedule=first.cron_schedule, schedule=schedule, timezone=first.timezone,
            command=(f"/etc/cron.{folder.period}/{script}",), user=first.user, environment=first.environment,
            timer=first.timer, mail=first.mail,
            # run-parts runs each script where the line left it: '/' after Debian's `cd / &&`
            working_directory=None if _CD_ROOT.search(_text(first.command)) else first.working_directory))
    return src


def _unrun(period: str, tab: _Anacrontab | None, installed: bool) -> str:
    """Why a folder with scripts is not imported: nothing ran it. (systemd-cron's generator
    gives such a folder a default time; but the host never ran these scripts, and an import
    must not start running them.)"""
    lines = [a for a in (tab.lines if tab else []) if a.period == period]
    if lines and installed:  # its anacrontab lines were refused: no calendar
        return (f"only {', '.join(f'{tab.source.path}:{a.line}' for a in lines)} runs this folder, and it is not "
                "imported (see that line): nothing imported")
    why = (f"no line of /etc/crontab, /etc/cron.d or a user crontab{' nor /etc/anacrontab' if installed else ''} runs "
           "this folder, so the host never ran its scripts: nothing imported (an import does not start scripts the "
           "host did not run)")
    if lines:
        why += f"; {', '.join(f'{tab.source.path}:{a.line}' for a in lines)} would, but anacron is not installed"
    return why


def _settle(src: Source, taken: set[str]) -> None:
    """Unique names across the host, then the manifest (what jobgen's validator refuses is
    reported by line, as the single-file import does)."""
    renamed = []
    for job in src.imported.jobs:
        name = tool.unique_name(job.name, taken)
        taken.add(name)
        renamed.append(tool.ImportedJob(**{**job.__dict__, "name": name}))
    src.imported.jobs = renamed
    if not src.imported.jobs or src.manifest is None:
        src.manifest = None
        return
    try:
        src.text = tool.settle(src.imported, src.path, src.manifest)
    except ManifestError as exc:  # jobgen's own bug: said, and the rest of the host imported
        src.imported.problems.append(tool.Problem(0, f"jobgen's translation does not validate (a bug in jobgen): {exc}"))
        src.imported.jobs, src.text = [], None
    if not src.imported.jobs:
        src.manifest, src.text = None, None


def _report(out: HostImport, cron) -> list[str]:
    lines = [f"{u.path}: {IGNORED}: {u.reason}" for u in cron.skipped]
    lines += [f"{u.path}: {REFUSED}: {u.reason}" for u in cron.unread]
    out.refused += len(cron.unread)
    for src in out.sources:
        rows: list[tuple[int, str]] = []
        rows += [(0, f"{src.path}/{script}: {MAPPED}: {what}") for script, what in src.scripts_mapped]
        rows += [(line, f"{src.path}:{line}: {MAPPED}: {what}") for line, what in src.mapped]
        rows += [(line, f"{src.path}:{line}: {REVIEW}: {what}") for line, what in src.review]
        for p in src.imported.problems:
            rows.append((p.line, f"{src.path}:{p.line}: {REFUSED}: {p.message}" if p.line else f"{src.path}: {REFUSED}: {p.message}"))
        rows += [(n.line, f"{src.path}:{n.line}: note: {n.message}") for n in src.imported.notes]
        for job in src.imported.jobs:
            where = f"{src.path}:{job.line}" if not job.source.startswith("/etc/cron.") else f"{src.path}/{job.command[0].rsplit('/', 1)[-1]}"
            rows.append((job.line, f"{where}: {TRANSLATED}: {job.name} in {src.manifest}"))
            rows += [(job.line, f"{where}: {REVIEW}: {job.name}: {d}") for d in src.dst.get(job.line, [])]
        lines += [text for _, text in sorted(rows, key=lambda r: r[0])]
        if src.imported.jobs:
            lines.append(f"{src.path}: {REVIEW}: {len(src.imported.jobs)} job{'s' if len(src.imported.jobs) != 1 else ''} "
                         f"in {src.manifest}: {_REVIEW_ALWAYS}")
        out.refused += len(src.imported.problems)
        out.jobs += len(src.imported.jobs)
    return lines
