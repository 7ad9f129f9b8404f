"""jobgen.compiler.timespec against its tables and against the host's real systemd-analyze.

Each table row is one behaviour: an input and what jobgen must say about it. The same rows are then
fed to `systemd-analyze calendar|timespan` (batched: one process per table), which must agree on
accept/reject, on the normalized form and on the next 5 elapses. Hypothesis adds random inputs.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobgen.compiler.timespec import (
    USEC_INFINITY,
    format_timespan,
    parse_calendar,
    parse_timespan,
    seconds_ceiling,
)

BASE = datetime(2025, 1, 1, tzinfo=timezone.utc)
ITERATIONS = 5


@dataclass(frozen=True)
class Err:
    """The input is refused; the message must contain this fragment."""

    fragment: str


S, MIN, H, D = 1_000_000, 60_000_000, 3_600_000_000, 86_400_000_000

# (input, normalized form systemd prints | Err(fragment of jobgen's message))
CALENDAR_CASES = [
    # shorthands (case-insensitive)
    ("minutely", "*-*-* *:*:00"),
    ("hourly", "*-*-* *:00:00"),
    ("daily", "*-*-* 00:00:00"),
    ("DAILY", "*-*-* 00:00:00"),
    ("weekly", "Mon *-*-* 00:00:00"),
    ("monthly", "*-*-01 00:00:00"),
    ("yearly", "*-01-01 00:00:00"),
    ("annually", "*-01-01 00:00:00"),
    ("quarterly", "*-01,04,07,10-01 00:00:00"),
    ("semiannually", "*-01,07-01 00:00:00"),
    ("semi-annually", "*-01,07-01 00:00:00"),
    ("minutely Europe/Berlin", "*-*-* *:*:00 Europe/Berlin"),
    # times
    ("12:00", "*-*-* 12:00:00"),
    ("9:5", "*-*-* 09:05:00"),
    ("*-*-* 02:30:00", "*-*-* 02:30:00"),
    ("*-*-*  12:00", "*-*-* 12:00:00"),
    ("*:0/5", "*-*-* *:00/5:00"),
    ("*:0/15", "*-*-* *:00/15:00"),
    ("0/6:00", "*-*-* 00/6:00:00"),
    ("*-*-* 8..18:00", "*-*-* 08..18:00:00"),
    ("*-*-* 8..18/2:00", "*-*-* 08..18/2:00:00"),
    ("*-*-* 8..17/2:30", "*-*-* 08..16/2:30:00"),  # stop trimmed to a whole repetition
    ("*-*-* 1..3/5:00", "*-*-* 01:00:00"),  # a repetition that never fires is dropped
    ("*-*-* 5..5:00", "*-*-* 05:00:00"),
    ("*-*-* 12,6,12:00", "*-*-* 06,12:00:00"),  # sorted, duplicates dropped
    ("*:*:0/15", "*-*-* *:*:00/15"),
    ("*:*:30.5", "*-*-* *:*:30.500000"),
    ("*:*:0.25/0.5", "*-*-* *:*:00.250000/0.500000"),
    ("*:*:1.1234567", "*-*-* *:*:01.123457"),  # 6 decimals, rounded on the 7th
    ("*:*:*", "*-*-* *:*:*"),
    ("*:*:0/1,5", "*-*-* *:*:*"),  # one element covering every second makes the chain '*'
    # weekdays
    ("Mon", "Mon *-*-* 00:00:00"),
    ("monday 12:00", "Mon *-*-* 12:00:00"),
    ("Mon..Fri 09:00", "Mon..Fri *-*-* 09:00:00"),
    ("Mon-Fri 09:00", "Mon..Fri *-*-* 09:00:00"),  # old '-' range syntax
    ("Sat,Sun 10:00", "Sat,Sun *-*-* 10:00:00"),
    ("Mon,Wed,Fri 8:00", "Mon,Wed,Fri *-*-* 08:00:00"),
    ("Mon..Wed,Fri *-*-* 8:00", "Mon..Wed,Fri *-*-* 08:00:00"),
    ("Thu,Mon", "Mon,Thu *-*-* 00:00:00"),
    ("Mon..Sun 06:00", "*-*-* 06:00:00"),  # every day: no weekday part
    ("Mon, 12:00", "Mon *-*-* 12:00:00"),  # a trailing comma is allowed
    ("Mon *-*-* *:0/30", "Mon *-*-* *:00/30:00"),
    ("Mon *-*-1..7 06:00", "Mon *-*-01..07 06:00:00"),  # first Monday of the month
    ("Fri *-*-13", "Fri *-*-13 00:00:00"),
    ("Mon..Fri 9-17", "Mon..Fri *-09-17 00:00:00"),  # systemd reads 9-17 as September 17th
    # dates
    ("2025-06-15", "2025-06-15 00:00:00"),
    ("2025-01-01 ", "2025-01-01 00:00:00"),
    ("25-06-15 12:00", "2025-06-15 12:00:00"),  # two-digit years
    ("99-01-01", "1999-01-01 00:00:00"),  # never elapses after 2025
    ("06-15", "*-06-15 00:00:00"),
    ("*-*-1,15 03:00", "*-*-01,15 03:00:00"),
    ("*-*-31", "*-*-31 00:00:00"),
    ("*-2-29 12:00", "*-02-29 12:00:00"),
    ("*-02-30", "*-02-30 00:00:00"),  # valid, never elapses
    ("2025..2027-01-01", "2025..2027-01-01 00:00:00"),
    ("2025,2027-*-01", "2025,2027-*-01 00:00:00"),
    ("@1767225600", "2026-01-01 00:00:00 UTC"),
    # '~': days counted from the end of the month
    ("*-*~1", "*-*~01 00:00:00"),
    ("*-02~1..3", "*-02~01..03 00:00:00"),
    ("*-*~07/1", "*-*~07/1 00:00:00"),
    ("*-*~1,25", "*-*~01,25 00:00:00"),
    ("*-*~*", "*-*-* 00:00:00"),
    # time zones
    ("*-*-* 12:00 UTC", "*-*-* 12:00:00 UTC"),
    ("daily utc", "*-*-* 00:00:00 UTC"),
    ("12:00 Europe/Berlin", "*-*-* 12:00:00 Europe/Berlin"),
    ("Mon..Fri 9:30 America/New_York", "Mon..Fri *-*-* 09:30:00 America/New_York"),
    ("*-*-* 00:00:00 Etc/UTC", "*-*-* 00:00:00 Etc/UTC"),
    ("12:00 Asia/Kolkata", "*-*-* 12:00:00 Asia/Kolkata"),
    ("12:00 Etc/GMT-2", "*-*-* 12:00:00 Etc/GMT-2"),
    ("*-03-30 02:30 Europe/Berlin", "*-03-30 02:30:00 Europe/Berlin"),  # in the 2025 DST gap
    ("*-10-26 02:30 Europe/Berlin", "*-10-26 02:30:00 Europe/Berlin"),  # twice on 2025-10-26
    ("*-03-30 00/1:15 Europe/Berlin", "*-03-30 00/1:15:00 Europe/Berlin"),
    # refused
    ("", Err("empty expression")),
    ("every tuesday-ish", Err("expected a number or '*' for the date")),
    ("25:00", Err("hour 25 is out of range 0..23")),
    ("*-*-* 12:60", Err("minute 60 is out of range 0..59")),
    ("*-*-* 12:00:60", Err("second 60 is out of range 0..59.999999")),
    ("12", Err("expected ':' after the hour")),
    ("Mon 25:00", Err("hour 25 is out of range")),
    ("*-*-* 12:00:00:00", Err("unexpected text after the seconds")),
    ("12.5:00", Err("unexpected character in the date")),
    ("Mon-", Err("weekday range has no end")),
    ("Fri..Mon", Err("weekday range goes backwards")),
    ("Mon.Tue", Err("weekday ranges are written '..'")),
    ("Mo 12:00", Err("expected a number or '*' for the date")),
    ("Mon..Wed..Fri", Err("weekday range inside a range")),
    ("*/5:00", Err("'*/N' is not valid for the date; write '0/N'")),
    ("*:*:0..0.5", Err("a seconds range shorter than 1s needs an explicit /repetition")),
    ("*:0/60", Err("minute repetition /60 is larger than the range 0..59")),
    ("*:30/30", Err("minute 30/30 never repeats inside 0..59")),
    ("*:0/0", Err("minute repetition must not be 0")),
    ("*-*-* 5..3:00", Err("hour range 5..3 is empty or backwards")),
    ("*-*~29", Err("day counted from the end of the month 29 is out of range 1..28")),
    ("*-*~1,28", Err("28 is out of range 1..25")),  # systemd's bound shrinks per list element
    ("*-*~1/2", Err("never repeats inside the month")),
    ("*-13-01", Err("month 13 is out of range 1..12")),
    ("*-02-32", Err("day 32 is out of range 1..31")),
    ("1969-01-01", Err("year 1969 is out of range 1970..2199")),
    ("2200-01-01", Err("year 2200 is out of range 1970..2199")),
    ("daily Europe/Nowhere", Err("unknown time zone 'Europe/Nowhere'")),
    ("12:00 europe/berlin", Err("unknown time zone 'europe/berlin'")),
    ("daily ", Err("expected a number or '*' for the date")),
    ("@", Err("expected seconds since the epoch after '@'")),
]

# Next elapses after 2025-01-01 00:00:00 UTC, as systemd-analyze prints them (TZ=UTC).
ELAPSE_CASES = [
    ("Mon..Fri 09:00", ["Wed 2025-01-01 09:00:00", "Thu 2025-01-02 09:00:00",
                        "Fri 2025-01-03 09:00:00", "Mon 2025-01-06 09:00:00",
                        "Tue 2025-01-07 09:00:00"]),
    ("*-*~1", ["Fri 2025-01-31 00:00:00", "Fri 2025-02-28 00:00:00", "Mon 2025-03-31 00:00:00",
               "Wed 2025-04-30 00:00:00", "Sat 2025-05-31 00:00:00"]),
    ("*-02-29 12:00", ["Tue 2028-02-29 12:00:00", "Sun 2032-02-29 12:00:00",
                       "Fri 2036-02-29 12:00:00", "Wed 2040-02-29 12:00:00",
                       "Mon 2044-02-29 12:00:00"]),
    ("12:00 Europe/Berlin", ["Wed 2025-01-01 11:00:00", "Thu 2025-01-02 11:00:00",
                             "Fri 2025-01-03 11:00:00", "Sat 2025-01-04 11:00:00",
                             "Sun 2025-01-05 11:00:00"]),
    # 2025-03-30 02:30 does not exist in Berlin (clocks jump 02:00 -> 03:00): skipped.
    ("*-03-30 02:30 Europe/Berlin", ["Mon 2026-03-30 00:30:00", "Tue 2027-03-30 00:30:00",
                                     "Thu 2028-03-30 00:30:00", "Fri 2029-03-30 00:30:00",
                                     "Sat 2030-03-30 01:30:00"]),
    # 2025-10-26 02:30 happens twice in Berlin: the first one (CEST) counts.
    ("*-10-26 02:30 Europe/Berlin", ["Sun 2025-10-26 00:30:00", "Mon 2026-10-26 01:30:00",
                                     "Tue 2027-10-26 00:30:00", "Thu 2028-10-26 00:30:00",
                                     "Fri 2029-10-26 00:30:00"]),
    ("*-02-30", []),
]  # fmt: skip

# Around the 2025 Berlin DST changes: (base time, spec, next elapses in UTC).
SPRING = datetime(2025, 3, 30, tzinfo=timezone.utc)
AUTUMN = datetime(2025, 10, 25, 23, tzinfo=timezone.utc)
DST_CASES = [
    # 02:00 CET does not exist on 03-30: 01:00Z is 03:00 CEST.
    (SPRING, "hourly Europe/Berlin", ["Sun 2025-03-30 01:00:00", "Sun 2025-03-30 02:00:00"]),
    (SPRING, "02:30 Europe/Berlin", ["Mon 2025-03-31 00:30:00", "Tue 2025-04-01 00:30:00"]),
    # 02:00..02:59 happens twice on 10-26; only the first (CEST) pass fires.
    (AUTUMN, "hourly Europe/Berlin", ["Sun 2025-10-26 00:00:00", "Sun 2025-10-26 02:00:00"]),
    (AUTUMN, "*-*-* 2:0/20 Europe/Berlin", ["Sun 2025-10-26 00:00:00", "Sun 2025-10-26 00:20:00",
                                            "Sun 2025-10-26 00:40:00", "Mon 2025-10-27 01:00:00"]),
    (AUTUMN, "hourly Australia/Lord_Howe", ["Sun 2025-10-26 00:00:00", "Sun 2025-10-26 01:00:00"]),
]

# (input, microseconds | Err(fragment))
TIMESPAN_CASES = [
    ("5min", 5 * MIN),
    ("1h 30min", 90 * MIN),
    ("2min30s", 150 * S),
    ("1.5h", 90 * MIN),
    ("90", 90 * S),  # a bare number is seconds
    ("1.5", 1_500_000),
    (".5s", 500_000),
    ("0", 0),
    ("1h30", H + 30 * S),  # the unit-less tail is seconds too
    ("1 h", H),
    ("  5s  ", 5 * S),
    ("+5s", 5 * S),
    ("2 weeks", 14 * D),
    ("3d", 3 * D),
    ("500ms", 500_000),
    ("500msec", 500_000),
    ("10us", 10),
    ("10usec", 10),
    ("5\u00b5s", 5),  # MICRO SIGN
    ("5\u03bcs", 5),  # GREEK SMALL LETTER MU
    ("1M", 2_629_800 * S),  # a month is 30.44 days
    ("1month", 2_629_800 * S),
    ("1y", 31_557_600 * S),  # a year is 365.25 days
    ("1years 2months", 31_557_600 * S + 2 * 2_629_800 * S),
    ("1.5M", 3_944_700 * S),
    ("1hr", H),
    ("0.3333333333min", 19_999_998),  # each decimal digit is truncated separately, like systemd
    ("1.0000001s", S),
    ("12.34 .56", 12_900_000),  # systemd reads '.56' as a second number
    ("", Err("empty time span")),
    ("   ", Err("empty time span")),
    ("5x", Err("unknown unit 'x' in '5x'")),
    ("5secs", Err("unknown unit 'secs' in '5secs'")),
    ("1H", Err("unknown unit 'H' in '1H'")),
    ("-5s", Err("negative time span in '-5s'")),
    ("5s -1s", Err("negative time span")),
    ("1.2.3", Err("a second '.' in one number")),
    ("3.s", Err("missing digits after '.'")),
    ("5 minutes ago", Err("expected a number at 'ago'")),
    ("99999999999999999999", Err("number too large")),
    ("999999999999y", Err("time span too large")),
    ("infinity", Err("'infinity' is not allowed here")),
]

# (microseconds, canonical text jobgen writes into unit files)
FORMAT_CASES = [
    (0, "0"),
    (5 * MIN, "5min"),
    (90 * MIN, "1h 30min"),
    (2_500_000, "2s 500ms"),
    (1, "1us"),
    (D + H + MIN + S + 1001, "1d 1h 1min 1s 1ms 1us"),
    (14 * D, "2w"),
    (2_629_800 * S, "1month"),
    (31_557_600 * S + 7 * D, "1y 1w"),
    (USEC_INFINITY, "infinity"),
]


# ------------------------------------------------------------------------------------------------
# jobgen against its own tables (no systemd needed)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), CALENDAR_CASES, ids=repr)
def test_calendar(text, expected):
    if isinstance(expected, Err):
        with pytest.raises(ValueError, match=re.escape(expected.fragment)):
            parse_calendar(text)
    else:
        assert parse_calendar(text).normalized == expected


@pytest.mark.parametrize(("text", "expected"), ELAPSE_CASES, ids=repr)
def test_next_elapses(text, expected):
    got = parse_calendar(text).next_elapses(BASE, ITERATIONS)
    assert [_systemd_timestamp(t) for t in got] == [e + " UTC" for e in expected]


@pytest.mark.parametrize(("base", "text", "expected"), DST_CASES, ids=repr)
def test_next_elapses_across_dst(base, text, expected):
    got = parse_calendar(text).next_elapses(base, len(expected))
    assert [_systemd_timestamp(t) for t in got] == [e + " UTC" for e in expected]


@pytest.mark.parametrize(
    ("text", "timezone_", "requires"),
    [("daily", None, None), ("daily UTC", "UTC", 228), ("@0", "UTC", 228),
     ("12:00 Europe/Berlin", "Europe/Berlin", 235), ("12:00 Etc/UTC", "Etc/UTC", 235)],
)  # fmt: skip
def test_calendar_timezone(text, timezone_, requires):
    cal = parse_calendar(text)
    assert (cal.timezone, cal.requires_systemd) == (timezone_, requires)


def test_fractional_elapses_keep_microseconds():
    got = parse_calendar("*:*:0.5/0.25").next_elapses(BASE, 3)
    assert [t.isoformat() for t in got] == [
        "2025-01-01T00:00:00.500000+00:00",
        "2025-01-01T00:00:00.750000+00:00",
        "2025-01-01T00:00:01+00:00",
    ]


def test_next_elapses_needs_an_aware_datetime():
    with pytest.raises(ValueError, match="timezone-aware"):
        parse_calendar("daily").next_elapses(datetime(2025, 1, 1), 1)


@pytest.mark.parametrize(("text", "expected"), TIMESPAN_CASES, ids=repr)
def test_timespan(text, expected):
    if isinstance(expected, Err):
        with pytest.raises(ValueError, match=re.escape(expected.fragment)):
            parse_timespan(text)
    else:
        assert parse_timespan(text) == expected


def test_infinity_only_when_allowed():
    assert parse_timespan(" infinity ", allow_infinity=True) == USEC_INFINITY
    with pytest.raises(ValueError, match="unexpected '5s' after 'infinity'"):
        parse_timespan("infinity 5s", allow_infinity=True)


@pytest.mark.parametrize(("usec", "text"), FORMAT_CASES, ids=repr)
def test_format_timespan(usec, text):
    assert format_timespan(usec) == text
    assert parse_timespan(text, allow_infinity=True) == usec


@pytest.mark.parametrize(("usec", "seconds"), [(0, 0), (1, 1), (S, 1), (S + 1, 2), (90 * S, 90)])
def test_seconds_ceiling(usec, seconds):
    assert seconds_ceiling(usec) == seconds


# ------------------------------------------------------------------------------------------------
# systemd-analyze as the oracle
# ------------------------------------------------------------------------------------------------

SYSTEMD_ANALYZE = shutil.which("systemd-analyze") or "/usr/bin/systemd-analyze"
needs_systemd = pytest.mark.skipif(
    not os.access(SYSTEMD_ANALYZE, os.X_OK),
    reason="systemd-analyze not found: install the `systemd` package (apt-get install systemd)",
)
# UTC so elapses print in UTC; C locale for English weekday names; wide columns so the table
# never ellipsizes a long spec; no colours, no pager.
_ENV = {**os.environ, "TZ": "UTC", "LC_ALL": "C", "COLUMNS": "2000",
        "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": "cat"}  # fmt: skip


@dataclass(frozen=True)
class Analyzed:
    normalized: str
    elapses: tuple[str, ...]  # "Wed 2025-01-01 00:05:00 UTC" ...; empty for "never"


_ROW = re.compile(r"^\s*(Original form|Normalized form|Next elapse|Iter\. #\d+|From now"
                  r"|\(in UTC\)): (.*?)\s*$")  # fmt: skip


def systemd_calendar(specs: tuple[str, ...], base: datetime = BASE,
                     iterations: int = ITERATIONS) -> list[Analyzed | None]:
    """One `systemd-analyze calendar` run for all specs; None where systemd refuses a spec.

    systemd prints a table per accepted spec, nothing for a refused one, and one empty line
    between specs either way (analyze-calendar.c), so empty lines count the specs."""
    proc = subprocess.run(
        [SYSTEMD_ANALYZE, "calendar", f"--base-time={base:%Y-%m-%d %H:%M:%S} UTC",
         f"--iterations={iterations}", "--", *specs],
        capture_output=True, text=True, env=_ENV, check=False,
    )  # fmt: skip
    assert "Failed to determine next elapse" not in proc.stderr, proc.stderr
    blocks: list[list[tuple[str, str]]] = [[]]
    for line in proc.stdout.splitlines():
        if not line.strip():
            blocks.append([])
            continue
        m = _ROW.match(line)
        assert m, f"unexpected systemd-analyze line {line!r}"
        blocks[-1].append((m.group(1), m.group(2)))
    assert len(blocks) == len(specs), proc.stdout
    out: list[Analyzed | None] = []
    for rows in blocks:
        if not rows:
            out.append(None)
            continue
        values = dict(rows)
        elapses = tuple(v for k, v in rows if k == "Next elapse" or k.startswith("Iter."))
        out.append(Analyzed(values["Normalized form"], () if elapses == ("never",) else elapses))
    return out


def systemd_timespan(spans: tuple[str, ...]) -> list[int | None]:
    """`systemd-analyze timespan` stops at the first span it refuses, so run again after it."""
    out: list[int | None] = []
    rest = list(spans)
    while rest:
        proc = subprocess.run([SYSTEMD_ANALYZE, "timespan", "--", *rest],
                              capture_output=True, text=True, env=_ENV, check=False)  # fmt: skip
        values = [int(v) for v in re.findall(r"^\s*\S+s: (\d+)\s*$", proc.stdout, re.M)]
        out.extend(values)
        rest = rest[len(values) :]
        if proc.returncode != 0:
            assert rest, proc.stderr
            out.append(None)
            rest = rest[1:]
    return out


def _systemd_timestamp(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%a %Y-%m-%d %H:%M:%S UTC")


def jobgen_calendar(spec: str) -> Analyzed | None:
    try:
        cal = parse_calendar(spec)
    except ValueError:
        return None
    elapses = cal.next_elapses(BASE, ITERATIONS)
    return Analyzed(cal.normalized, tuple(_systemd_timestamp(t) for t in elapses))


@functools.cache
def _systemd_table() -> dict[str, Analyzed | None]:
    specs = tuple(text for text, _ in CALENDAR_CASES)
    return dict(zip(specs, systemd_calendar(specs)))


@needs_systemd
@pytest.mark.parametrize("text", [text for text, _ in CALENDAR_CASES], ids=repr)
def test_calendar_agrees_with_systemd(text):
    assert jobgen_calendar(text) == _systemd_table()[text]


@needs_systemd
def test_elapse_table_agrees_with_systemd():
    got = systemd_calendar(tuple(text for text, _ in ELAPSE_CASES))
    assert [a.elapses for a in got] == [tuple(e + " UTC" for e in exp) for _, exp in ELAPSE_CASES]


@needs_systemd
@pytest.mark.parametrize(("base", "text", "expected"), DST_CASES, ids=repr)
def test_dst_table_agrees_with_systemd(base, text, expected):
    (got,) = systemd_calendar((text,), base, len(expected))
    assert list(got.elapses) == [e + " UTC" for e in expected]


@needs_systemd
def test_timespans_agree_with_systemd():
    spans = tuple(text for text, _ in TIMESPAN_CASES)
    expected = []
    for text in spans:
        try:
            expected.append(parse_timespan(text, allow_infinity=True))
        except ValueError:
            expected.append(None)
    assert dict(zip(spans, systemd_timespan(spans))) == dict(zip(spans, expected))


@needs_systemd
def test_formatted_spans_parse_back_in_systemd():
    values = [usec for usec, _ in FORMAT_CASES if usec != USEC_INFINITY]
    assert systemd_timespan(tuple(format_timespan(v) for v in values)) == values


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------

_UNITS = ["us", "usec", "ms", "msec", "s", "sec", "second", "seconds", "m", "min", "minute",
          "minutes", "h", "hr", "hour", "hours", "d", "day", "days", "w", "week", "weeks",
          "M", "month", "months", "y", "year", "years", ""]  # fmt: skip
_span_part = st.builds(
    lambda n, frac, space, unit: f"{n}{frac}{space}{unit}",
    st.integers(0, 10_000),
    st.sampled_from(["", ".5", ".25", ".123456", ".0000001"]),
    st.sampled_from(["", " "]),
    st.sampled_from(_UNITS),
)
spans = st.lists(_span_part, min_size=1, max_size=4).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(spans)
def test_format_of_parse_round_trips(text):
    usec = parse_timespan(text)
    assert parse_timespan(format_timespan(usec)) == usec


@needs_systemd
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 2**48), min_size=20, max_size=20))
def test_systemd_parses_formatted_spans_to_the_same_value(values):
    assert systemd_timespan(tuple(format_timespan(v) for v in values)) == values


@needs_systemd
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(spans, min_size=20, max_size=20))
def test_span_values_agree_with_systemd(texts):
    assert systemd_timespan(tuple(texts)) == [parse_timespan(t) for t in texts]


# A grammar close to systemd.time(7) that also produces near misses (out of range values, bad
# separators, unknown zones), so both accept and reject paths get exercised.
_num = st.integers(0, 70).map(str) | st.sampled_from(["00", "7", "23", "24", "31", "59", "60"])
_sec = _num | st.sampled_from(["0.5", "1.25", "30.000001", "0.1234567"])


def _component(number):
    return st.one_of(
        number,
        st.builds(lambda a, b: f"{a}..{b}", number, number),
        st.builds(lambda a, r: f"{a}/{r}", number, number),
        st.builds(lambda a, b, r: f"{a}..{b}/{r}", number, number, number),
    )


def _chain(number, star=True):
    items = st.lists(_component(number), min_size=1, max_size=3).map(",".join)
    return (st.just("*") | items) if star else items


_year = st.sampled_from(["*", "2025", "2026..2030", "2024/2", "25", "1969", "2199"]) | _chain(
    st.integers(2020, 2040).map(str), star=False
)
_weekday = st.sampled_from(["Mon", "Tue", "wed", "Thursday", "Fri", "Sat", "Sun", "Mo"])
_weekdays = st.one_of(
    st.just(""),
    st.lists(_weekday, min_size=1, max_size=3).map(lambda d: ",".join(d) + " "),
    st.builds(lambda a, b: f"{a}..{b} ", _weekday, _weekday),
    st.builds(lambda a, b: f"{a}-{b} ", _weekday, _weekday),
)
_date = st.one_of(
    st.just(""),
    st.builds(lambda m, sep, d: f"{m}{sep}{d} ", _chain(_num), st.sampled_from("-~"), _chain(_num)),
    st.builds(lambda y, m, sep, d: f"{y}-{m}{sep}{d} ", _year, _chain(_num),
              st.sampled_from("-~"), _chain(_num)),
)  # fmt: skip
_time = st.one_of(
    st.just(""),
    st.builds(lambda h, m: f"{h}:{m}", _chain(_num), _chain(_num)),
    st.builds(lambda h, m, s: f"{h}:{m}:{s}", _chain(_num), _chain(_num), _chain(_sec)),
)
_zone = st.sampled_from(["", "", "", " UTC", " Europe/Berlin", " America/New_York",
                         " Australia/Lord_Howe", " Mars/Base"])
_shorthand = st.sampled_from(["minutely", "hourly", "daily", "weekly", "monthly", "yearly",
                              "quarterly", "semiannually", "Biannually", "fortnightly"])
calendar_specs = st.one_of(
    st.builds(lambda w, d, t, z: (w + d + t).rstrip(" ") + z, _weekdays, _date, _time, _zone),
    st.builds(lambda s, z: s + z, _shorthand, _zone),
).filter(bool)


@needs_systemd
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(calendar_specs, min_size=25, max_size=25))
def test_random_calendar_specs_agree_with_systemd(specs):
    assert [jobgen_calendar(s) for s in specs] == systemd_calendar(tuple(specs))


# ----------------------------------------------------------------------------- bounded search
# What `jobgen check` and jobgen-generator ask of an expression, under jobgen's bounds
# (timespec.search): one behaviour per row, then the loops held to real systemd-analyze.

from jobgen.compiler import timespec  # noqa: E402
from support import sdanalyze  # noqa: E402


@pytest.fixture(autouse=False)
def fresh_searches(monkeypatch):
    monkeypatch.setattr(timespec, "_SEARCHES", {})


@pytest.mark.parametrize(("spec", "never", "loop_after"), [
    ("daily", False, None),
    ("*-*-* 02:30 Europe/Berlin", False, None),  # a DST gap: skipped, but computable
    ("*-02-30 12:00", True, None),  # no year has Feb 30
    ("Mon *-02-30 02:13:07 Europe/Berlin", True, None),
    ("Sun 2100..2199-02-29 03:04:05 Pacific/Apia", False, None),  # slow, but it elapses (2128)
    # systemd 252 and 257 give up on these from the very starts listed (held to them below).
    ("*-01/5-01 00:00:00 Europe/Berlin", False, datetime(2026, 11, 1, tzinfo=timezone.utc)),
    ("*-*-* 00/7:00:00 Europe/Berlin", False, datetime(2026, 3, 28, 20, tzinfo=timezone.utc)),
])  # fmt: skip
def test_search_finds_never_and_loops(fresh_searches, spec, never, loop_after):
    found = timespec.search(parse_calendar(spec), timespec.Steps(timespec.MANIFEST_STEPS))
    assert (found.never, found.loop and found.loop.after, found.spent) == (never, loop_after, None)
    assert 0 < found.steps <= timespec.EXPRESSION_STEPS


@pytest.mark.parametrize("major", [252, 257])
def test_where_search_reports_a_loop_real_systemd_gives_up_too(major):
    analyzer = sdanalyze.versioned_analyzer(major)
    if analyzer is None:
        pytest.skip(sdanalyze.missing_reason(major))
    for spec in ("*-01/5-01 00:00:00 Europe/Berlin", "*-*-* 00/7:00:00 Europe/Berlin"):
        loop = timespec.search(parse_calendar(spec), timespec.Steps(timespec.MANIFEST_STEPS)).loop
        real = analyzer.calendar(spec, f"{loop.after:%Y-%m-%d %H:%M:%S} UTC", 1)
        assert (real.ok, real.error) == (False, f"Failed to determine next elapse for '{spec}': Resource deadlock avoided")
        with pytest.raises(timespec.CalendarLoop):
            parse_calendar(spec).next_elapses(loop.after, 1)


def test_an_expression_past_its_bound_is_left_unchecked(fresh_searches, monkeypatch):
    monkeypatch.setattr(timespec, "EXPRESSION_STEPS", 100)
    found = timespec.search(parse_calendar("Mon *-02-30 02:13:07 Europe/Berlin"), timespec.Steps(10_000))
    assert (found.never, found.loop, found.spent, found.steps) == (False, None, "expression", 100)


def test_a_manifest_bound_is_shared_and_cached_results_are_still_charged(fresh_searches):
    never = parse_calendar("*-02-30 12:00")
    cost = timespec.search(never, timespec.Steps(timespec.MANIFEST_STEPS)).steps
    # A second manifest that can afford it once gets the cached answer, charged in full...
    budget = timespec.Steps(cost + cost // 2)
    assert timespec.search(never, budget).never and budget.left == cost // 2
    # ...and is told "not checked" the second time, as if it had searched itself.
    assert timespec.search(never, budget).spent == "manifest" and budget.left == 0
    # Nothing is searched once the manifest's bound is spent.
    other = parse_calendar("*-04-31 12:00")
    assert timespec.search(other, budget).spent == "manifest" and "*-04-31 12:00:00" not in timespec._SEARCHES


def test_a_bound_cut_short_by_the_manifest_is_not_cached(fresh_searches):
    never = parse_calendar("*-02-30 12:00")
    assert timespec.search(never, timespec.Steps(10)).spent == "manifest"
    assert timespec.search(never, timespec.Steps(timespec.MANIFEST_STEPS)).never


def test_a_schedule_in_every_zone_is_bounded_too(fresh_searches):
    # Each new zone costs a scan for its DST changes: charged as steps, so hundreds of zones
    # in one manifest stop at the manifest's bound like anything else.
    from zoneinfo import available_timezones

    budget = timespec.Steps(timespec.MANIFEST_STEPS)
    results = [timespec.search(parse_calendar(f"*-*-* 03:00 {zone}"), budget) for zone in sorted(available_timezones())[:600]]
    checked = [r for r in results if r.spent is None]
    assert budget.left == 0 and results[-1].spent == "manifest"
    assert len(checked) * timespec._ZONE_SCAN_STEPS <= timespec.MANIFEST_STEPS
