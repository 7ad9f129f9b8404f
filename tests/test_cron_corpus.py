"""`jobgen import-crontab` on a corpus of tricky cron lines, judged by independent evaluators.

tests/crontabs/corpus holds the lines, each with its expectation beside it (translated into
which calendar, or refused and why). Every translated line's elapses are then compared, in
UTC, Europe/Berlin and America/New_York, from four base times, with

* croniter (a cron library written by others; day_or=True is the Vixie OR rule), and
* VixieCron below: Vixie cron's rules (Debian's cron; cronie alike) written out plainly,
  DST handling included, because croniter deviates from Vixie cron on some lines
  (CRONITER_DEVIATIONS says where and why).

The one difference allowed between cron and the systemd timer jobgen writes is DST, exactly:

* the skipped hour (spring): Vixie cron runs a *fixed-time* job (minute and hour fields
  that do not start with '*') whose time falls in the skipped hour right after the change
  (cron.c: a forward jump of under 3 hours runs the non-wildcard jobs of the skipped
  minutes); systemd does not run it (the local time does not exist: no elapse). A
  *wildcard* job (minute or hour starting with '*') runs in neither for the skipped minutes.
* the repeated hour (autumn): Vixie cron runs a wildcard job again in the second pass of the
  hour (cron.c: the clock went back, wildcard jobs only); systemd once, in the first pass. A
  fixed-time job runs once in both, in the first pass.

So: every systemd elapse is a cron run, and every cron run systemd lacks is one of those two.
The engine must also match an evaluator of systemd's own DST rule exactly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from jobgen.compiler.timespec import parse_calendar
from jobgen.tools import crontab as tool

CORPUS = Path(__file__).resolve().parent / "crontabs" / "corpus"
UTC = timezone.utc
ZONES = ("UTC", "Europe/Berlin", "America/New_York")
BASES = (
    datetime(2027, 10, 30, 21, 0, tzinfo=UTC),  # a day before Europe's repeated hour, a week before New York's
    datetime(2027, 12, 31, 22, 30, tzinfo=UTC),  # the year's end in every zone
    datetime(2028, 2, 28, 12, 0, tzinfo=UTC),  # a leap-year February
    datetime(2028, 3, 11, 12, 0, tzinfo=UTC),  # before New York's (and Europe's) skipped hour
)
SPAN = timedelta(days=400)
# A schedule that runs at most SPARSE times from the first base to 400 days after the last
# (533 days: a daily one) is compared over that whole stretch. A denser one over its first
# FIRST runs from each base, then WINDOW runs from every month start and DST_WINDOW from an
# hour before every DST change in the stretch: where values carry over and zones differ.
# (The engine costs 30-350 µs an elapse: every minute of 533 days would take minutes.)
SPARSE = 600
FIRST = 100
WINDOW = 12
DST_WINDOW = timedelta(minutes=150)

# Lines croniter reads differently from Vixie cron: those are held to VixieCron alone.
CRONITER_DEVIATIONS = {
    # entry.c sets DOM_STAR when the field's first character is '*', so '*/2' counts as
    # unrestricted and both day fields must match (odd days that are Mondays); croniter
    # treats any restricted set as restricted and applies the OR rule.
    "0 0 */2 * 1": "croniter: OR rule for a '*/2' day of month (Vixie: AND, the field starts with '*')",
    "0 0 1 * */2": "croniter: OR rule for a '*/2' weekday (Vixie: AND, the field starts with '*')",
}
# CRONITER_DST, croniter's DST deviations, on any line: in the repeated hour it runs a
# fixed-time job twice (once per pass), Vixie cron once (cron.c: only wildcard jobs when the
# clock went back); in the skipped hour it runs a wildcard job's skipped time at the change
# ('0 */2 * * *' at 03:00 after 02:00 was skipped), Vixie cron only fixed-time jobs'.


# --------------------------------------------------------------------------- the corpus


@dataclass(frozen=True)
class Entry:
    number: int  # line number in the crontab the corpus makes
    expect: str  # translated | refused | note | set
    detail: str
    line: str


@functools.cache
def entries() -> tuple[Entry, ...]:
    out = []
    for raw in CORPUS.read_text().splitlines():
        if raw.startswith("#") or not raw.strip():
            continue
        left, _, line = raw.partition(" | ")
        kind, _, detail = left.strip().partition(" ")
        out.append(Entry(len(out) + 1, kind, detail, line))
    return tuple(out)


@functools.cache
def imported() -> tool.Imported:
    text = "".join(e.line + "\n" for e in entries())
    result = tool.read(text, "corpus", system=False, user="alice")
    tool.settle(result, "corpus", "<import>")
    return result


def _schedule_text(job: tool.ImportedJob) -> str:
    if isinstance(job.schedule, dict):
        return f"after_boot {job.schedule['after_boot']}"
    return " + ".join(job.schedule) if isinstance(job.schedule, tuple) else job.schedule


def test_the_corpus_is_large_and_covers_every_kind():
    kinds = [e.expect for e in entries()]
    jobs = [e for e in entries() if e.expect in ("translated", "refused") and "=" not in e.line.split()[0]]
    assert len(jobs) >= 60 and {"translated", "refused", "note", "set"} <= set(kinds)


@pytest.mark.parametrize("entry", entries(), ids=lambda e: f"{e.number}:{e.line[:40]}")
def test_each_line_is_translated_or_refused_as_the_corpus_says(entry):
    jobs = {j.line: j for j in imported().jobs}
    problems = {p.line: p.message for p in imported().problems}
    notes = {p.line: p.message for p in imported().notes}
    if entry.expect == "translated":
        assert entry.number in jobs, problems.get(entry.number)
        assert _schedule_text(jobs[entry.number]) == entry.detail
    elif entry.expect == "refused":
        assert entry.number not in jobs
        message = problems[entry.number]
        # a schedule's problem is prefixed with the schedule: "'0 0 * * 8': day of week: ..."
        assert message.startswith(entry.detail) or message.split("': ", 1)[-1].startswith(entry.detail), message
    elif entry.expect == "note":
        assert notes[entry.number].startswith(entry.detail) and entry.number not in problems
    else:
        assert entry.expect == "set" and entry.number not in problems and entry.number not in notes


def test_every_line_is_accounted_for():
    """Each crontab line is a job, a refusal with its reason, or a variable: nothing is dropped."""
    jobs = {j.line for j in imported().jobs}
    problems = {p.line for p in imported().problems}
    for e in entries():
        assert (e.number in jobs) + (e.number in problems) + (e.expect in ("note", "set") and e.number not in problems) == 1, e


# --------------------------------------------------------------------------- Vixie cron


class VixieCron:
    """One crontab schedule by Vixie cron's rules (entry.c, cron.c), sharing no code with jobgen."""

    NICKNAMES = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
                 "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
                 # systemd-cron's crontab(5)
                 "@quarterly": "0 0 1 */3 *", "@semiannually": "0 0 1 */6 *"}
    NAMES = {"month": "jan feb mar apr may jun jul aug sep oct nov dec".split(),
             "dow": "sun mon tue wed thu fri sat".split()}

    def __init__(self, schedule: str):
        minute, hour, dom, month, dow = self.NICKNAMES.get(schedule, schedule).split()
        self.minutes = self._set(minute, 0, 59)
        self.hours = self._set(hour, 0, 23)
        self.doms = self._set(dom, 1, 31)
        self.months = self._set(month, 1, 12, "month")
        self.dows = {d % 7 for d in self._set(dow, 0, 7, "dow")}
        # entry.c: MIN_STAR/HR_STAR/DOM_STAR/DOW_STAR from each field's first character
        self.wildcard = minute.startswith("*") or hour.startswith("*")
        self.either_day = not dom.startswith("*") and not dow.startswith("*")

    def _set(self, text: str, low: int, high: int, names: str = "") -> set[int]:
        def number(word: str) -> int:
            word = word.lower()
            if names and word in self.NAMES[names]:
                return self.NAMES[names].index(word) + (1 if names == "month" else 0)
            return int(word)

        out: set[int] = set()
        for part in text.split(","):
            span, _, step = part.partition("/")
            a, b = (low, high) if span == "*" else (number(span.split("-")[0]), number(span.split("-")[-1]))
            out.update(range(a, b + 1, int(step or 1)))
        return out

    def _day(self, d: datetime) -> bool:
        dom, dow = d.day in self.doms, d.isoweekday() % 7 in self.dows
        return d.month in self.months and ((dom or dow) if self.either_day else (dom and dow))

    def runs(self, zone: ZoneInfo, start: datetime, end: datetime, rule: str = "vixie",
             most: int | None = None) -> list[datetime]:
        """The instants in (start, end] at which it runs (the first `most`), by `rule`:
        "vixie" (cron.c's DST handling) or "systemd" (a local time that does not exist never
        elapses; a repeated one elapses once, in its first pass)."""
        out: list[datetime] = []
        day = start.astimezone(zone).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
        last = end.astimezone(zone).replace(tzinfo=None)
        times = [(h, m) for h in sorted(self.hours) for m in sorted(self.minutes)]
        while day <= last and (most is None or len(out) < most):
            if self._day(day):
                offset = day.replace(tzinfo=zone).utcoffset()
                if offset == (day + timedelta(days=1, hours=6)).replace(tzinfo=zone).utcoffset():
                    # no change of offset that day: every wall-clock time exists once
                    base = day - offset
                    found = [(base + timedelta(hours=h, minutes=m)).replace(tzinfo=UTC) for h, m in times]
                else:
                    found = sorted({t for h, m in times for t in self._instants(day.replace(hour=h, minute=m), zone, rule)})
                out += [t for t in found if start < t <= end]
            day += timedelta(days=1)
        return sorted(set(out))[:most]

    def _instants(self, wall: datetime, zone: ZoneInfo, rule: str) -> list[datetime]:
        first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
        second = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
        exists = first.astimezone(zone).replace(tzinfo=None) == wall
        if not exists:  # in the skipped hour
            if rule == "systemd" or self.wildcard:
                return []
            after = wall  # cron runs it when it wakes after the jump: the first minute that exists
            while after.replace(tzinfo=zone, fold=0).astimezone(UTC).astimezone(zone).replace(tzinfo=None) != after:
                after += timedelta(minutes=1)
            return [after.replace(tzinfo=zone).astimezone(UTC)]
        if first != second and rule == "vixie" and self.wildcard:  # the repeated hour
            return [first, second]
        return [first]


def test_the_vixie_evaluator_applies_cron_s_rules():
    """Its own reading, shown on a few known days (2028-01-01 is a Saturday)."""
    utc = ZoneInfo("UTC")
    jan = datetime(2028, 1, 1, tzinfo=UTC)
    days = lambda s: [t.day for t in VixieCron(s).runs(utc, jan - timedelta(minutes=1), jan + timedelta(days=14))]  # noqa: E731
    assert days("0 0 1,15 * 5") == [1, 7, 14, 15]  # either day matches
    assert days("0 0 */2 * 1") == [3]  # '*/2' is unrestricted: Mondays on odd days only
    assert days("0 0 * * 7") == [2, 9]  # 7 is Sunday
    berlin = ZoneInfo("Europe/Berlin")
    spring, autumn = datetime(2028, 3, 26, tzinfo=UTC), datetime(2028, 10, 29, tzinfo=UTC)
    assert VixieCron("30 2 * * *").runs(berlin, spring, spring + timedelta(hours=3)) == [datetime(2028, 3, 26, 1, 0, tzinfo=UTC)]
    assert VixieCron("30 2 * * *").runs(berlin, spring, spring + timedelta(hours=3), "systemd") == []
    assert [t.hour for t in VixieCron("0 * * * *").runs(berlin, autumn, autumn + timedelta(hours=2))] == [1, 2]
    assert [t.hour for t in VixieCron("0 * * * *").runs(berlin, autumn, autumn + timedelta(hours=2), "systemd")] == [2]


# --------------------------------------------------------------------------- the comparison


def _translated() -> list[tuple[Entry, tool.ImportedJob]]:
    jobs = {j.line: j for j in imported().jobs}
    return [(e, jobs[e.number]) for e in entries() if e.number in jobs and not isinstance(jobs[e.number].schedule, dict)]


def _calendars(job: tool.ImportedJob) -> tuple[str, ...]:
    return job.schedule if isinstance(job.schedule, tuple) else (job.schedule,)


def _changes(zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """The instants in [start, end) where the zone's offset changes (to the hour)."""
    out, t = [], start.replace(minute=0, second=0, microsecond=0)
    while t < end:
        if (t + timedelta(days=1)).astimezone(zone).utcoffset() != t.astimezone(zone).utcoffset():
            h = t
            while (h + timedelta(hours=1)).astimezone(zone).utcoffset() == h.astimezone(zone).utcoffset():
                h += timedelta(hours=1)
            out.append(h + timedelta(hours=1))
        t += timedelta(days=1)
    return out


def _windows(vixie: VixieCron, zone: ZoneInfo) -> list[tuple[datetime, datetime]]:
    """(start, end) stretches to compare (see SPARSE). For a sparse schedule, each later base's
    first two runs too: the next elapse is a function of the previous one alone, so once the
    elapses from a base meet the stretch's, they are the stretch's."""
    first, last = BASES[0], BASES[-1] + SPAN
    runs = vixie.runs(zone, first, last, "systemd", SPARSE + 1)
    if len(runs) <= SPARSE:
        return [(first, last)] + [(b, _nth(vixie, zone, b, 2)) for b in BASES[1:]]
    out = [(b, _nth(vixie, zone, b, FIRST)) for b in BASES]
    starts = [datetime(y, m, 1, tzinfo=zone).astimezone(UTC) - timedelta(minutes=30) for y in (2027, 2028, 2029) for m in range(1, 13)]
    out += [(s, _nth(vixie, zone, s, WINDOW)) for s in starts if first < s < last]
    out += [(c - timedelta(hours=1), c - timedelta(hours=1) + DST_WINDOW) for c in _changes(zone, first, last)]
    return out


def _nth(vixie: VixieCron, zone: ZoneInfo, start: datetime, n: int) -> datetime:
    runs = vixie.runs(zone, start, start + SPAN, "systemd", n)
    return runs[-1] if runs else start + SPAN


@functools.lru_cache(maxsize=None)
def _engine(calendars: tuple[str, ...], zone: str, start: datetime, end: datetime, most: int) -> tuple[datetime, ...]:
    out: set[datetime] = set()
    for c in calendars:
        out.update(t for t in parse_calendar(f"{c} {zone}").next_elapses(start, most + 1) if t <= end)
    return tuple(sorted(out))


def _croniter(schedule: str, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    it = croniter(VixieCron.NICKNAMES.get(schedule, schedule), start.astimezone(zone), day_or=True)  # it has no @quarterly
    out = []
    while (t := it.get_next(datetime).astimezone(UTC)) <= end:
        out.append(t)
    return out


def _after_skip(t: datetime, zone: ZoneInfo) -> bool:
    """t is the first minute after a skipped hour."""
    return (t - timedelta(minutes=1)).astimezone(zone).utcoffset() < t.astimezone(zone).utcoffset()


def _second_pass(t: datetime, zone: ZoneInfo) -> bool:
    """t's local time is in a repeated hour, and it is its second pass."""
    wall = t.astimezone(zone).replace(tzinfo=None)
    return (t - timedelta(hours=1)).astimezone(zone).replace(tzinfo=None) == wall


def _dst_explained(t: datetime, vixie: VixieCron, zone: ZoneInfo) -> bool:
    """A cron run systemd lacks by the rule in this module's docstring."""
    return _after_skip(t, zone) if not vixie.wildcard else _second_pass(t, zone)


@functools.cache
def _compared(zone_name: str) -> dict[str, dict]:
    """Per translated line: what differed, by kind, over every window."""
    zone = ZoneInfo(zone_name)
    report = {}
    for entry, job in _translated():
        if job.timezone not in (None, "UTC"):
            continue  # a CRON_TZ line runs in its own zone: compared in that zone only
        schedule = job.cron_schedule
        vixie = VixieCron(schedule)
        found = {"systemd_rule": [], "not_cron": [], "unexplained_missing": [], "dst": 0, "croniter": [],
                 "croniter_dst": 0, "compared": 0}
        for start, end in _windows(vixie, zone):
            cron_runs = vixie.runs(zone, start, end)
            expected = vixie.runs(zone, start, end, "systemd")
            ours = list(_engine(_calendars(job), zone_name, start, end, len(expected) + 1))
            found["compared"] += len(ours)
            if ours != expected:
                found["systemd_rule"].append((start, sorted(set(ours) ^ set(expected))[:3]))
            found["not_cron"] += [t for t in ours if t not in set(cron_runs)][:3]
            for t in sorted(set(cron_runs) - set(ours)):
                if _dst_explained(t, vixie, zone):
                    found["dst"] += 1
                else:
                    found["unexplained_missing"].append(t)
            theirs = set(_croniter(schedule, zone, start, end))
            extra = theirs - set(cron_runs)
            # croniter's own DST deviations (CRONITER_DST): a fixed-time job's second pass in the
            # repeated hour; a wildcard job's skipped run at the change
            dst_extra = {t for t in extra if _second_pass(t, zone) if not vixie.wildcard} | {
                t for t in extra if _after_skip(t, zone) if vixie.wildcard}
            found["croniter_dst"] += len(dst_extra)
            if theirs - dst_extra != set(cron_runs):
                found["croniter"].append((start, sorted((theirs - dst_extra) ^ set(cron_runs))[:3]))
        report[schedule] = found
    return report


@pytest.mark.parametrize("zone", ZONES)
def test_every_translation_runs_when_cron_runs_but_for_the_dst_rule(zone):
    report = _compared(zone)
    assert len(report) >= 40
    assert {s: f["not_cron"] for s, f in report.items() if f["not_cron"]} == {}, "systemd runs when cron does not"
    assert {s: f["unexplained_missing"] for s, f in report.items() if f["unexplained_missing"]} == {}
    # and exactly what an evaluator of systemd's own DST rule says
    assert {s: f["systemd_rule"] for s, f in report.items() if f["systemd_rule"]} == {}
    if zone == "UTC":
        assert sum(f["dst"] for f in report.values()) == 0
    else:  # the rule is exercised: some runs differ, and only by it
        assert sum(f["dst"] for f in report.values()) > 0


@pytest.mark.parametrize("zone", ZONES)
def test_croniter_agrees_with_the_vixie_evaluator_but_where_said(zone):
    report = _compared(zone)
    deviating = {s for s, f in report.items() if f["croniter"]}
    assert deviating == set(CRONITER_DEVIATIONS)
    if zone != "UTC":  # croniter's DST deviation is real in a DST zone
        assert sum(f["croniter_dst"] for f in report.values()) > 0


def test_cron_tz_lines_run_in_their_zone_as_cron_does():
    """The lines after CRON_TZ= compared in that zone (their manifest has timezone: ZONE)."""
    zoned = [(e, j) for e, j in _translated() if j.timezone not in (None, "UTC")]
    assert {j.timezone for _, j in zoned} == {"Europe/Berlin", "America/New_York"}
    dst = 0
    for entry, job in zoned:
        zone = ZoneInfo(job.timezone)
        vixie = VixieCron(job.cron_schedule)
        for start, end in _windows(vixie, zone):
            cron_runs = vixie.runs(zone, start, end)
            ours = list(_engine(_calendars(job), job.timezone, start, end, len(cron_runs) + 1))
            assert ours == vixie.runs(zone, start, end, "systemd"), (entry.line, start)
            missing = sorted(set(cron_runs) - set(ours))
            assert set(ours) <= set(cron_runs) and all(_dst_explained(t, vixie, zone) for t in missing), (entry.line, missing)
            dst += len(missing)
    assert dst > 0
