"""Calendar parity: jobgen's calendar engine against real `systemd-analyze calendar` 252 and 257.

`jobgen plan` and `jobgen import-crontab` promise when a job runs without asking systemd, so the
engine (compiler/timespec.py) must agree with systemd exactly. The corpus is EDGE_CASES (written
by hand: shorthands, weekdays, end of month, leap days, fractions, DST gaps and repeats, odd
zones) plus GENERATED (a grammar of systemd.time(7) drawn with a fixed seed, so every run checks
the same expressions). For each base time and each local time zone (systemd-analyze runs with
TZ=zone, and jobgen computes zone-less expressions in that zone) the normalized form and the next
20 elapses (in UTC, to the second, as systemd prints them) must be identical.

One systemd-analyze process per (release, base time, zone) checks the whole corpus.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import subprocess
from datetime import datetime, timezone

import pytest

from jobgen.compiler.timespec import parse_calendar
from tests.support import sdanalyze

pytestmark = pytest.mark.matrix

# release -> whether it has systemd PR #40266 (a new year resets the day of the month; Debian
# backported it to 257.13, the 257 in the cache; 252.39 does not have it).
RELEASES = {252: False, 257: True}
ITERATIONS = 20
BASES = (
    "2025-01-01 00:00:00",  # a plain new year
    "2024-02-28 23:59:59",  # the second before a leap day
    "2026-03-29 00:59:59",  # the second before Europe's spring change (01:00 UTC)
    "2026-10-25 00:30:00",  # inside Europe's repeated hour
    "2026-11-01 05:30:00",  # inside New York's repeated hour
    "2026-04-04 15:15:00",  # inside Lord Howe's repeated half hour
)
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe")  # Lord Howe: 30-min DST

EDGE_CASES = [
    # shorthands, any case, with zones
    "minutely", "hourly", "daily", "weekly", "monthly", "yearly", "annually", "quarterly",
    "semiannually", "semi-annually", "biannually", "bi-annually", "DAILY", "Weekly",
    "daily UTC", "hourly Europe/Berlin", "weekly America/New_York", "monthly Asia/Kathmandu",
    "quarterly Pacific/Chatham", "yearly Australia/Lord_Howe",
    # times
    "12:00", "9:5", "00:00:00", "23:59:59", "*:0/5", "*:0/15", "*:00/20", "*:*:0/10", "*:30",
    "0/2:00", "8..18:00", "8..18/2:30", "*:0,15,30,45", "*:*", "*:*:*", "*:5..10", "3,15:0/30",
    # dates
    "*-*-01", "*-*-31", "*-02-29", "*-02-30", "*-04-31", "2024-02-29", "2025-02-29", "*-01-01 00:00",
    "2030-12-31 23:59:59", "2199-12-31 23:59:59", "2025..2027-06-15", "2024/4-02-29", "26-07-04",
    "99-12-31", "*-1..3-1", "*-*-1/7", "*-*-5..25/5", "*-6..8-*", "*-*-* 12:00", "*-12-25 08:00",
    # end of month ('~'): last day, n-th last day, ranges and repetitions from the end
    "*-*~01", "*-*~1", "*-*~03", "*-02~01", "*-02~28", "*-*~7/2", "*-*~1..3", "*-*~5..1",
    "*-*~28", "2024-02~01 12:00", "*-01,03~02", "Fri *-*~7/1",
    # weekdays
    "Mon", "Mon *-*-* 09:00", "Mon..Fri 09:00", "Mon-Fri 09:00", "Sat,Sun 10:00", "mon,wed,fri 0/4:00",
    "Monday..Wednesday", "Sun *-*-1..7 03:00", "Fri *-*-13", "Sat,Sun *-*~1..7 00:00", "Tue..Thu *:0/30",
    "Mon,Tue,Wed,Thu,Fri,Sat,Sun", "Sat..Sun 23:59:59", "Wed *-02-29", "Mon *-02-30",
    # seconds: fractions and repetitions
    "*:*:0.5", "*:*:0/0.5", "*:*:1.25", "*:*:30.000001", "*:*:0..59/7", "*:*:59", "*:*:0.1234567",
    "*:*:0/30", "*:*:10..20",
    # @epoch and years
    "@1700000000", "@0", "@2000000000", "2026", "2026-*-* 00:00", "1970-01-01 00:00:00",
    "2020-01-01", "2025/1-1-1",
    # DST: times inside the gaps and repeats of each zone, and around them
    "*-*-* 02:30 Europe/Berlin", "*-*-* 02:00 Europe/Berlin", "*-*-* 03:00 Europe/Berlin",
    "*-*-* 01:59:59 Europe/Berlin", "*-*-* 02:00..03:00/15 Europe/Berlin", "*-03-29 02:30 Europe/Berlin",
    "*-10-25 02:30 Europe/Berlin", "*:0/15 Europe/Berlin", "*:0/15 America/New_York",
    "*-*-* 02:30 America/New_York", "*-*-* 01:30 America/New_York", "*-*-* 01:45 Australia/Lord_Howe",
    "*-*-* 02:15 Australia/Lord_Howe", "*:0/10 Australia/Lord_Howe", "*-*-* 02:30", "*-*-* 01:30",
    "*-*-* 02:00..02:59", "*-*-* 00:30 Asia/Kathmandu", "*-*-* 00:00 Pacific/Chatham",
    "*-*-* 02:45 Pacific/Chatham", "*-*-* 12:00 America/St_Johns", "*-*-* 00:00 Africa/Casablanca",
    "*-*-* 02:30 Europe/London", "*-*-* 01:30 Europe/London", "*-*-* 12:00 UTC", "Mon 00:00 UTC",
    "*-*-* 23:30 Asia/Tokyo", "*-*-* 00:00 America/Sao_Paulo", "*-*-* 00:00 America/Santiago",
]  # fmt: skip

SEED = 20261202
GENERATED_COUNT = 300

_YEARS = ["*"] * 6 + ["2025", "2026", "2024..2028", "2024/2", "2025,2027", "2026..2030/2", "27"]
_MONTHS = ["*"] * 6 + ["1", "02", "3..9", "1/3", "01,07", "2..11/3", "12", "6,12"]
_DAYS = ["*"] * 6 + ["1", "15", "29", "30", "31", "1..7", "1/10", "10..20/5", "28,29,30,31", "13"]
_EOM_DAYS = ["1", "2", "1..3", "7/2", "5..1", "10"]
_HOURS = ["*"] * 3 + ["0", "2", "3", "9", "0/6", "8..18", "9..17/4", "1,13", "23", "0..5/2"]
_MINUTES = ["*"] * 2 + ["0", "00", "30", "0/15", "5/20", "0..59/10", "15,45", "59", "1..3"]
_SECONDS = [None] * 6 + ["00", "30", "0/20", "*", "0.5", "10..50/20", "59", "0/0.25"]
_WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
_GEN_ZONES = [""] * 6 + [" UTC", " Europe/Berlin", " America/New_York", " Australia/Lord_Howe", " Asia/Kathmandu"]
_SHORTHANDS = ["minutely", "hourly", "daily", "weekly", "monthly", "yearly", "quarterly", "semiannually"]


def _weekdays(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return ""
    if roll < 0.8:
        return ",".join(sorted(rng.sample(_WEEKDAYS, rng.randint(1, 3)), key=_WEEKDAYS.index)) + " "
    a, b = sorted(rng.sample(range(7), 2))
    return f"{_WEEKDAYS[a]}..{_WEEKDAYS[b]} "


def _one(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return rng.choice(_SHORTHANDS) + rng.choice(_GEN_ZONES)
    date = ""
    if rng.random() < 0.7:
        if rng.random() < 0.15:
            date = f"{rng.choice(_YEARS)}-{rng.choice(_MONTHS)}~{rng.choice(_EOM_DAYS)} "
        else:
            date = f"{rng.choice(_YEARS)}-{rng.choice(_MONTHS)}-{rng.choice(_DAYS)} "
    time = f"{rng.choice(_HOURS)}:{rng.choice(_MINUTES)}"
    seconds = rng.choice(_SECONDS)
    if seconds is not None:
        time += f":{seconds}"
    return (_weekdays(rng) + date + time + rng.choice(_GEN_ZONES)).strip()


def _accepted(spec: str) -> bool:
    try:
        parse_calendar(spec)
    except ValueError:
        return False
    return True


@functools.cache
def generated() -> tuple[str, ...]:
    """GENERATED_COUNT distinct expressions jobgen accepts, always the same ones (fixed seed)."""
    rng = random.Random(SEED)
    out: dict[str, None] = {}
    while len(out) < GENERATED_COUNT:
        spec = _one(rng)
        if spec not in EDGE_CASES and _accepted(spec):
            out[spec] = None
    return tuple(out)


def corpus() -> tuple[str, ...]:
    return tuple(EDGE_CASES) + generated()


# --------------------------------------------------------------------------- both sides


@dataclasses.dataclass(frozen=True)
class Answer:
    normalized: str
    elapses: tuple[str, ...]  # "Wed 2025-01-01 00:00:00 UTC"; empty for never


def _utc_text(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%a %Y-%m-%d %H:%M:%S UTC")


def jobgen_answer(spec: str, base: str, zone: str, new_year_fix: bool = False) -> Answer | None:
    try:
        cal = parse_calendar(spec)
    except ValueError:
        return None
    if cal.timezone is None and zone != "UTC":
        cal = cal.replace(timezone=zone)  # systemd: the local zone (TZ=)
    start = datetime.fromisoformat(base).replace(tzinfo=timezone.utc)
    elapses = cal.next_elapses(start, ITERATIONS, new_year_fix=new_year_fix)
    return Answer(parse_calendar(spec).normalized, tuple(_utc_text(t) for t in elapses))


def systemd_answers(analyzer: sdanalyze.Analyzer, specs: tuple[str, ...], base: str, zone: str) -> list[Answer | None]:
    """One `systemd-analyze calendar` for every spec, with TZ=zone; elapses read in UTC.

    A table per accepted spec and an empty line after each spec, accepted or not
    (analyze-calendar.c), so blocks split on empty lines line up with the specs (a refused
    spec is an empty block)."""
    proc = subprocess.run(
        [*analyzer._argv(None), "calendar", f"--base-time={base} UTC", f"--iterations={ITERATIONS}", "--", *specs],
        env={**sdanalyze.BASE_ENV, "TZ": zone, "LC_ALL": "C"}, cwd="/", stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    blocks: list[list[str]] = [[]]
    for line in proc.stdout.splitlines():
        if line.strip():
            blocks[-1].append(line)
        else:
            blocks.append([])
    if len(blocks) == len(specs) + 1 and blocks[-1] == []:
        blocks.pop()  # the output ended with an empty line
    assert len(blocks) == len(specs), proc.stdout[-2000:] + proc.stderr[-2000:]
    out: list[Answer | None] = []
    for block in blocks:
        if not block:
            out.append(None)
            continue
        parsed = sdanalyze.parse_calendar(0, "\n".join(block))
        elapses = () if parsed.elapses == ["never"] else tuple(parsed.elapses)
        out.append(Answer(parsed.normalized or "", elapses))
    return out


def _analyzer(major: int) -> sdanalyze.Analyzer:
    analyzer = sdanalyze.versioned_analyzer(major)
    if analyzer is None:
        pytest.skip(sdanalyze.missing_reason(major))
    return analyzer


# --------------------------------------------------------------------------- tests


def test_the_corpus_is_large_and_fixed():
    specs = corpus()
    assert len([s for s in specs if _accepted(s)]) >= 400 and len(set(specs)) == len(specs)
    assert generated() == generated.__wrapped__()  # the seed makes it the same every run


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("release", RELEASES)
def test_next_20_elapses_match_systemd(release, base, zone):
    specs = corpus()
    theirs = systemd_answers(_analyzer(release), specs, base, zone)
    ours = [jobgen_answer(spec, base, zone, RELEASES[release]) for spec in specs]
    differ = [(spec, o, t) for spec, o, t in zip(specs, ours, theirs) if o != t]
    assert differ == [], f"{len(differ)} of {len(specs)} differ; first: {differ[:3]}"
