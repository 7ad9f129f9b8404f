"""`jobgen plan`: when each job will run and what can go wrong, before any unit reaches a host.

Pure: the validated manifest and its compiled plan (the same units `render` writes) in, a
`Report` out. Elapses come from jobgen's own calendar engine (compiler/timespec.py, a port of
systemd's find_next() held to `systemd-analyze calendar` in tests/test_calendar_parity.py), so
this works on a laptop without systemd. Nothing here reads the clock: the caller passes `start`.

A schedule without a time zone runs in the target host's local time, which jobgen cannot know;
it is computed in `local_zone` (UTC unless the caller says otherwise) and the report says so.

The risks are a table (RISKS): a code, a severity and what it means. Each job's risks are found
by one small function per code; the README lists the codes and tests/test_plan.py has a manifest
per code.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from jobgen.compiler import load, names, timespec, validate
from jobgen.compiler.diagnostics import ERROR, Diagnostic
from jobgen.compiler.model import Job, Manifest
from jobgen.contract.oneline import one_line
from jobgen.compiler.plan import DEFER_WINDOW_USEC, Exec, Plan, Raw, UnitFile
from jobgen.compiler.target import Target
from jobgen.contract import locks
from jobgen.contract.policies import OVERLAP, SCOPES

# The JSON shape's version: bumped whenever a field changes meaning or disappears
# (new fields may be added without a bump). README "jobgen plan" documents the shape.
FORMAT_VERSION = 1

# systemd.timer(5): AccuracySec= defaults to 1min.
DEFAULT_ACCURACY_USEC = 60 * timespec.USEC_PER_SEC

# How far ahead risks that depend on the calendar look (DST changes, never elapsing, the
# shortest interval): a year covers every DST change and every month length.
HORIZON = timedelta(days=366)
# Elapses sampled to find the shortest interval between two runs of one job.
INTERVAL_SAMPLE = 400
# Jobs whose elapses fall on the same second without a randomized delay: from this many on,
# it is a herd (systemd-cron users know it as every @daily job starting at 00:00:00).
HERD_MIN_JOBS = 3
# Elapses per job compared for the herd check, within a week from the start.
HERD_SAMPLE = 200
HERD_WINDOW = timedelta(days=7)

WARNING = "warning"
INFO = "info"

# code -> (severity, what it means). The README's risk table is this table.
RISKS: dict[str, tuple[str, str]] = {
    "timeout-exceeds-interval": (WARNING, "a run may last longer than the time to the next elapse"),
    "no-timeout": (INFO, "no timeout: a hung run holds the lock and the unit until someone stops it"),
    "never-elapses": (WARNING, "the schedule has no elapse after the start time"),
    "dst-skipped": (WARNING, "a local time the schedule names does not exist on a DST change day; systemd skips it"),
    "dst-repeated": (WARNING, "a local time the schedule names happens twice on a DST change day; systemd runs once"),
    "persistent-catch-up": (INFO, "after downtime the timer starts one catch-up run at once"),
    "overrun-emulation-weakened": (WARNING, "accuracy or randomized delay lets a catch-up run escape the overrun emulation"),
    "same-second": (WARNING, "several jobs start in the same second"),
    "host-local-time": (INFO, "the schedule has no time zone: it runs in the host's local time"),
    "release-dependent": (WARNING, "systemd releases disagree on this schedule's elapses"),
}


def _obj(props: dict, required: bool = True) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": props,
            "required": list(props) if required else []}


_USEC = {"type": "integer", "minimum": 0}
_USEC_OR_NULL = {"type": ["integer", "null"], "minimum": 0}
_STR_OR_NULL = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}

# The documented shape of `jobgen plan --format json` (README "jobgen plan"), as a JSON Schema.
# tests/test_plan.py validates real output against it; additionalProperties is false so a
# field added without updating this schema (and the README) fails the tests.
JSON_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "jobgen plan --format json",
    **_obj({
        "format": {"const": FORMAT_VERSION},
        "manifest": {"type": "string"},
        "target": {"type": "string"},
        "from": _TIME,
        "local_zone": {"type": "string"},
        "jobs": {"type": "array", "items": _obj({
            "name": {"type": "string"},
            "schedule": _obj({
                "kind": {"enum": ["calendar", "every", "after_boot"]},
                "on_calendar": _STR_OR_NULL,
                "on_calendars": {"type": "array", "items": {"type": "string"}},
                "time_zone": _STR_OR_NULL,
                "time_zone_from_manifest": {"type": "boolean"},
                "interval_usec": _USEC_OR_NULL,
            }),
            "next": {"type": "array", "items": _obj({"utc": _TIME, "local": _TIME})},
            "start": _obj({
                "accuracy_usec": _USEC,
                "accuracy_default": {"type": "boolean"},
                "randomized_delay_usec": _USEC,
                "fixed_random_delay": {"type": "boolean"},
                "randomized_offset_usec": _USEC,
                "latest_after_elapse_usec": _USEC,
            }),
            "overlap": {"enum": list(OVERLAP)},
            "deferral": {"enum": ["DeferReactivation", "emulated", "none"]},
            "timeout_usec": _USEC_OR_NULL,
            "wait_timeout_usec": _USEC_OR_NULL,
            "lock": {"oneOf": [{"type": "null"}, {
                "type": "object", "additionalProperties": False,
                "required": ["scope", "name", "identity"],
                "properties": {"scope": {"enum": list(SCOPES)}, "name": {"type": "string"},
                               "identity": {"type": "string"}, "backend": {"type": "string"}},
            }]},
            "persistent": {"type": "boolean"},
            "runners": {"type": "array", "items": _obj({
                "path": {"enum": ["timer", "systemctl", "jobgen-run", "other-hosts"]},
                "how": {"type": "string"},
                "guarded": {"type": "boolean"},
                "by": {"type": "string"},
            })},
            "risks": {"type": "array", "items": _obj({
                "code": {"enum": list(RISKS)},
                "severity": {"enum": [WARNING, INFO]},
                "message": {"type": "string"},
            })},
        })},
    }),
}  # fmt: skip


@dataclass(frozen=True)
class Risk:
    code: str
    message: str

    @property
    def severity(self) -> str:
        return RISKS[self.code][0]

    def as_json(self) -> dict:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class Runner:
    """One way the job's command can be started, and whether the job's lock covers it."""

    path: str  # timer | systemctl | jobgen-run | other-hosts
    how: str
    guarded: bool
    by: str  # what guards it, or why nothing does

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class JobReport:
    name: str
    kind: str  # calendar | every | after_boot
    on_calendar: str | None  # the first OnCalendar= line (format 1); on_calendars holds them all
    on_calendars: tuple[str, ...]
    time_zone: str | None  # the zone elapses are computed in
    zone_from_manifest: bool
    interval_usec: int | None  # every / after_boot
    next: tuple[datetime, ...]
    accuracy_usec: int
    accuracy_default: bool
    randomized_delay_usec: int
    fixed_random_delay: bool
    randomized_offset_usec: int
    deferral: str  # DeferReactivation | emulated | none
    overlap: str
    timeout_usec: int | None
    wait_timeout_usec: int | None
    lock: dict | None
    persistent: bool
    runners: tuple[Runner, ...]
    risks: tuple[Risk, ...]

    def as_json(self) -> dict:
        zone = _zone(self.time_zone)
        return {
            "name": self.name,
            "schedule": {
                "kind": self.kind,
                "on_calendar": self.on_calendar,
                "on_calendars": list(self.on_calendars),
                "time_zone": self.time_zone,
                "time_zone_from_manifest": self.zone_from_manifest,
                "interval_usec": self.interval_usec,
            },
            "next": [{"utc": _iso(t), "local": _iso(t.astimezone(zone))} for t in self.next],
            "start": {
                "accuracy_usec": self.accuracy_usec,
                "accuracy_default": self.accuracy_default,
                "randomized_delay_usec": self.randomized_delay_usec,
                "fixed_random_delay": self.fixed_random_delay,
                "randomized_offset_usec": self.randomized_offset_usec,
                "latest_after_elapse_usec": self.accuracy_usec + self.randomized_delay_usec,
            },
            "overlap": self.overlap,
            "deferral": self.deferral,
            "timeout_usec": self.timeout_usec,
            "wait_timeout_usec": self.wait_timeout_usec,
            "lock": self.lock,
            "persistent": self.persistent,
            "runners": [r.as_json() for r in self.runners],
            "risks": [r.as_json() for r in self.risks],
        }


@dataclass(frozen=True)
class Report:
    manifest: str
    target: str
    start: datetime
    local_zone: str
    jobs: tuple[JobReport, ...]

    def as_json(self) -> dict:
        return {
            "format": FORMAT_VERSION,
            "manifest": self.manifest,
            "target": self.target,
            "from": _iso(self.start),
            "local_zone": self.local_zone,
            "jobs": [j.as_json() for j in self.jobs],
        }


def _iso(t: datetime) -> str:
    """ISO 8601; 'Z' for UTC."""
    text = t.isoformat()
    return text[:-6] + "Z" if t.tzinfo is timezone.utc and text.endswith("+00:00") else text


def _zone(name: str | None):
    return timezone.utc if name in (None, "UTC") else ZoneInfo(name)


# --------------------------------------------------------------------------- entry point


def model(path: str, target: Target | None = None) -> Manifest:
    """The validated manifest (pipeline.build keeps only the plan); raises ManifestError."""
    manifest, _ = validate.validate(load.load_file(path), path, target)
    return manifest


def report(manifest: Manifest, compiled: Plan, start: datetime, n: int = 5, local_zone: str = "UTC",
           only: str | None = None) -> Report:
    """Facts and risks of every job (or of `only`), with the next `n` elapses after `start`."""
    if start.tzinfo is None:
        raise ValueError("start must be timezone-aware")
    files = {f.filename: f for f in compiled.files}
    facts = {}
    for job in manifest.jobs:
        with _computable(job):
            facts[job.name] = _facts(job, files, start, n, local_zone)
    herds = _herds(manifest.jobs, facts, start)
    jobs = []
    for job in manifest.jobs:
        if only is not None and job.name != only:
            continue
        base = facts[job.name]
        with _computable(job):
            risks = _risks(job, base, start, compiled, herds.get(job.name, ()))
        jobs.append(dataclasses.replace(base, runners=_runners(job, compiled.manifest), risks=tuple(risks)))
    return Report(compiled.manifest, compiled.target.describe(), start, local_zone, tuple(jobs))


class Uncomputable(Exception):
    """A job's elapses cannot be listed: systemd itself cannot compute them (CalendarLoop).
    `diagnostic` is the one line the CLI shows."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


@contextlib.contextmanager
def _computable(job: Job):
    try:
        yield
    except timespec.CalendarLoop as loop:
        where = "" if job.schedule.has_timezone else f" in {loop.zone} (--local-zone)"
        raise Uncomputable(Diagnostic(job.where("schedule"), ERROR, (
            f"job '{job.name}': systemd 252 and 257 cannot compute the next elapse of OnCalendar={job.schedule.calendar}"
            f"{where} after {loop.after:%Y-%m-%d %H:%M:%S} UTC (\"Infinite loop in calendar calculation\"); its timer stops there"
        ))) from None


# --------------------------------------------------------------------------- facts


def _directive(unit: UnitFile | None, key: str) -> list:
    if unit is None:
        return []
    return [value for _, entries in unit.sections for k, value in entries if k == key]


def _span_of(unit: UnitFile | None, key: str) -> int | None:
    values = _directive(unit, key)
    if not values or not isinstance(values[0], Raw):
        return None
    return timespec.parse_timespan(values[0].text)


@dataclass(frozen=True)
class _Union:
    """Several OnCalendar= lines on one timer: it elapses at each one's elapses
    (systemd.timer(5)), so their merged, de-duplicated times. One expression is a union of one."""

    parts: tuple[timespec.Calendar, ...]

    def next_elapses(self, start: datetime, n: int, **kw) -> list[datetime]:
        return sorted({t for c in self.parts for t in c.next_elapses(start, n, **kw)})[:n]

    def replace(self, **changes) -> "_Union":
        return _Union(tuple(c.replace(**changes) for c in self.parts))


def _calendar(job: Job, local_zone: str) -> tuple[_Union, str, bool]:
    """The job's OnCalendar= lines parsed, computed in their own zone (validate.py: a list
    names one zone or none) or in `local_zone`."""
    cal = _Union(tuple(timespec.parse_calendar(c) for c in job.schedule.calendars))
    zone = cal.parts[0].timezone
    if zone is not None:
        return cal, zone, True
    if local_zone == "UTC":
        return cal.replace(utc=True, timezone="UTC"), "UTC", False
    return cal.replace(timezone=local_zone), local_zone, False


def _facts(job: Job, files: dict[str, UnitFile], start: datetime, n: int, local_zone: str) -> JobReport:
    timer = files.get(f"{job.name}.timer")
    service = files.get(f"{job.name}.service")
    sched = job.schedule
    next_: tuple[datetime, ...] = ()
    zone, from_manifest, on_calendar, on_calendars = None, False, None, ()
    if sched.kind == "calendar":
        cal, zone, from_manifest = _calendar(job, local_zone)
        on_calendar = sched.calendar
        on_calendars = sched.calendars
        next_ = tuple(cal.next_elapses(start, n))
    accuracy = _span_of(timer, "AccuracySec")
    deferral = "none"
    if _directive(timer, "DeferReactivation"):
        deferral = "DeferReactivation"
    elif any(isinstance(v, Exec) and "jobgen-defer" in v.argv for v in _directive(service, "ExecCondition")):
        deferral = "emulated"
    return JobReport(
        name=job.name,
        kind=sched.kind,
        on_calendar=on_calendar,
        on_calendars=on_calendars,
        time_zone=zone,
        zone_from_manifest=from_manifest,
        interval_usec=sched.usec,
        next=next_,
        accuracy_usec=accuracy if accuracy is not None else DEFAULT_ACCURACY_USEC,
        accuracy_default=accuracy is None,
        randomized_delay_usec=job.randomized_delay_usec or 0,
        fixed_random_delay=job.fixed_random_delay,
        randomized_offset_usec=job.randomized_offset_usec or 0,
        deferral=deferral,
        overlap=job.overlap,
        timeout_usec=job.timeout_usec,
        wait_timeout_usec=job.wait_usec,
        lock=_lock(job),
        persistent=job.persistent,
        runners=(),
        risks=(),
    )


def _lock(job: Job) -> dict | None:
    """What the lock is, by identity: the thing two runners must share to exclude each other."""
    lock = job.lock
    if lock is None:
        return None
    # What the lock is follows from the scope's row (contract/policies.py SCOPES): a lock
    # server, a host lock file, or else the unit itself.
    if lock.kind.server:
        # The name the holder asks the server for (contract.locks.SERVER_NAMES, which the
        # backends use too), so the plan cannot drift from what `jobgen lock` takes.
        scheme = (lock.backend or "").split(":", 1)[0].lower()
        server_name = locks.SERVER_NAMES.get(scheme)
        return {"scope": lock.scope, "name": lock.name, "backend": lock.backend,
                "identity": server_name.show(lock.name) if server_name else lock.name}  # fmt: skip
    if lock.kind.lock_file:
        return {"scope": lock.scope, "name": lock.name, "identity": f"flock {lock.path or names.lock_file(lock.name)}"}
    return {"scope": lock.scope, "name": f"{job.name}.service", "identity": f"systemd unit {job.name}.service"}


def _runners(job: Job, manifest_path: str) -> tuple[Runner, ...]:
    """Every way the command can start, and whether the lock covers it (README: lock scope)."""
    unit = f"{job.name}.service"
    lock = job.lock
    if lock is None:  # the policy takes no lock (policies.OVERLAP locks=False)
        shared = run_guard = other = (False, f"overlap: {job.overlap} takes no lock")
    else:
        identity = (_lock(job) or {})["identity"]
        scope = lock.kind
        shared = (True, scope.guard.format(identity=identity))
        run_guard = shared if scope.covers_manual_run else (False, f"lock.scope {lock.scope}: `jobgen run` runs outside the unit")
        if scope.covers_other_hosts:
            other = (True, f"{identity} on {lock.backend}")
        else:
            other = (False, f"lock.scope {lock.scope} covers one host; the same unit on another host runs on its own")
    schedule_how = {
        "calendar": f"{job.name}.timer ({_on_calendar_text(job.schedule.calendars)})",
        "every": f"{job.name}.timer (every {timespec.format_timespan(job.schedule.usec or 0)})",
        "after_boot": f"{job.name}.timer ({timespec.format_timespan(job.schedule.usec or 0)} after boot)",
    }[job.schedule.kind]
    return (
        Runner("timer", schedule_how, *shared),
        Runner("systemctl", f"systemctl start {unit}", *shared),
        Runner("jobgen-run", f"jobgen run {manifest_path} {job.name}", *run_guard),
        Runner("other-hosts", f"{unit} on every other host that has it", *other),
    )


# --------------------------------------------------------------------------- risks


def _risks(job: Job, facts: JobReport, start: datetime, compiled: Plan, herd: tuple[str, ...]) -> list[Risk]:
    out: list[Risk] = []
    for check in _CHECKS:
        out += check(job, facts, start)
    if herd:
        out.append(_herd_risk(job, herd))
    return out


def _span(usec: int) -> str:
    return timespec.format_timespan(usec)


def _shortest_interval(job: Job, facts: JobReport, start: datetime) -> int | None:
    """The shortest time between two elapses (µs), over INTERVAL_SAMPLE elapses or a year."""
    sched = job.schedule
    if sched.kind == "every":
        return sched.usec
    if sched.kind != "calendar":
        return None
    cal, _, _ = _calendar(job, facts.time_zone or "UTC")
    elapses = cal.next_elapses(start, INTERVAL_SAMPLE)
    gaps = [(b - a) // timedelta(microseconds=1) for a, b in zip(elapses, elapses[1:]) if b - a <= HORIZON]
    return min(gaps) if gaps else None


def _check_timeout(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    if job.schedule.kind == "after_boot":
        return []
    if job.timeout_usec is None:
        hung = job.policy.hung_run_consequence
        return [Risk("no-timeout", "no 'timeout': a run that hangs is never stopped" + (f"; {hung}" if hung else ""))]
    gap = _shortest_interval(job, facts, start)
    longest = job.timeout_usec + (job.wait_usec or 0)
    if gap is None or longest <= gap:
        return []
    if job.schedule.kind == "every" and job.policy.every_from_end:
        return []  # OnUnitInactiveSec=: the interval counts from the end of the run
    what = f"a run may take {_span(longest)} (timeout{' + wait_timeout' if job.wait_usec else ''}) " \
           f"but elapses can be {_span(gap)} apart"
    return [Risk("timeout-exceeds-interval", f"{what}: {job.policy.overrun_consequence}")]


def _check_never(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    if job.schedule.kind != "calendar" or facts.next:
        return []
    return [Risk("never-elapses", f"{_on_calendar_text(job.schedule.calendars)} has no elapse after {_iso(start)}: "
                 "the timer will never start the job")]


def _check_persistent(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    if not job.persistent:
        return []
    return [Risk("persistent-catch-up", "Persistent=yes: if the host was down (or the timer stopped) at an elapse, "
                 "one run starts as soon as the timer is back, whatever the time of day; several missed elapses "
                 "give one run")]


def _check_overrun(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    if facts.deferral != "emulated":
        return []
    window = DEFER_WINDOW_USEC
    slack = facts.accuracy_usec + facts.randomized_delay_usec
    if slack < window:
        return []
    parts = []
    if not facts.accuracy_default and facts.accuracy_usec >= window:
        parts.append(f"accuracy {_span(facts.accuracy_usec)}")
    if facts.randomized_delay_usec:
        parts.append(f"randomized_delay {_span(facts.randomized_delay_usec)}")
    return [Risk("overrun-emulation-weakened",
                 f"below systemd 257 an overrun is caught by deferring activations that start within "
                 f"{_span(window)} after a run ended; {' and '.join(parts) or 'the timer slack'} "
                 f"let the catch-up come up to {_span(slack)} later, so a run that overruns its slot can be "
                 "followed by a second run at once")]


def _check_host_local(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    if job.schedule.kind != "calendar" or facts.zone_from_manifest:
        return []
    return [Risk("host-local-time", f"no time zone: OnCalendar= runs in each host's local time "
                 f"(shown in {facts.time_zone}; set 'timezone' to pin it)")]


def _transitions(zone: ZoneInfo, start: datetime, end: datetime) -> list[tuple[datetime, timedelta, timedelta]]:
    """UTC instants where the zone's offset changes in [start, end): (instant, before, after).

    Offsets change on whole minutes: an hourly scan finds the hour, a minute scan the minute."""
    out = []
    t = start.astimezone(timezone.utc).replace(minute=0, second=0, microsecond=0)
    hour, minute = timedelta(hours=1), timedelta(minutes=1)
    before = t.astimezone(zone).utcoffset()
    while t < end:
        after = (t + hour).astimezone(zone).utcoffset()
        if after != before:
            m = t + minute
            while m.astimezone(zone).utcoffset() == before:
                m += minute
            out.append((m, before, after))
            before = after
        t += hour
    return out


def _wall_matches(cal: _Union, wall_start: datetime, wall_end: datetime) -> list[datetime]:
    """Wall-clock times in [wall_start, wall_end) the expression names (naive, at most a few)."""
    naive = cal.replace(utc=True, timezone="UTC")
    hits = []
    after = wall_start.replace(tzinfo=timezone.utc) - timedelta(microseconds=1)
    for t in naive.next_elapses(after, 4):
        if t >= wall_end.replace(tzinfo=timezone.utc):
            break
        hits.append(t.replace(tzinfo=None))
    return hits


def _check_dst(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    if job.schedule.kind != "calendar" or facts.time_zone in (None, "UTC"):
        return []
    cal, zone_name, _ = _calendar(job, facts.time_zone)
    zone = ZoneInfo(zone_name)
    out = []
    for instant, before, after in _transitions(zone, start, start + HORIZON):
        wall = (instant + before).replace(tzinfo=None)  # the wall clock reading at the change
        delta = abs(after - before)
        lo, hi = (wall, wall + delta) if after > before else (wall - delta, wall)
        hits = _wall_matches(cal, lo, hi)
        if not hits:
            continue
        shown = ", ".join(h.strftime("%H:%M:%S") for h in hits) + (" ..." if len(hits) == 4 else "")
        span = f"{lo:%H:%M}-{hi:%H:%M}"
        if after > before:
            out.append(Risk("dst-skipped", f"on {lo:%Y-%m-%d} the clocks in {zone_name} jump over {span}: "
                            f"the elapse at {shown} does not exist and systemd skips it (no run that day at that time)"))
        else:
            out.append(Risk("dst-repeated", f"on {lo:%Y-%m-%d} the clocks in {zone_name} go through {span} twice: "
                            f"{shown} happens twice and systemd runs only at the first"))
    return out


def _check_releases(job: Job, facts: JobReport, start: datetime) -> list[Risk]:
    """systemd PR #40266 (2026; in Debian's 257.13, not in 252.39): a repetition in the day
    field that runs past December used to skip January 1st. The listed elapses follow the
    older rule; say when the newer one differs within a year."""
    if job.schedule.kind != "calendar":
        return []
    cal, _, _ = _calendar(job, facts.time_zone or "UTC")
    old = [t for t in cal.next_elapses(start, INTERVAL_SAMPLE) if t - start <= HORIZON]
    new = [t for t in cal.next_elapses(start, INTERVAL_SAMPLE, new_year_fix=True) if t - start <= HORIZON]
    extra = sorted(set(new) - set(old))
    if not extra and old == new:
        return []
    shown = ", ".join(_iso(t) for t in extra[:3]) or "different times"
    return [Risk("release-dependent", f"systemd with the new-year fix (PR #40266: 259+, Debian 257.13) also runs at "
                 f"{shown}, which older releases (252, early 257) skip; the elapses above are the older ones")]


_CHECKS = (_check_never, _check_timeout, _check_dst, _check_persistent, _check_overrun, _check_host_local, _check_releases)


def _herds(jobs: tuple[Job, ...], facts: dict[str, JobReport], start: datetime) -> dict[str, tuple[str, ...]]:
    """Job -> the other jobs it shares a starting second with, when HERD_MIN_JOBS or more do.

    Jobs with a randomized delay or offset are spread by systemd and do not count."""
    by_second: dict[datetime, set[str]] = {}
    for job in jobs:
        f = facts[job.name]
        if job.schedule.kind != "calendar" or f.randomized_delay_usec or f.randomized_offset_usec:
            continue
        cal, _, _ = _calendar(job, f.time_zone or "UTC")
        with _computable(job):
            elapses = cal.next_elapses(start, HERD_SAMPLE)
        for t in elapses:
            if t - start > HERD_WINDOW:
                break
            by_second.setdefault(t.replace(microsecond=0), set()).add(job.name)
    out: dict[str, set[str]] = {}
    for names_ in by_second.values():
        if len(names_) >= HERD_MIN_JOBS:
            for name in names_:
                out.setdefault(name, set()).update(names_ - {name})
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _herd_risk(job: Job, others: tuple[str, ...]) -> Risk:
    return Risk("same-second", f"starts in the same second as {', '.join(others)} ({len(others) + 1} jobs): "
                "they all compete for CPU, disk and the database at once; set 'randomized_delay' "
                "(or 'randomized_offset' on 258+) to spread them")


# --------------------------------------------------------------------------- text


def _when(t: datetime, zone_name: str | None) -> str:
    local = t.astimezone(_zone(zone_name))
    shown = f"{local:%a %Y-%m-%d %H:%M:%S} {local.tzname()}"
    if zone_name not in (None, "UTC"):
        shown += f" ({t.astimezone(timezone.utc):%H:%M:%S} UTC)"
    return shown


def _schedule_text(j: JobReport) -> str:
    if j.kind == "calendar":
        zone = "" if j.zone_from_manifest else f" (host local time, shown in {j.time_zone})"
        return f"{_on_calendar_text(j.on_calendars)}{zone}"
    if j.kind == "every":
        base = "end" if OVERLAP[j.overlap].every_from_end else "start"
        return f"every {_span(j.interval_usec or 0)}: first after the timer starts, then after each run's {base}"
    return f"once, {_span(j.interval_usec or 0)} after boot"


def _on_calendar_text(expressions: tuple[str, ...]) -> str:
    """One OnCalendar= per line of the timer; a list is shown whole (its elapses are merged)."""
    return "; ".join(f"OnCalendar={e}" for e in expressions)


def _start_text(j: JobReport) -> str:
    parts = [f"AccuracySec={_span(j.accuracy_usec)}{' (default)' if j.accuracy_default else ''}"]
    if j.randomized_delay_usec:
        parts.append(f"RandomizedDelaySec={_span(j.randomized_delay_usec)}"
                     + (" (fixed per host)" if j.fixed_random_delay else ""))
    if j.randomized_offset_usec:
        parts.append(f"RandomizedOffsetSec={_span(j.randomized_offset_usec)}")
    latest = _span(j.accuracy_usec + j.randomized_delay_usec)
    return f"up to {latest} after each elapse ({', '.join(parts)})"


def _lock_text(j: JobReport) -> str:
    if j.lock is None:
        return f"none (overlap: {j.overlap})"
    text = f"{j.lock['scope']}: {j.lock['identity']}"
    if "backend" in j.lock:
        text += f" on {j.lock['backend']}"
    return text


def _run_text(j: JobReport) -> str:
    parts = [f"overlap {j.overlap}"]
    parts.append(f"timeout {_span(j.timeout_usec)}" if j.timeout_usec else "no timeout")
    if j.wait_timeout_usec:
        parts.append(f"wait_timeout {_span(j.wait_timeout_usec)}")
    if j.deferral != "none":
        parts.append({"DeferReactivation": "overruns deferred (DeferReactivation=yes)",
                      "emulated": "overruns deferred (emulated below 257)"}[j.deferral])
    if j.persistent:
        parts.append("persistent")
    return ", ".join(parts)


def as_text(r: Report) -> list[str]:
    """The report as lines a person reads at a glance."""
    lines = [f"{r.manifest}: {len(r.jobs)} job{'s' if len(r.jobs) != 1 else ''}, target {r.target}, "
             f"from {_when(r.start, 'UTC')}"]
    for j in r.jobs:
        lines += ["", f"{j.name}", f"  schedule  {_schedule_text(j)}"]
        if j.kind == "calendar":
            if j.next:
                lines.append(f"  next      {_when(j.next[0], j.time_zone)}")
                lines += [f"            {_when(t, j.time_zone)}" for t in j.next[1:]]
            else:
                lines.append("  next      never")
        lines.append(f"  starts    {_start_text(j)}")
        lines.append(f"  runs      {_run_text(j)}")
        lines.append(f"  lock      {_lock_text(j)}")
        for i, runner in enumerate(j.runners):
            head = "  started by" if i == 0 else "           "
            mark = "locked  " if runner.guarded else "UNLOCKED"
            lines.append(f"{head} {mark} {runner.how}: {runner.by}")
        for risk in j.risks:
            lines.append(f"  {risk.severity:<8}  {risk.code}: {risk.message}")
    # Each line one line, whatever the manifest's path holds (it is in the first line and in
    # `jobgen run PATH JOB`; the rest is checked manifest text, with no control character).
    return [one_line(line) for line in lines]
