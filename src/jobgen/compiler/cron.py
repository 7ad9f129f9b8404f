"""Cron schedules (crontab(5)) and their OnCalendar= equivalents.

Two users: validate.py, which recognises cron syntax where an OnCalendar= expression belongs
and says what to write instead, and tools/crontab.py (`jobgen import-crontab`), which turns
crontab lines into jobs. Both need the same reading of a cron schedule, so it lives here.

Semantics are Debian's cron (Vixie cron 4.1 with Debian patches) and cronie alike:

* fields: minute 0-59, hour 0-23, day of month 1-31, month 1-12 or jan-dec, day of week 0-7
  or sun-sat (0 and 7 are Sunday); each a ','-list of `*`, `N`, `N-M`, with `/STEP` after
  `*` or a range. Names are not allowed in ranges with steps in some crons: they are refused.
* the day rule (crontab(5) NOTE): when both day of month and day of week are restricted, i.e.
  neither field starts with `*`, the command runs when EITHER matches; otherwise both must.
  A field that starts with `*` counts as unrestricted even with a step (`*/2`): cron's entry.c
  sets DOM_STAR/DOW_STAR from the first character.
* `@reboot`, `@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`.
  `@weekly` is Sunday 00:00 in cron, while systemd's `weekly` is Monday: the translation says Sun.

A translation is an OnCalendar= expression with the same elapses; the OR rule needs two
expressions (a systemd timer can have two OnCalendar= lines; a jobgen schedule can be a list
of them), so `to_calendar` returns a tuple. tests/test_crontab.py proves every translation against an
independent evaluator of these rules over a year.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# field -> (lowest, highest, names or None)
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
FIELDS: tuple[tuple[str, int, int, tuple[str, ...] | None], ...] = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, _MONTH_NAMES),
    ("day of week", 0, 7, _DOW_NAMES),
)

# crontab(5) "@" nicknames -> the five fields they stand for.
NICKNAMES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
    # Not Vixie cron's, but systemd-cron's and fcron's, and found in crontabs moved from them.
    "@quarterly": "0 0 1 1,4,7,10 *",
    "@semiannually": "0 0 1 1,7 *",
    "@biannually": "0 0 1 1,7 *",
}
# Those of NICKNAMES that Vixie cron (Debian's) and cronie do not know (entry.c: "bad time
# specifier"): a line with one never ran under them.
SYSTEMD_CRON_NICKNAMES = ("@quarterly", "@semiannually", "@biannually")
REBOOT = "@reboot"
# What '@reboot' becomes, for `check`'s hint and `import-crontab` alike: a run once per boot,
# a minute after it (systemd-cron's OnBootSec= for @reboot), when the host has settled.
REBOOT_AFTER_BOOT = "1min"
# Nicknames of other schedulers that are not cron's: what to write instead.
FOREIGN_NICKNAMES: dict[str, str] = {
    "@every": "'@every' is not cron syntax (Go's cron libraries have it); for a run every SPAN write schedule: {every: SPAN}",
}
# What a nickname's equivalent needs said beside it.
NICKNAME_NOTES: dict[str, str] = {"@weekly": " (cron's week starts on Sunday; systemd's own 'weekly' is Monday 00:00)"}

_SYSTEMD_DAYS = ("Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat")  # indexed by cron's 0..6
_ITEM = re.compile(r"(?P<base>\*|(?P<a>[0-9a-zA-Z]+)(?:-(?P<b>[0-9a-zA-Z]+))?)(?:/(?P<step>[0-9]+))?")


class CronError(ValueError):
    """Not a cron schedule, or one jobgen will not translate; the message says why.
    ``refused``: cron itself refuses it (entry.c's get_list: "bad minute", "bad hour"...): a
    word that is no number or name of the field, a number out of its range, an item it
    cannot read. Where crons differ or jobgen alone declines, False."""

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


@dataclass(frozen=True)
class CronSchedule:
    """The sets of values each field matches, and whether the day fields started with '*'."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6 = Saturday (7 folded into 0)
    days_star: bool
    weekdays_star: bool

    @property
    def either_day(self) -> bool:
        """crontab(5): both day fields restricted -> runs when either matches."""
        return not self.days_star and not self.weekdays_star


def _value(word: str, field: str, low: int, high: int, names: tuple[str, ...] | None) -> int:
    if word.isdigit():
        value = int(word)
    elif names and word.lower() in names:
        value = names.index(word.lower()) + (1 if field == "month" else 0)
    else:
        raise CronError(f"{field}: '{word}' is not a number from {low} to {high}", refused=True)
    if not low <= value <= high:
        raise CronError(f"{field}: {value} is out of range {low}-{high}", refused=True)
    return value


def _field(text: str, field: str, low: int, high: int, names: tuple[str, ...] | None) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):  # names in any case; a message shows the item as written
        m = _ITEM.fullmatch(item)
        if m is None:
            raise CronError(f"{field}: cannot read '{item}'", refused=True)
        if m["step"] is not None and m["base"] != "*" and m["b"] is None:
            # 'N/STEP': cronie reads it as N-max/STEP, Vixie cron refuses it: not guessed.
            raise CronError(f"{field}: '{item}' means different things to different crons; write '{m['a']}-{high}/{m['step']}'")
        step = int(m["step"]) if m["step"] is not None else 1
        if step == 0:
            raise CronError(f"{field}: a step of 0 in '{item}'")
        if m["base"] == "*":
            a, b = low, high
        else:
            a = _value(m["a"], field, low, high, names)
            b = _value(m["b"], field, low, high, names) if m["b"] is not None else a
            if b < a:
                raise CronError(f"{field}: the range '{item}' goes backwards")
        values.update(range(a, b + 1, step))
    return frozenset(values)


def parse(text: str) -> CronSchedule:
    """Five cron fields (or an @nickname other than @reboot) -> the sets they match."""
    fields_text = NICKNAMES.get(text.strip().lower(), text)
    words = fields_text.split()
    if len(words) != 5:
        raise CronError(f"a cron schedule has 5 fields (minute hour day month weekday), got {len(words)}")
    sets = [_field(w, *spec) for w, spec in zip(words, FIELDS)]
    weekdays = frozenset(d % 7 for d in sets[4])
    return CronSchedule(text.strip(), sets[0], sets[1], sets[2], sets[3], weekdays,
                        days_star=words[2].startswith("*"), weekdays_star=words[4].startswith("*"))  # fmt: skip


# Days in each month in a leap year: the most days cron can ever find in it.
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def never_runs(s: CronSchedule) -> bool:
    """No date ever matches: each day of the month named is past the end of each month named
    ('0 0 31 2 *', '0 0 31 4,6,9,11 *', a common way to switch a line off). With both day
    fields restricted a weekday always matches some day; with one, Feb 29 falls on every
    weekday within 28 years."""
    if s.either_day:
        return False
    return not any(day <= _MONTH_DAYS[month - 1] for month in s.months for day in s.days)


def looks_like_cron(text: str) -> bool:
    """Five words of cron's characters, or an @nickname: worth telling the user it is cron."""
    stripped = text.strip().lower()
    if stripped in NICKNAMES or stripped == REBOOT:
        return True
    words = stripped.split()
    return len(words) == 5 and all(re.fullmatch(r"[0-9a-z*/,-]+", w) for w in words) and any(
        c.isdigit() or c == "*" for c in stripped
    )


# --------------------------------------------------------------------------- translation


def _chain(values: frozenset[int], low: int, high: int, width: int) -> str:
    """A set as an OnCalendar= chain: '*', 'a/step', or a list with 'a..b' runs."""
    ordered = sorted(values)
    if ordered == list(range(low, high + 1)):
        return "*"
    if len(ordered) >= 3 and _repeats_evenly(ordered, low, high):
        return f"{ordered[0]:0{width}d}/{ordered[1] - ordered[0]}"
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{ordered[i]:0{width}d}..{ordered[j]:0{width}d}")
        else:
            parts.extend(f"{v:0{width}d}" for v in ordered[i : j + 1])
        i = j + 1
    return ",".join(parts)


def _repeats_evenly(ordered: list[int], low: int, high: int) -> bool:
    """Whether 'a/step' is safe for these values: they are a, a+step, ... up to the field's end,
    and the step divides the field's span, so the repetition carried past the end lands on
    the same values again. systemd 252 carries it over ('*-*-* 00/5:00:00' runs at 05:00, not
    00:00, after 20:00 on a month's last day; `00/7` cannot be computed in Europe/Berlin,
    "Infinite loop in calendar calculation"): where the step does not divide, a list is exact.
    The day of the month has no fixed span (28 to 31 days): always a list."""
    step = ordered[1] - ordered[0]
    if step < 2 or ordered != list(range(ordered[0], high + 1, step)):
        return False
    return high != 31 and ordered[0] - low < step and (high + 1 - low) % step == 0


def _weekdays(values: frozenset[int]) -> str:
    """Cron weekdays as systemd names, Monday first (systemd's week: 'Sun..Tue' is backwards)."""
    days = [d for d in (1, 2, 3, 4, 5, 6, 0) if d in values]
    order = {d: i for i, d in enumerate((1, 2, 3, 4, 5, 6, 0))}
    parts, run = [], [days[0]] if days else []
    for d in days[1:] + [None]:
        if d is not None and order[d] == order[run[-1]] + 1:
            run.append(d)
            continue
        names = [_SYSTEMD_DAYS[x] for x in run]
        parts.append(f"{names[0]}..{names[-1]}" if len(run) >= 3 else ",".join(names))
        run = [d] if d is not None else []
    return ",".join(parts)


def _expression(s: CronSchedule, *, days: bool, weekdays: bool, zone: str | None) -> str:
    day = _chain(s.days, 1, 31, 2) if days else "*"
    text = f"*-{_chain(s.months, 1, 12, 2)}-{day} {_chain(s.hours, 0, 23, 2)}:{_chain(s.minutes, 0, 59, 2)}:00"
    if weekdays and len(s.weekdays) < 7:
        text = f"{_weekdays(s.weekdays)} {text}"
    return text + (f" {zone}" if zone else "")


def to_calendar(s: CronSchedule, zone: str | None = None) -> tuple[str, ...]:
    """OnCalendar= expressions whose elapses together are the schedule's (two for the OR rule)."""
    if s.either_day and (len(s.days) == 31 or len(s.weekdays) == 7):
        return (_expression(s, days=False, weekdays=False, zone=zone),)  # either is every day
    if s.either_day:
        return (_expression(s, days=True, weekdays=False, zone=zone),
                _expression(s, days=False, weekdays=True, zone=zone))  # fmt: skip
    return (_expression(s, days=not s.days_star or len(s.days) < 31, weekdays=True, zone=zone),)


def suggestion(text: str) -> str | None:
    """What validate.py says about a cron schedule written as a calendar expression, or None."""
    word = text.strip().lower()
    if word == REBOOT:
        return f"'@reboot' is cron syntax; for a run once after boot write schedule: {{after_boot: {REBOOT_AFTER_BOOT}}}"
    if not looks_like_cron(text):
        return None
    try:
        schedule = parse(text)
    except CronError as exc:
        return f"this looks like cron syntax (minute hour day month weekday), but {exc}"
    what = f"cron's {word}" if word in NICKNAMES else "cron syntax (minute hour day month weekday)"
    calendars = to_calendar(schedule)
    if len(calendars) == 2:
        return (f"this is {what}; cron runs it when the day of the month OR the weekday matches, which takes "
                f"two OnCalendar= expressions: write schedule: ['{calendars[0]}', '{calendars[1]}']")
    return f"this is {what}; the OnCalendar= equivalent is '{calendars[0]}'{NICKNAME_NOTES.get(word, '')}"
