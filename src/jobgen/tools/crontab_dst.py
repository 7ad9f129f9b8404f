"""What an imported job does differently from cron at the DST changes of its time zone.

Pure. The importer proves each translation in wall-clock time (tools/crontab.py: cron and
systemd read the same local time); where they part is the hour a DST change skips or repeats:

* cron (Debian's cron(8), Vixie cron's cron.c): when the clock moves forward by less than
  3 hours, "those jobs which would have run in the time that was skipped will be run soon
  after the change"; when it moves back, "those jobs that fall into the repeated time will
  not be re-run". Both hold for fixed-time jobs only: a job whose minute or hour field
  starts with '*' (cron's MIN_STAR/HR_STAR) runs by the new time, so it skips the skipped
  minutes and runs the repeated ones again.
* systemd: what jobgen's port of find_next() (compiler/timespec.py) computes in the zone.

For each DST change in the proof's window (tools/crontab.CHECK_FROM, CHECK_DAYS), the runs
of both in the changed hour are compared; each difference is one sentence.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

from jobgen.compiler import cron, timespec
from jobgen.tools.crontab import cron_times  # the one reading of cron's times

_WINDOW_START = datetime(2027, 12, 1, tzinfo=timezone.utc)  # tools/crontab.CHECK_FROM
_WINDOW_DAYS = 400  # tools/crontab.CHECK_DAYS
CRON_DST_LIMIT = timedelta(hours=3)  # cron(8): changes of less than 3 hours are handled as above


@lru_cache(maxsize=64)
def changes(zone: str) -> tuple[tuple[datetime, timedelta, timedelta], ...]:
    """(the UTC instant, the offset before, the offset after) of each change in the window."""
    z = ZoneInfo(zone)
    out = []
    t = _WINDOW_START
    end = _WINDOW_START + timedelta(days=_WINDOW_DAYS)
    before = t.astimezone(z).utcoffset()
    while t < end:
        nxt = t + timedelta(hours=1)
        after = nxt.astimezone(z).utcoffset()
        if after != before:
            lo, hi = t, nxt  # the change is in (lo, hi]: narrowed to the minute
            while hi - lo > timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                mid = mid.replace(second=0, microsecond=0)
                if mid <= lo:
                    break
                if mid.astimezone(z).utcoffset() == before:
                    lo = mid
                else:
                    hi = mid
            out.append((hi, before, after))
            before = after
        t = nxt
    return tuple(out)


def _shown(times: list[datetime], z: ZoneInfo) -> str:
    shown = ", ".join(f"{t.astimezone(z):%H:%M %Z}" for t in times[:3])
    return shown + (f" and {len(times) - 3} more" if len(times) > 3 else "")


def _wildcard(cron_text: str) -> bool:
    """cron.c: a job whose minute or hour field starts with '*' (MIN_STAR, HR_STAR)."""
    fields = cron.NICKNAMES.get(cron_text.strip().lower(), cron_text).split()
    return fields[0].startswith("*") or fields[1].startswith("*")


def _cron_runs(schedule: cron.CronSchedule, wildcard: bool, z: ZoneInfo, instant: datetime, lo: datetime,
               hi: datetime) -> list[datetime]:
    """cron's runs between lo and hi (UTC) around the change at `instant`, by cron(8)'s rules."""
    wall_lo = lo.astimezone(z).replace(tzinfo=timezone.utc) - timedelta(hours=3)
    wall_hi = hi.astimezone(z).replace(tzinfo=timezone.utc) + timedelta(hours=3)
    runs = []
    for wall in cron_times(schedule, wall_lo, wall_hi):
        naive = wall.replace(tzinfo=None)
        first, second = (naive.replace(tzinfo=z, fold=f).astimezone(timezone.utc) for f in (0, 1))
        exists = first.astimezone(z).replace(tzinfo=None) == naive
        if not exists:  # in the hour the clocks skip
            if not wildcard:
                runs.append(instant)  # made up at the change
        elif first != second:  # in the hour the clocks repeat
            runs += [first, second] if wildcard else [first]
        else:
            runs.append(first)
    return sorted(t for t in runs if lo <= t < hi)


def differences(cron_text: str, calendars: str | tuple[str, ...], zone: str) -> list[str]:
    """One sentence per DST change at which the job runs differently in cron and in systemd."""
    try:
        schedule = cron.parse(cron_text)
        engines = [timespec.parse_calendar(f"{c} {zone}") for c in ((calendars,) if isinstance(calendars, str) else calendars)]
        z = ZoneInfo(zone)
    except (ValueError, KeyError, OSError):
        return []
    wildcard = _wildcard(cron_text)
    out = []
    for instant, before, after in changes(zone):
        if abs(after - before) >= CRON_DST_LIMIT:
            continue  # cron treats it as the clock being set, not as a DST change
        lo, hi = instant - timedelta(hours=2), instant + timedelta(hours=2)
        ours = _cron_runs(schedule, wildcard, z, instant, lo, hi)
        theirs = sorted({t for e in engines for t in _elapses(e, lo - timedelta(seconds=1), hi) if lo <= t < hi})
        if ours == theirs:
            continue
        only_cron = [t for t in ours if t not in theirs]
        only_systemd = [t for t in theirs if t not in ours]
        wall = instant.replace(tzinfo=None)
        change = f"{wall + before:%H:%M} -> {wall + after:%H:%M}"
        said = [f"cron runs {len(only_cron)} more time{'s' if len(only_cron) != 1 else ''} "
                f"({_shown(only_cron, z)})"] if only_cron else []
        said += [f"systemd runs at {_shown(only_systemd, z)}, cron not"] if only_systemd else []
        what = "makes up a run the change skipped" if after > before and not wildcard else (
            "skips the minutes the change skips" if after > before else
            "runs the repeated minutes again" if wildcard else "does not run the repeated time again")
        out.append(f"DST change on {wall + before:%Y-%m-%d} ({change} {zone}): cron {what}; " + "; ".join(said))
    return out


def _elapses(engine: timespec.Calendar, after: datetime, end: datetime) -> list[datetime]:
    out: list[datetime] = []
    t = after
    while True:
        got = engine.next_elapses(t, 64)
        out += [g for g in got if g < end]
        if len(got) < 64 or got[-1] >= end:
            return out
        t = got[-1]


def has_dst(zone: str) -> bool:
    """Whether the zone changes its offset in the proof's window."""
    try:
        return bool(changes(zone))
    except (ValueError, KeyError, OSError):
        return False
