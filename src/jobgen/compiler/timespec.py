"""Pure-Python parsers for systemd time spans and calendar expressions (systemd.time(7)).

`jobgen render` validates `schedule:`, `timeout:`, `wait_timeout:` ... on machines without systemd,
so this module reproduces what systemd itself accepts, byte for byte where it matters:

* `parse_timespan` / `format_timespan` follow `parse_time()` / `format_timespan()` in systemd's
  src/basic/time-util.c (v252..v257 behave the same for everything here).
* `parse_calendar` follows `calendar_spec_from_string()` in src/shared/calendarspec.c (v251..v257:
  same parser, same normalisation, same `*` folding of the seconds chain); `Calendar.normalized` is
  what `systemd-analyze calendar` prints as "Normalized form:", quirks included (see the notes at
  `_chain_problem`).
* `Calendar.next_elapses` is a port of `find_next()` from the same file, glibc's mktime() DST
  rules included; `new_year_fix=True` follows systemd PR #40266 (Debian's 257.13 has it, 252.39
  not). tests/test_calendar_parity.py holds it to systemd-analyze 252 and 257.

Known, deliberate differences from a real systemd:

* A trailing time zone is checked against the IANA database Python's `zoneinfo` sees (the host's
  /usr/share/zoneinfo, else the `tzdata` package) plus `UTC`; systemd checks the *target's*
  /usr/share/zoneinfo when it loads the timer, so a zone missing there still fails at run time.
* systemd also accepts the abbreviations of the machine's own local zone (`tzname[]`, e.g. `CET`
  on a Berlin host). The target's local zone is unknown here, so such a word is accepted only if it
  is also a zoneinfo name (`CET`, `EET`, `GMT` ... are).
* A spec without a time zone runs in the target's local time; `next_elapses` computes it in UTC.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

__all__ = [
    "USEC_INFINITY",
    "BudgetSpent",
    "Calendar",
    "CalendarLoop",
    "Component",
    "Search",
    "Steps",
    "format_timespan",
    "parse_calendar",
    "parse_timespan",
    "search",
    "seconds_ceiling",
    "timezone_is_valid",
]

# ---------------------------------------------------------------------------------------------
# Time spans — systemd.time(7) "PARSING TIME SPANS", src/basic/time-util.c parse_time()
# ---------------------------------------------------------------------------------------------

USEC_PER_SEC = 1_000_000
USEC_PER_MINUTE = 60 * USEC_PER_SEC
USEC_PER_HOUR = 60 * USEC_PER_MINUTE
USEC_PER_DAY = 24 * USEC_PER_HOUR
USEC_PER_WEEK = 7 * USEC_PER_DAY
USEC_PER_MONTH = 2_629_800 * USEC_PER_SEC  # 30.44 days (time-util.h)
USEC_PER_YEAR = 31_557_600 * USEC_PER_SEC  # 365.25 days (time-util.h)
USEC_INFINITY = 2**64 - 1  # systemd's USEC_INFINITY, what "infinity" parses to
_LLONG_MAX = 2**63 - 1

# Suffixes in the order systemd tries them: the first *prefix* match wins, so "ms" must come before
# "m" and "min" before "months". Case matters ("M" is months, "m" minutes). Both micro signs are
# accepted: U+00B5 always, U+03BC since v254 (also in Debian 12's 252.38).
_TIMESPAN_UNITS: tuple[tuple[str, int], ...] = (
    ("seconds", USEC_PER_SEC),
    ("second", USEC_PER_SEC),
    ("sec", USEC_PER_SEC),
    ("s", USEC_PER_SEC),
    ("minutes", USEC_PER_MINUTE),
    ("minute", USEC_PER_MINUTE),
    ("min", USEC_PER_MINUTE),
    ("months", USEC_PER_MONTH),
    ("month", USEC_PER_MONTH),
    ("M", USEC_PER_MONTH),
    ("msec", 1000),
    ("ms", 1000),
    ("m", USEC_PER_MINUTE),
    ("hours", USEC_PER_HOUR),
    ("hour", USEC_PER_HOUR),
    ("hr", USEC_PER_HOUR),
    ("h", USEC_PER_HOUR),
    ("days", USEC_PER_DAY),
    ("day", USEC_PER_DAY),
    ("d", USEC_PER_DAY),
    ("weeks", USEC_PER_WEEK),
    ("week", USEC_PER_WEEK),
    ("w", USEC_PER_WEEK),
    ("years", USEC_PER_YEAR),
    ("year", USEC_PER_YEAR),
    ("y", USEC_PER_YEAR),
    ("usec", 1),
    ("us", 1),
    ("\u03bcs", 1),
    ("\u00b5s", 1),
)

# format_timespan()'s table (time-util.c); every suffix parses back through _TIMESPAN_UNITS.
_FORMAT_UNITS: tuple[tuple[str, int], ...] = (
    ("y", USEC_PER_YEAR),
    ("month", USEC_PER_MONTH),
    ("w", USEC_PER_WEEK),
    ("d", USEC_PER_DAY),
    ("h", USEC_PER_HOUR),
    ("min", USEC_PER_MINUTE),
    ("s", USEC_PER_SEC),
    ("ms", 1000),
    ("us", 1),
)

_WHITESPACE = " \t\n\r"  # systemd's WHITESPACE
_C_SPACE = " \t\n\v\f\r"  # what strtoll() skips
_DIGITS = "0123456789"


def _span_error(text: str, reason: str) -> ValueError:
    return ValueError(f"{reason} in {text!r}")


def _unit_at(text: str, p: int) -> tuple[str, int] | None:
    for suffix, usec in _TIMESPAN_UNITS:
        if text.startswith(suffix, p):
            return suffix, usec
    return None


def _bad_word(text: str, p: int) -> str:
    """The garbage word around position p, for error messages ('secs' in '5secs')."""
    start = p
    while start > 0 and text[start - 1].isalpha():
        start -= 1
    end = p
    while end < len(text) and not text[end].isspace() and text[end] not in _DIGITS:
        end += 1
    return text[start:end] or text[p:]


def parse_timespan(text: str, *, allow_infinity: bool = False) -> int:
    """Parse a systemd time span into microseconds (systemd.time(7); parse_time(), unit seconds).

    `1h 30min`, `2min30s`, `1.5h`, `90` (bare number = seconds), `infinity` (returns USEC_INFINITY,
    only with allow_infinity=True). Raises ValueError naming what was wrong.
    """
    n = len(text)
    p = 0
    while p < n and text[p] in _WHITESPACE:
        p += 1
    if text.startswith("infinity", p):
        rest = text[p + len("infinity") :]
        if rest.strip(_WHITESPACE):
            raise _span_error(text, f"unexpected {rest.strip(_WHITESPACE)!r} after 'infinity'")
        if not allow_infinity:
            raise _span_error(text, "'infinity' is not allowed here")
        return USEC_INFINITY

    total = 0
    something = False
    while True:
        while p < n and text[p] in _WHITESPACE:
            p += 1
        if p >= n:
            if not something:
                raise ValueError("empty time span")
            return total
        if text[p] == "-":  # systemd refuses even "-0"
            raise _span_error(text, "negative time span")

        # strtoll(): optional C whitespace, sign, decimal digits.
        q = p
        while q < n and text[q] in _C_SPACE:
            q += 1
        sign = 1
        if q < n and text[q] in "+-":
            sign = -1 if text[q] == "-" else 1
            q += 1
        d = q
        while d < n and text[d] in _DIGITS:
            d += 1
        if d > q:
            number, e = sign * int(text[q:d]), d
        else:
            number, e = 0, p  # no conversion: endptr = start
        if number < 0:
            raise _span_error(text, "negative time span")
        if number > _LLONG_MAX:
            raise _span_error(text, "number too large")

        fraction_at = None
        if e < n and text[e] == ".":
            fraction_at = e + 1
            p = fraction_at
            while p < n and text[p] in _DIGITS:
                p += 1
        elif e == p:
            if something and p > 0 and text[p - 1].isalpha():
                raise _span_error(text, f"unknown unit {_bad_word(text, p)!r}")
            raise _span_error(text, f"expected a number at {text[p:]!r}")
        else:
            p = e

        s = p
        while s < n and text[s] in _WHITESPACE:
            s += 1
        unit = _unit_at(text, s)
        multiplier = USEC_PER_SEC
        if unit:
            multiplier = unit[1]
            s += len(unit[0])
        elif s == p and s < n:
            # "Don't allow '12.34.56', but accept '12.34 .56' or '12.34s.56'" (time-util.c)
            if text[s] == ".":
                raise _span_error(text, "a second '.' in one number")
            raise _span_error(text, f"unknown unit {_bad_word(text, s)!r}")
        p = s

        if number >= USEC_INFINITY // multiplier:
            raise _span_error(text, "time span too large")
        total += number * multiplier
        if total >= USEC_INFINITY:
            raise _span_error(text, "time span too large")
        something = True

        if fraction_at is not None:
            m = multiplier // 10
            b = fraction_at
            while b < n and text[b] in _DIGITS:
                total += int(text[b]) * m
                m //= 10
                b += 1
            if total >= USEC_INFINITY:
                raise _span_error(text, "time span too large")
            if b == fraction_at:  # "3.s", "3. 1"
                raise _span_error(text, "missing digits after '.'")


def format_timespan(usec: int) -> str:
    """Canonical systemd text for a span: `5min`, `1h 30min`, `2s 500ms`, `0`, `infinity`.

    Same unit table as systemd's format_timespan() without its dot notation, so every value
    parses back (in systemd and in parse_timespan) to exactly `usec`.
    """
    if usec == USEC_INFINITY:
        return "infinity"
    if usec < 0 or usec > USEC_INFINITY:
        raise ValueError(f"time span out of range: {usec}")
    if usec == 0:
        return "0"
    parts = []
    for suffix, size in _FORMAT_UNITS:
        if usec >= size:
            count, usec = divmod(usec, size)
            parts.append(f"{count}{suffix}")
    return " ".join(parts)


def seconds_ceiling(usec: int) -> int:
    """Whole seconds, rounded up (flock --wait takes seconds; never wait less than asked)."""
    if usec < 0:
        raise ValueError(f"negative time span: {usec}")
    return -(-usec // USEC_PER_SEC)


# ---------------------------------------------------------------------------------------------
# Calendar expressions — systemd.time(7) "CALENDAR EVENTS", src/shared/calendarspec.c
# ---------------------------------------------------------------------------------------------

_INT_MAX = 2**31 - 1
_ULONG_MAX = 2**64 - 1
MIN_YEAR, MAX_YEAR = 1970, 2199  # calendarspec.c
_BITS_WEEKDAYS = 127
_COMPONENTS_MAX = 240  # CALENDARSPEC_COMPONENTS_MAX: longer ','-lists are refused (-ENOBUFS)
_MAX_ITERATIONS = 1000  # MAX_CALENDAR_ITERATIONS in find_next()

# Longest name first, as systemd tries them ("Monday" before "Mon"); matched case-insensitively.
_WEEKDAY_NAMES: tuple[tuple[str, int], ...] = (
    ("monday", 0), ("mon", 0), ("tuesday", 1), ("tue", 1), ("wednesday", 2), ("wed", 2),
    ("thursday", 3), ("thu", 3), ("friday", 4), ("fri", 4), ("saturday", 5), ("sat", 5),
    ("sunday", 6), ("sun", 6),
)  # fmt: skip
_WEEKDAY_ABBR = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")

# Field name -> (lowest, highest, width in the normalized form). Seconds are kept in µs.
_FIELDS: dict[str, tuple[int, int, int]] = {
    "year": (MIN_YEAR, MAX_YEAR, 4),
    "month": (1, 12, 2),
    "day": (1, 31, 2),
    "hour": (0, 23, 2),
    "minute": (0, 59, 2),
    "second": (0, 60 * USEC_PER_SEC - 1, 2),
}


class Component(NamedTuple):
    """One ','-list element, `start[..stop][/repeat]`; stop=-1 means no range (as in systemd).
    A named tuple (ordered and hashed field by field, as a dataclass(order=True) was,
    without its ten generated methods executed at every start)."""

    start: int
    stop: int = -1
    repeat: int = 0


Chain = tuple[Component, ...] | None  # None = '*' (any value)

_ZERO: Chain = (Component(0),)
_ONE: Chain = (Component(1),)
_MIDNIGHT = {"hour": _ZERO, "minute": _ZERO, "second": _ZERO}

# The shorthands of calendar_spec_from_string(), matched case-insensitively on the whole text.
_SHORTHANDS: dict[str, dict] = {
    "minutely": {"second": _ZERO},
    "hourly": {"minute": _ZERO, "second": _ZERO},
    "daily": dict(_MIDNIGHT),
    "weekly": {"weekdays": 1, **_MIDNIGHT},
    "monthly": {"day": _ONE, **_MIDNIGHT},
    "yearly": {"month": _ONE, "day": _ONE, **_MIDNIGHT},
    "annually": {"month": _ONE, "day": _ONE, **_MIDNIGHT},
    "anually": {"month": _ONE, "day": _ONE, **_MIDNIGHT},  # systemd keeps the old misspelling
    "quarterly": {"month": tuple(Component(m) for m in (1, 4, 7, 10)), "day": _ONE, **_MIDNIGHT},
    **{
        name: {"month": (Component(1), Component(7)), "day": _ONE, **_MIDNIGHT}
        for name in ("semiannually", "semi-annually", "biannually", "bi-annually")
    },
}

# verify_timezone() in time-util.c: the characters a zone name may use before the file is opened.
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*")


def timezone_is_valid(name: str) -> bool:
    """systemd's verify_timezone(), against the zoneinfo database Python sees (plus `UTC`)."""
    if name == "UTC":
        return True
    if not _ZONE_NAME.fullmatch(name):
        return False
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # here: zoneinfo loads sysconfig; most schedules name no zone

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


class _Fail(Exception):
    def __init__(self, reason: str, at: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.at = at


class Calendar:
    """A parsed OnCalendar= expression, normalised the way systemd normalises it.

    A plain class, not a frozen dataclass (its generated methods would be executed at
    every start of every command and boot): equal and hashed by its fields, copied with
    changes by ``replace``; nothing sets a field after __init__."""

    FIELDS = ("text", "weekdays", "year", "month", "day", "hour", "minute", "second", "end_of_month", "utc", "timezone")
    __slots__ = (*FIELDS, "_normalized")

    def __init__(self, text: str, weekdays: int, year: Chain, month: Chain, day: Chain, hour: Chain, minute: Chain,
                 second: Chain, end_of_month: bool, utc: bool, timezone: str | None):
        self.text = text
        self.weekdays = weekdays  # bit 0 = Monday ... bit 6 = Sunday; -1 = any day
        self.year, self.month, self.day = year, month, day
        self.hour, self.minute = hour, minute
        self.second = second  # microseconds
        self.end_of_month = end_of_month  # '~': days count back from the end of the month
        self.utc = utc
        self.timezone = timezone  # "UTC" for UTC specs, else the zone name or None
        self._normalized: str | None = None

    def __setattr__(self, name: str, value: object) -> None:
        # Frozen, as the dataclass was: parse_calendar's answers are shared by every caller.
        if name != "_normalized" and hasattr(self, name):
            raise AttributeError(f"Calendar.{name} is read-only")
        object.__setattr__(self, name, value)

    def _fields(self) -> tuple:
        return (self.text, self.weekdays, self.year, self.month, self.day, self.hour, self.minute, self.second,
                self.end_of_month, self.utc, self.timezone)

    def __eq__(self, other: object) -> bool:
        return self._fields() == other._fields() if isinstance(other, Calendar) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return f"Calendar({self.text!r}, normalized={self.normalized!r})"

    def replace(self, **changes) -> Calendar:
        """A copy with ``changes`` (field names), as dataclasses.replace() made it."""
        fields = dict(zip(Calendar.FIELDS, self._fields()))
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"Calendar has no field {', '.join(sorted(unknown))}")
        return Calendar(**(fields | changes))

    @property
    def requires_systemd(self) -> int | None:
        """Oldest systemd that accepts the trailing zone: ' UTC' since v228, any IANA zone since
        v235 (calendarspec.c history; systemd.time(7)). None when there is no zone."""
        if self.timezone is None:
            return None
        return 228 if self.utc else 235

    @property
    def normalized(self) -> str:
        """systemd-analyze calendar's "Normalized form:" (calendar_spec_to_string(), v251+);
        worked out once (parsed once per text: search() asks each time)."""
        if self._normalized is None:
            self._normalized = self._normalize()
        return self._normalized

    def _normalize(self) -> str:
        out = []
        if 0 < self.weekdays < _BITS_WEEKDAYS:
            out.append(_format_weekdays(self.weekdays) + " ")
        out.append(_format_chain(self.year, "year"))
        out.append("-")
        out.append(_format_chain(self.month, "month"))
        out.append("~" if self.end_of_month else "-")
        out.append(_format_chain(self.day, "day"))
        out.append(" ")
        out.append(_format_chain(self.hour, "hour"))
        out.append(":")
        out.append(_format_chain(self.minute, "minute"))
        out.append(":")
        out.append(_format_chain(self.second, "second"))
        if self.timezone is not None:
            out.append(" " + self.timezone)
        return "".join(out)

    def next_elapses(self, after: datetime, n: int = 1, *, new_year_fix: bool = False,
                     budget: Steps | None = None) -> list[datetime]:
        """The next `n` elapses strictly after `after` (timezone-aware), as UTC datetimes.

        A port of systemd's find_next() (calendarspec.c): each result is the first elapse after
        the previous one, exactly what `systemd-analyze calendar --iterations=n` lists. Fewer than
        n results means the expression never elapses again (before year 2199). Specs without a
        time zone are computed in UTC (systemd would use the target's local time). At a DST change
        a local time that does not exist is skipped (as systemd 252/257 do: `*-03-30 02:30
        Europe/Berlin` does not elapse in 2025) and an ambiguous one resolves as glibc's mktime()
        does inside systemd's find_next(): by the tm_isdst find_next() carries, else by the offset
        of the previous mktime() result (usually the first occurrence; see _local_to_utc).

        new_year_fix: follow systemd with PR #40266 (see _within_bounds): Debian's 257.13 and
        newer upstream releases; without it, systemd 252 and older 257 point releases.

        Raises CalendarLoop where systemd's find_next() gives up (as 252 and 257 do), and
        BudgetSpent when `budget` runs out first (jobgen's own bound, see search()).
        """
        if after.tzinfo is None:
            raise ValueError("next_elapses needs a timezone-aware datetime")
        zone = None if self.timezone is None or self.utc else _zone(self.timezone)
        usec = (after - _EPOCH) // timedelta(microseconds=1)
        result = []
        for _ in range(n):
            nxt = _next_usec(self, zone, usec, new_year_fix, budget)
            if nxt is None:
                break
            result.append(_EPOCH + timedelta(microseconds=nxt))
            usec = nxt
        return result


def parse_calendar(text: str) -> Calendar:
    """Parse an OnCalendar= expression like systemd's calendar_spec_from_string().

    Raises ValueError("invalid calendar spec '...': <reason>") for anything systemd refuses.
    """
    try:
        return _parsed(text)
    except _Fail as fail:
        where = ""
        if fail.at is not None and fail.at < len(text):
            where = f" at {text[fail.at:]!r}"
        raise ValueError(f"invalid calendar spec {text!r}: {fail.reason}{where}") from None


# Pure in the text (a zone is part of it; the zone database does not change under a
# running jobgen) and the Calendar is frozen: each distinct expression is parsed once
# per process. Manifests share schedules, and one job's expression is asked for by
# validate, its elapse search and the target's gates; the few thousand most recent are kept.
@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> Calendar:
    return _parse_calendar(text)


def _parse_calendar(text: str) -> Calendar:
    fields: dict = {"weekdays": 0, "year": None, "month": None, "day": None, "hour": None,
                    "minute": None, "second": None, "end_of_month": False}  # fmt: skip
    utc = False
    zone = None
    body = text
    if text.lower().endswith(" utc"):
        utc, zone, body = True, "UTC", text[:-4]
    else:
        last_space = text.rfind(" ")
        if last_space >= 0 and timezone_is_valid(text[last_space + 1 :]):
            zone, body = text[last_space + 1 :], text[:last_space]
            if zone == "UTC":  # calendar_spec_normalize(): a "UTC" zone is the UTC flag
                utc = True
    if not body:
        raise _Fail("empty expression")

    shorthand = _SHORTHANDS.get(body.lower())
    if shorthand is not None:
        fields.update(shorthand)
    else:
        parser = _Parser(body, fields)
        try:
            parser.parse()
        except _Fail as fail:
            last = text.rsplit(" ", 1)[-1]
            if zone is None and " " in text and "/" in last and _ZONE_NAME.fullmatch(last):
                raise _Fail(f"unknown time zone {last!r}") from None
            raise
        if fields.pop("_epoch_utc", False):  # calendarspec_from_time_t() sets the UTC flag
            utc, zone = True, "UTC"
    _normalize(fields)
    for name in _FIELDS:
        problem = _chain_problem(fields[name], name, fields["end_of_month"] and name == "day")
        if problem:
            raise _Fail(problem)
    return Calendar(text=text, utc=utc, timezone=zone, **fields)


class _Parser:
    """parse_weekdays(), parse_date() and parse_calendar_time() of calendarspec.c."""

    def __init__(self, text: str, fields: dict):
        self.s = text
        self.p = 0
        self.f = fields

    def peek(self, k: int = 0) -> str:
        i = self.p + k
        return self.s[i] if i < len(self.s) else ""

    def skip_spaces(self) -> None:
        while self.peek() == " ":
            self.p += 1

    def parse(self) -> None:
        self.weekdays()
        if self.date() == 0:
            self.time()
        if self.p < len(self.s):
            raise _Fail("unexpected text", self.p)

    def weekdays(self) -> None:
        low = self.s.lower()
        l = -1
        first = True
        while True:
            for name, nr in _WEEKDAY_NAMES:
                if low.startswith(name, self.p):
                    after = self.peek(len(name))
                    if after not in ("", "-", ".", ",", " "):
                        raise _Fail("unknown weekday", self.p)
                    self.f["weekdays"] |= 1 << nr
                    if l >= 0:
                        if l > nr:
                            raise _Fail("weekday range goes backwards", self.p)
                        for j in range(l + 1, nr):
                            self.f["weekdays"] |= 1 << j
                    self.p += len(name)
                    break
            else:
                if first:
                    return  # no weekday part
                raise _Fail("expected a weekday", self.p)
            c = self.peek()
            if c == "":
                return
            if c == " ":
                self.skip_spaces()
                return
            if c == ".":
                if l >= 0:
                    raise _Fail("weekday range inside a range", self.p)
                if self.peek(1) != ".":
                    raise _Fail("weekday ranges are written '..'", self.p)
                l = nr
                self.p += 2
            elif c == "-":  # old range syntax, still accepted
                if l >= 0:
                    raise _Fail("weekday range inside a range", self.p)
                l = nr
                self.p += 1
            elif c == ",":
                l = -1
                self.p += 1
            if self.peek() in ("", " "):  # a trailing comma is fine, an open range is not
                self.skip_spaces()
                if l >= 0:
                    raise _Fail("weekday range has no end", self.p)
                return
            first = False

    def decimal(self, usec: bool, what: str) -> int:
        """parse_component_decimal(): digits; seconds may carry up to 6 decimals."""
        start = self.p
        end = start
        while end < len(self.s) and self.s[end] in _DIGITS:
            end += 1
        if end == start:
            raise _Fail(f"expected a number or '*' for the {what}", start)
        value = int(self.s[start:end])
        if value > _ULONG_MAX:
            raise _Fail(f"{what} number too large", start)
        if usec:
            value *= USEC_PER_SEC
            if self.s[end : end + 1] == "." and self.s[end + 1 : end + 2] != ".":
                end += 1
                digits = ""
                while end < len(self.s) and self.s[end] in _DIGITS:
                    digits += self.s[end]
                    end += 1
                if not digits:
                    raise _Fail("expected digits after the decimal point", end)
                # parse_fractional_part_u(): 6 digits, rounded on the 7th, the rest ignored
                add = int(digits[:6].ljust(6, "0"))
                if len(digits) > 6 and digits[6] >= "5":
                    add += 1
                value += add
        if value > _INT_MAX:
            raise _Fail(f"{what} number too large", start)
        self.p = end
        return value

    def component_list(self, usec: bool, what: str) -> tuple[Component, ...]:
        """prepend_component(): `start[..stop][/repeat]` joined by ','."""
        out = []
        while True:
            if len(out) > _COMPONENTS_MAX:
                raise _Fail(f"too many {what} values (at most {_COMPONENTS_MAX + 1})")
            start = self.decimal(usec, what)
            stop, repeat = -1, 0
            if self.s.startswith("..", self.p):
                self.p += 2
                stop = self.decimal(usec, what)
                repeat = USEC_PER_SEC if usec else 1
            if self.peek() == "/":
                self.p += 1
                repeat = self.decimal(usec, what)
                if repeat == 0:
                    raise _Fail(f"{what} repetition must not be 0", self.p - 1)
            else:
                if start > _INT_MAX - repeat:
                    raise _Fail(f"{what} number too large")
                if usec and stop >= 0 and start + repeat > stop:
                    raise _Fail("a seconds range shorter than 1s needs an explicit /repetition")
            if self.peek() not in ("", " ", ",", "-", "~", ":"):
                raise _Fail(f"unexpected character in the {what}", self.p)
            out.append(Component(start, stop, repeat))
            if self.peek() != ",":
                return tuple(out)
            self.p += 1

    def chain(self, usec: bool, what: str) -> Chain:
        """parse_chain(): '*' or a component list; '*' seconds are 0/1s."""
        if self.peek() == "*":
            self.p += 1
            if self.peek() == "/":  # parse_chain() takes '*' alone; a '/' after it is refused
                raise _Fail(f"'*/N' is not valid for the {what}; write '0/N'", self.p - 1)
            return (Component(0, -1, USEC_PER_SEC),) if usec else None
        return self.component_list(usec, what)

    def date(self) -> int:
        """parse_date(): [[year-]month-]day, '~' for days from the end; 1 after '@epoch'."""
        if self.peek() == "":
            return 0
        if self.peek() == "@":
            return self.epoch()
        begin = self.p
        first = self.chain(False, "date")
        if self.peek() in ("", ":"):  # it was an hour, not a date
            self.p = begin
            return 0
        if self.peek() == "~":
            self.f["end_of_month"] = True
        elif self.peek() != "-":
            raise _Fail("expected '-' in the date", self.p)
        self.p += 1
        second = self.chain(False, "day")
        if self.peek() in ("", " "):
            self.skip_spaces()
            self.f["month"], self.f["day"] = first, second
            return 0
        if self.f["end_of_month"]:
            raise _Fail("'~' must separate month and day", self.p)
        if self.peek() == "~":
            self.f["end_of_month"] = True
        elif self.peek() != "-":
            raise _Fail("expected '-' in the date", self.p)
        self.p += 1
        third = self.chain(False, "day")
        if self.peek() not in ("", " "):
            raise _Fail("expected a space after the date", self.p)
        self.skip_spaces()
        self.f["year"], self.f["month"], self.f["day"] = first, second, third
        return 0

    def epoch(self) -> int:
        """`@SECONDS`: one UTC instant (calendarspec_from_time_t())."""
        self.p += 1
        # strtoul(): leading C white space and a sign are accepted; "-N" wraps around to a
        # time before 1970 (refused below), "-0" is 0.
        m = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)").match(self.s, self.p)
        if not m:
            raise _Fail("expected seconds since the epoch after '@'", self.p)
        self.p = m.end()
        seconds = int(m.group(2)) * (-1 if m.group(1) == "-" else 1)
        if seconds < 0:
            raise _Fail("timestamp before 1970")
        try:
            when = _EPOCH + timedelta(seconds=seconds)
        except OverflowError:
            raise _Fail("timestamp out of range") from None
        self.f.update(
            year=(Component(when.year),), month=(Component(when.month),),
            day=(Component(when.day),), hour=(Component(when.hour),),
            minute=(Component(when.minute),), second=(Component(when.second * USEC_PER_SEC),),
        )  # fmt: skip
        self.f["_epoch_utc"] = True
        return 1

    def time(self) -> None:
        """parse_calendar_time(): HH:MM[:SS[.ffffff]]; nothing at all means 00:00:00."""
        if self.peek() == "":
            self.f["hour"], self.f["minute"], self.f["second"] = _ZERO, _ZERO, _ZERO
            return
        hour = self.chain(False, "hour")
        if self.peek() != ":":
            raise _Fail("expected ':' after the hour", self.p)
        self.p += 1
        minute = self.chain(False, "minute")
        second: Chain = _ZERO
        if self.peek() != "":
            if self.peek() != ":":
                raise _Fail("expected ':' after the minute", self.p)
            self.p += 1
            second = self.chain(True, "second")
            if self.peek() != "":
                raise _Fail("unexpected text after the seconds", self.p)
        self.f["hour"], self.f["minute"], self.f["second"] = hour, minute, second


def _normalize_chain(chain: Chain) -> Chain:
    """normalize_chain(): trim ranges to whole repetitions, sort, drop duplicates."""
    if chain is None:
        return None
    out = []
    for c in chain:
        start, stop, repeat = c.start, c.stop, c.repeat
        if stop > start and repeat > 0:
            stop -= (stop - start) % repeat
        if (stop > start and repeat > 0 and start + repeat > stop) or start == stop:
            repeat, stop = 0, -1
        out.append(Component(start, stop, repeat))
    if len(out) <= 1:
        return tuple(out)
    return tuple(sorted(set(out)))


def _fix_year(chain: Chain) -> Chain:
    """fix_year(): two-digit years, 12 -> 2012, 89 -> 1989."""

    def fix(v: int) -> int:
        if 0 <= v < 70:
            return v + 2000
        if 70 <= v < 100:
            return v + 1900
        return v

    if chain is None:
        return None
    return tuple(Component(fix(c.start), fix(c.stop) if c.stop >= 0 else c.stop, c.repeat)
                 for c in chain)  # fmt: skip


def _normalize(f: dict) -> None:
    """calendar_spec_normalize()."""
    if f["weekdays"] <= 0 or f["weekdays"] >= _BITS_WEEKDAYS:
        f["weekdays"] = -1
    if f["end_of_month"] and f["day"] is None:
        f["end_of_month"] = False
    f["year"] = _fix_year(f["year"])
    for name in _FIELDS:
        f[name] = _normalize_chain(f[name])


def _show(value: int, name: str) -> str:
    if name == "second":
        whole, frac = divmod(value, USEC_PER_SEC)
        return f"{whole}.{frac:06d}" if frac else str(whole)
    return str(value)


def _chain_problem(chain: Chain, name: str, end_of_month: bool) -> str | None:
    """chain_valid() with a reason. Two systemd quirks are kept on purpose, since systemd refuses
    what they refuse: with '~' the upper bound shrinks by 3 for *every* list element (so
    `*-*~1,28` is refused while `*-*~28` is fine), and a lone `start/repeat` must repeat at least
    once inside the field (`*:30/30` is refused, `*:0/30` is fine)."""
    if chain is None:
        return None
    low, high, _ = _FIELDS[name]
    what = "day counted from the end of the month" if end_of_month else name
    for c in chain:
        if end_of_month:
            high -= 3  # "Forbid dates more than 28 days from the end of the month"
        bounds = f"{_show(low, name)}..{_show(high, name)}"
        if not low <= c.start <= high:
            return f"{what} {_show(c.start, name)} is out of range {bounds}"
        if c.repeat > high - low:
            return f"{what} repetition /{_show(c.repeat, name)} is larger than the range {bounds}"
        if c.stop >= 0:
            if not low <= c.stop <= high:
                return f"{what} {_show(c.stop, name)} is out of range {bounds}"
            if c.start + c.repeat > c.stop:
                return (f"{what} range {_show(c.start, name)}..{_show(c.stop, name)} "
                        "is empty or backwards")  # fmt: skip
        elif end_of_month and c.start - c.repeat < low:
            return (f"{what} {_show(c.start, name)}/{_show(c.repeat, name)} "
                    "never repeats inside the month")  # fmt: skip
        elif not end_of_month and c.start + c.repeat > high:
            return (f"{what} {_show(c.start, name)}/{_show(c.repeat, name)} "
                    f"never repeats inside {bounds}")  # fmt: skip
    return None


def _format_weekdays(bits: int) -> str:
    """format_weekdays(): runs of 3+ days as 'Mon..Wed', pairs as 'Mon,Tue'."""
    out = []
    l = -1
    for x in range(8):
        if x < 7 and bits & (1 << x):
            if l < 0:
                if out:
                    out.append(",")
                out.append(_WEEKDAY_ABBR[x])
                l = x
        elif l >= 0:
            if x > l + 1:
                out.append(".." if x > l + 2 else ",")
                out.append(_WEEKDAY_ABBR[x - 1])
            l = -1
    return "".join(out)


def _format_chain(chain: Chain, name: str) -> str:
    """_format_chain(): '*' when the chain (or, for seconds, any element 0/1s) covers everything."""
    usec = name == "second"
    if chain is None or (usec and any(c == Component(0, -1, USEC_PER_SEC) for c in chain)):
        return "*"
    d = USEC_PER_SEC if usec else 1
    width = _FIELDS[name][2]
    parts = []
    for c in chain:
        s = f"{c.start // d:0{width}d}"
        if c.start % d:
            s += f".{c.start % d:06d}"
        if c.stop > 0:
            s += f"..{c.stop // d:0{width}d}"
            if c.stop % d:
                s += f".{c.stop % d:06d}"
        if c.repeat > 0 and not (c.stop > 0 and c.repeat == d):
            s += f"/{c.repeat // d}"
        if c.repeat % d:
            s += f".{c.repeat % d:06d}"
        parts.append(s)
    return ",".join(parts)


# ---------------------------------------------------------------------------------------------
# Next elapse — find_next() of calendarspec.c, over an emulated `struct tm`
# ---------------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_ORDINAL = _EPOCH.date().toordinal()
_ENOENT, _ERANGE, _EDEADLK = -2, -34, -35


class _Tm:
    """The fields of struct tm find_next() works on (year since 1900, month 0..11).

    isdst is carried like tm_isdst: localtime_r() sets it, find_next() resets it to -1 after
    each loop's first mktime(), and a normalised copy that tm_within_bounds() hands back keeps
    the value mktime() gave it, which the next mktime() then obeys (see _mktime)."""

    __slots__ = ("year", "mon", "mday", "hour", "min", "sec", "wday", "isdst")

    def __init__(self, year=0, mon=0, mday=1, hour=0, min=0, sec=0, wday=0, isdst=-1):
        self.year, self.mon, self.mday = year, mon, mday
        self.hour, self.min, self.sec, self.wday, self.isdst = hour, min, sec, wday, isdst

    def copy(self) -> _Tm:
        return _Tm(self.year, self.mon, self.mday, self.hour, self.min, self.sec, self.wday, self.isdst)

    def set_from(self, t: int, zone: _Local | None) -> None:
        """localtime_r()/gmtime_r()."""
        dt = datetime.fromtimestamp(t, zone.info if zone else timezone.utc)
        self.year, self.mon, self.mday = dt.year - 1900, dt.month - 1, dt.day
        self.hour, self.min, self.sec = dt.hour, dt.minute, dt.second
        self.wday = (dt.weekday() + 1) % 7
        self.isdst = 1 if dt.dst() else 0


# glibc mktime.c: when the wall time's DST state differs from the tm_isdst asked for, it
# looks for a time with the asked state, in steps of this many seconds, alternately before
# and after, up to half of duration_max, and uses that time's UTC offset.
_GLIBC_STRIDE = 601200
_GLIBC_DELTA_BOUND = 536454000 // 2 + _GLIBC_STRIDE


class _Local:
    """A time zone as glibc's mktime() sees it: the zone, and the UTC offset of the last
    mktime() result, which glibc keeps (a static) and starts its next search from, so an
    ambiguous local time (the repeated hour) resolves to the occurrence with that offset."""

    __slots__ = ("info", "last_offset")

    def __init__(self, info: ZoneInfo):
        self.info = info
        self.last_offset: int | None = None


def _zone(name: str) -> ZoneInfo:
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _is_dst(t: int, zone: ZoneInfo) -> int:
    return 1 if datetime.fromtimestamp(t, zone).dst() else 0


def _local_to_utc(wall: int, isdst: int, local: _Local) -> int:
    """mktime() for one zone: wall-clock seconds (as if UTC) -> seconds since the epoch.

    tm_isdst=-1: an ambiguous time resolves to the occurrence whose offset the previous
    mktime() returned, else the first; a time in a gap is read with the offset before the
    change. tm_isdst=0/1: the occurrence in that state if there is one, else glibc's rule:
    the offset of the nearest time in that state (so 00:00 with tm_isdst=0 on the day New
    York leaves DST is 00:00 EST, which is 01:00 EDT)."""
    zone = local.info
    naive = datetime(1970, 1, 1) + timedelta(seconds=wall)
    first = int(naive.replace(tzinfo=zone, fold=0).timestamp())
    if isdst < 0:
        second = int(naive.replace(tzinfo=zone, fold=1).timestamp())
        if second != first and wall - second == local.last_offset:
            real = datetime.fromtimestamp(second, zone).replace(tzinfo=None) == naive
            if real and datetime.fromtimestamp(first, zone).replace(tzinfo=None) == naive:
                return second
        return first
    for fold in (0, 1):
        t = int(naive.replace(tzinfo=zone, fold=fold).timestamp())
        real = datetime.fromtimestamp(t, zone).replace(tzinfo=None) == naive
        if real and _is_dst(t, zone) == isdst:
            return t
    if _is_dst(first, zone) == isdst:
        return first
    for delta in range(_GLIBC_STRIDE, _GLIBC_DELTA_BOUND, _GLIBC_STRIDE):
        for other in (first - delta, first + delta):
            if _is_dst(other, zone) == isdst:
                offset = datetime.fromtimestamp(other, zone).utcoffset() or timedelta(0)
                return wall - int(offset.total_seconds())
    return first


def _mktime(tm: _Tm, zone: _Local | None) -> int:
    """timegm()/mktime(): normalise out-of-range fields, return seconds since epoch."""
    year = tm.year + 1900 + tm.mon // 12
    days = datetime(year, tm.mon % 12 + 1, 1).toordinal() - _EPOCH_ORDINAL + tm.mday - 1
    wall = days * 86400 + tm.hour * 3600 + tm.min * 60 + tm.sec
    if zone is None:
        t = wall
    else:
        t = _local_to_utc(wall, tm.isdst, zone)
        zone.last_offset = wall - t
    tm.set_from(t, zone)
    return t


def _end_of_month(tm: _Tm, zone: _Local | None, day: int) -> int:
    """find_end_of_month(): the `day`-th last day of tm's month, -1 if there is none."""
    t = tm.copy()
    t.mon += 1
    t.mday = 1 - day
    _mktime(t, zone)
    return t.mday if t.mon == tm.mon else -1


def _matching(chain: Chain, tm: _Tm, val: int, zone, end_of_month: bool = False) -> tuple[int, int]:
    """find_matching_component(): (r, new value); r<0 no match, 1 changed, 0 unchanged."""
    if chain is None:
        return 0, val
    d = None
    for c in chain:
        if end_of_month:
            start = _end_of_month(tm, zone, c.start)
            stop = _end_of_month(tm, zone, c.stop)
            if stop > 0:
                start, stop = stop, start
        else:
            start, stop = c.start, c.stop
        if start >= val:
            if d is None or start < d:
                d = start
        elif c.repeat > 0:
            k = start + c.repeat * (-(-(val - start) // c.repeat))
            if (d is None or k < d) and (stop < 0 or k <= stop):
                d = k
    if d is None:
        return _ENOENT, val
    return (1 if d != val else 0), d


def _within_bounds(tm: _Tm, zone, new_year_fix: bool = False) -> int:
    """tm_within_bounds(): 1 if tm is a real time, 0 if normalising moved it (tm updated).

    new_year_fix: a change of year also resets the day of the month to 1 (systemd PR #40266,
    2026; in Debian's 257.13, not in 252.39). Without it `*-*-1/7` skips January 1st when the
    repetition runs past December."""
    if tm.year + 1900 > MAX_YEAR:
        return _ERANGE
    t = tm.copy()
    _mktime(t, zone)
    for field, resets in (("year", "mon"), ("mon", "mday"), ("mday", "hour"),
                          ("hour", "min"), ("min", "sec")):  # fmt: skip
        a, b = getattr(t, field), getattr(tm, field)
        if a != b:
            setattr(t, resets, 1 if resets == "mday" else 0)
            if field == "year" and new_year_fix:
                t.mday = 1
            cmp = (a > b) - (a < b)
            break
    else:
        cmp = (t.sec > tm.sec) - (t.sec < tm.sec)
    if cmp < 0:
        return _EDEADLK  # refuse to go backwards
    if cmp > 0:
        for field in _Tm.__slots__:
            setattr(tm, field, getattr(t, field))
    return 1 if cmp == 0 else 0


def _matches_weekday(bits: int, tm: _Tm, zone) -> bool:
    if bits < 0 or bits >= _BITS_WEEKDAYS:
        return True
    t = tm.copy()
    _mktime(t, zone)
    return bool(bits & (1 << ((t.wday + 6) % 7)))


def _find_next(cal: Calendar, zone, tm: _Tm, tm_usec: int, new_year_fix: bool = False,
               budget: Steps | None = None) -> tuple[_Tm, int] | None | object:
    """find_next(), step for step; None means 'never', _LOOP that it gave up after
    MAX_CALENDAR_ITERATIONS (calendarspec.c: "Infinite loop in calendar calculation")."""
    c = tm.copy()

    def reset(*fields: str) -> None:
        nonlocal tm_usec
        for f in fields:
            setattr(c, f, 1 if f == "mday" else 0)
        tm_usec = 0

    for _ in range(_MAX_ITERATIONS):
        if budget is not None:
            budget.spend()
        _mktime(c, zone)
        c.isdst = -1  # find_next(): c.tm_isdst = spec->dst, which is -1 for every spec jobgen accepts

        r, y = _matching(cal.year, c, c.year + 1900, zone)
        c.year = y - 1900
        if r > 0:
            reset("mon", "mday", "hour", "min", "sec")
        if r < 0:
            return None
        if _within_bounds(c, zone, new_year_fix) <= 0:
            return None

        r, m = _matching(cal.month, c, c.mon + 1, zone)
        c.mon = m - 1
        if r > 0:
            reset("mday", "hour", "min", "sec")
        if r < 0 or (r := _within_bounds(c, zone, new_year_fix)) < 0:
            c.year += 1
            reset("mon", "mday", "hour", "min", "sec")
            continue
        if r == 0:
            continue

        r, c.mday = _matching(cal.day, c, c.mday, zone, cal.end_of_month)
        if r > 0:
            reset("hour", "min", "sec")
        if r < 0 or (r := _within_bounds(c, zone, new_year_fix)) < 0:
            c.mon += 1
            reset("mday", "hour", "min", "sec")
            continue
        if r == 0:
            continue

        if not _matches_weekday(cal.weekdays, c, zone):
            c.mday += 1
            reset("hour", "min", "sec")
            continue

        r, c.hour = _matching(cal.hour, c, c.hour, zone)
        if r > 0:
            reset("min", "sec")
        if r < 0 or (r := _within_bounds(c, zone, new_year_fix)) < 0:
            c.mday += 1
            reset("hour", "min", "sec")
            continue
        if r == 0:
            continue

        r, c.min = _matching(cal.minute, c, c.min, zone)
        if r > 0:
            reset("sec")
        if r < 0 or (r := _within_bounds(c, zone, new_year_fix)) < 0:
            c.hour += 1
            reset("min", "sec")
            continue
        if r == 0:
            continue

        r, usec = _matching(cal.second, c, c.sec * USEC_PER_SEC + tm_usec, zone)
        tm_usec = usec % USEC_PER_SEC
        c.sec = usec // USEC_PER_SEC
        if r < 0 or (r := _within_bounds(c, zone, new_year_fix)) < 0:
            c.min += 1
            reset("sec")
            continue
        if r == 0:
            continue

        return c, tm_usec
    return _LOOP  # the caller raises CalendarLoop: it knows the start


def _next_usec(cal: Calendar, zone, usec: int, new_year_fix: bool = False, budget: Steps | None = None) -> int | None:
    """calendar_spec_next_usec_impl(): the first elapse strictly after `usec`."""
    start = usec
    usec += 1
    zone = _Local(zone) if zone is not None else None
    tm = _Tm()
    tm.set_from(usec // USEC_PER_SEC, zone)
    found = _find_next(cal, zone, tm, usec % USEC_PER_SEC, new_year_fix, budget)
    if found is _LOOP:
        raise CalendarLoop(cal, _EPOCH + timedelta(microseconds=start))
    if found is None:
        return None
    tm, tm_usec = found
    return _mktime(tm, zone) * USEC_PER_SEC + tm_usec


# ---------------------------------------------------------------------------------------------
# Bounded search — what `jobgen check` and jobgen-generator ask of an expression
# ---------------------------------------------------------------------------------------------

_LOOP = object()


class CalendarLoop(ValueError):
    """systemd's find_next() gives up on this expression from this start: after
    MAX_CALENDAR_ITERATIONS (1000) steps it logs "Infinite loop in calendar calculation" and
    returns -EDEADLK (calendarspec.c, the same in 252 and 257; `systemd-analyze calendar`
    prints "Failed to determine next elapse ...: Resource deadlock avoided"). The timer
    skips the expression (timer.c timer_enter_waiting()), so a timer with no other
    expression stops ("Timer is elapsed") and the job runs no more until it is started
    again."""

    def __init__(self, cal: Calendar, after: datetime):
        super().__init__(f"calendar calculation does not converge for {cal.normalized!r} after {after:%Y-%m-%d %H:%M:%S} UTC")
        self.normalized = cal.normalized
        self.zone = "UTC" if cal.utc or cal.timezone is None else cal.timezone
        self.after = after


class BudgetSpent(Exception):
    """jobgen's own bound on find_next() steps ran out (not systemd's)."""


class Steps:
    """find_next() loop iterations jobgen may still spend. A count, not a clock, so what a
    manifest is told never depends on how loaded the machine is."""

    __slots__ = ("left",)

    def __init__(self, left: int):
        self.left = left

    def spend(self, n: int = 1) -> None:
        if self.left < n:
            self.left = 0
            raise BudgetSpent()
        self.left -= n


# Bounds of search(). Measured on a loaded 2-core machine: one step costs 30-350 µs (most
# in zoneinfo conversions), so an expression costs at most ~1 s and a manifest at most
# ~7 s however many schedules it has. An ordinary expression needs 4-100 steps; one that
# never elapses up to 1,000 (find_next()'s own bound, one call from 1970 to 2199); a loop
# that systemd gives up on, 1,000 and some.
EXPRESSION_STEPS = 3_000
MANIFEST_STEPS = 20_000
# Where search() looks for starts at which find_next() gives up: this year's month starts
# and DST changes, the places such loops were seen (252 and 257: '*-01/5-01 00:00:00
# Europe/Berlin' after 2026-01-01, '*-*-* 00/7:00:00 Europe/Berlin' after 2026-03-28 19:00 UTC).
PROBE_FROM = datetime(2026, 1, 1, tzinfo=timezone.utc)
PROBE_UNTIL = datetime(2027, 1, 1, tzinfo=timezone.utc)
_PROBE_WALK = 8  # elapses followed across a DST change from a day before it


class Search(NamedTuple):
    """What search() found out about one expression."""

    never: bool = False  # no elapse from MIN_YEAR to MAX_YEAR (checked from 1970)
    loop: CalendarLoop | None = None  # a start from which systemd's find_next() gives up
    spent: str | None = None  # "expression" | "manifest": the bound that ran out first
    steps: int = 0


# Results by normalised text, shared by every manifest of one process (the generator reads
# many): a repeated expression costs its steps once in time, but is still charged them
# against each manifest's bound, so what a manifest is told does not depend on the others.
_SEARCHES: dict[str, Search] = {}


def search(cal: Calendar, budget: Steps) -> Search:
    """Whether `cal` ever elapses and whether systemd can compute it at PROBE_FROM's month
    starts and DST changes, within EXPRESSION_STEPS and what `budget` has left (charged)."""
    known = _SEARCHES.get(cal.normalized)
    if known is None:
        limit = min(EXPRESSION_STEPS, budget.left)
        known = _search(cal, limit)
        if known.spent is not None and limit < EXPRESSION_STEPS:
            budget.left = 0
            return known._replace(spent="manifest")
        _SEARCHES[cal.normalized] = known
    if known.steps > budget.left:
        budget.left = 0
        return Search(spent="manifest", steps=known.steps)
    budget.left -= known.steps
    return known


def _search(cal: Calendar, limit: int) -> Search:
    steps = Steps(limit)
    # A spec without a zone is computed in UTC (the target's local zone is unknown here).
    where = cal if cal.timezone is not None else cal.replace(utc=True, timezone="UTC")
    try:
        if not where.next_elapses(_EPOCH, 1, budget=steps):
            return Search(never=True, steps=limit - steps.left)
        if not where.utc:
            for start in _probe_starts(where, steps):
                nxt = where.next_elapses(start, 1, budget=steps)
                if start == PROBE_FROM and (not nxt or nxt[0] >= PROBE_UNTIL):
                    break  # nothing in the probe year to go wrong on
    except CalendarLoop as loop:
        return Search(loop=loop, steps=limit - steps.left)
    except BudgetSpent:
        return Search(spent="expression", steps=limit)
    return Search(steps=limit - steps.left)


def _probe_starts(cal: Calendar, steps: Steps):
    yield PROBE_FROM
    for month in range(2, 13):
        yield PROBE_FROM.replace(month=month)
    steps.spend(_ZONE_SCAN_STEPS)  # the scan below costs about as much as this many steps
    for change in _dst_changes(cal.timezone or "UTC"):
        yield change - timedelta(hours=1)
        yield change - timedelta(minutes=1)
        # The elapses before the change, each a start: the last one crosses it.
        at = change - timedelta(days=1)
        for _ in range(_PROBE_WALK):
            nxt = cal.next_elapses(at, 1, budget=steps)
            if not nxt or nxt[0] > change + timedelta(days=1):
                break
            at = nxt[0]
            yield at


_ZONE_SCAN_STEPS = 20


@functools.lru_cache(maxsize=64)
def _dst_changes(name: str) -> tuple[datetime, ...]:
    """UTC instants in [PROBE_FROM, PROBE_UNTIL) where the zone's offset changes (to the
    hour): a day-by-day scan, then hour by hour in a day whose offset changed."""
    zone = _zone(name)
    day, hour = timedelta(days=1), timedelta(hours=1)
    out, t = [], PROBE_FROM
    while t < PROBE_UNTIL:
        if (t + day).astimezone(zone).utcoffset() != t.astimezone(zone).utcoffset():
            h = t
            while h < t + day:
                if (h + hour).astimezone(zone).utcoffset() != h.astimezone(zone).utcoffset():
                    out.append(h + hour)
                h += hour
        t += day
    return tuple(out)
