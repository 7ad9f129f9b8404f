"""Every calendar `jobgen import-crontab` writes for tests/crontabs/corpus, computed by real
`systemd-analyze calendar` of 252 and 257 (tests/support/sdanalyze.py) and by jobgen's engine
(compiler/timespec.py, what `jobgen plan` lists): the same next ITERATIONS elapses, to the
second, from each base time, in UTC and in the two DST zones (the zone as the expression's
suffix, as a job's `timezone:` renders it). Where systemd cannot compute an expression
("Infinite loop in calendar calculation", "Failed to determine next elapse ... Resource
deadlock avoided") the engine must raise CalendarLoop from the same start, and `check` must
warn; where systemd can, neither may.

One systemd-analyze process per (release, base, zone) computes every expression.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from jobgen.compiler import timespec
from jobgen.compiler.timespec import CalendarLoop, parse_calendar
from tests.support import sdanalyze
from tests.test_calendar_parity import RELEASES
from tests.test_cron_corpus import imported

pytestmark = pytest.mark.matrix

ITERATIONS = 12
ZONES = ("UTC", "Europe/Berlin", "America/New_York")
BASES = (
    "2026-01-01 00:00:00",  # where systemd gives up on '*-01/5-01 00:00:00 Europe/Berlin' (third elapse)
    "2026-03-28 19:00:00",  # where it gives up on '*-*-* 00/7:00:00 Europe/Berlin'
    "2027-10-30 21:00:00",  # before Europe's repeated hour
    "2027-12-31 22:30:00",  # a year's end
    "2028-02-28 12:00:00",  # a leap-year February
    "2028-03-11 12:00:00",  # before New York's skipped hour
)
# Written by hand beside the corpus's: the a/STEP forms the importer does not write, because
# systemd carries a step that does not divide its field over the field's end (and, in a DST
# zone, loops on some): the engine must agree with systemd on those too.
STEP_FORMS = ("*-01/5-01 00:00:00", "*-*-* 00/7:00:00", "*-*-* 00/5:00:00", "*-01/3-01 00:00:00", "*-*-01/10 00:00:00")


def calendars() -> tuple[str, ...]:
    out: dict[str, None] = {}
    for job in imported().jobs:
        if isinstance(job.schedule, dict):
            continue
        for c in job.schedule if isinstance(job.schedule, tuple) else (job.schedule,):
            out[c] = None
    return tuple(out) + tuple(s for s in STEP_FORMS if s not in out)


def _systemd(analyzer: sdanalyze.Analyzer, specs: list[str], base: str) -> dict[str, list[str] | None]:
    """spec -> its elapses in UTC ("Wed 2025-01-01 00:00:00 UTC"), or None where systemd
    could not determine them. One process; a block per spec, split on empty lines; a spec
    systemd could not compute prints no block, and its name in the error."""
    proc = subprocess.run(
        [*analyzer._argv(None), "calendar", f"--base-time={base} UTC", f"--iterations={ITERATIONS}", "--", *specs],
        env={**sdanalyze.BASE_ENV, "LC_ALL": "C"}, cwd="/", stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    failed = {s for s in specs if f"Failed to determine next elapse for '{s}'" in proc.stderr}
    blocks = [b for b in proc.stdout.split("\n\n") if b.strip()]
    ok = [s for s in specs if s not in failed]
    assert len(blocks) == len(ok), proc.stdout[-2000:] + proc.stderr[-2000:]
    out: dict[str, list[str] | None] = dict.fromkeys(failed)
    for spec, block in zip(ok, blocks):
        parsed = sdanalyze.parse_calendar(0, block)
        out[spec] = [] if parsed.elapses == ["never"] else parsed.elapses
    return out


def _ours(spec: str, base: str, new_year_fix: bool) -> list[str] | None:
    start = datetime.fromisoformat(base).replace(tzinfo=timezone.utc)
    try:
        elapses = parse_calendar(spec).next_elapses(start, ITERATIONS, new_year_fix=new_year_fix)
    except CalendarLoop:
        return None
    return [t.strftime("%a %Y-%m-%d %H:%M:%S UTC") for t in elapses]


def _analyzer(major: int) -> sdanalyze.Analyzer:
    analyzer = sdanalyze.versioned_analyzer(major)
    if analyzer is None:
        pytest.skip(sdanalyze.missing_reason(major))
    return analyzer


def test_the_corpus_gives_enough_calendars():
    assert len(calendars()) >= 40


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("release", RELEASES)
def test_the_engine_lists_what_systemd_analyze_lists(release, base):
    specs = [f"{c} {zone}" for c in calendars() for zone in ZONES]
    theirs = _systemd(_analyzer(release), specs, base)
    differ = [(s, ours, theirs[s]) for s in specs if (ours := _ours(s, base, RELEASES[release])) != theirs[s]]
    assert differ == [], f"{len(differ)} of {len(specs)} differ; first: {differ[:3]}"


def test_systemd_gives_up_where_jobgen_says_so():
    """The known loop, from the engine's side (the comparison above shows systemd's)."""
    assert _ours("*-01/5-01 00:00:00 Europe/Berlin", "2026-01-01 00:00:00", False) is None
    assert _ours("*-01/5-01 00:00:00 UTC", "2026-01-01 00:00:00", False) is not None


@pytest.mark.parametrize("release", RELEASES)
def test_check_warns_for_every_corpus_calendar_systemd_cannot_compute_and_no_other(release):
    """`check`'s search (timespec.search: this year's month starts and DST changes) against
    systemd from those same starts: an expression systemd gives up on from any of them is one
    check warns about, for each release; one it computes from all of them is not."""
    analyzer = _analyzer(release)
    specs = [f"{c} {zone}" for c in calendars() for zone in ZONES if zone != "UTC"]
    starts = sorted({timespec.PROBE_FROM.replace(month=m) for m in range(1, 13)}
                    | {t for zone in ZONES[1:] for change in timespec._dst_changes(zone)
                       for t in (change - timedelta(hours=1), change - timedelta(minutes=1))})
    systemd_fails: set[str] = set()
    for start in starts:
        answers = _systemd(analyzer, specs, start.strftime("%Y-%m-%d %H:%M:%S"))
        systemd_fails |= {s for s, a in answers.items() if a is None}
    warned = {s for s in specs if timespec.search(parse_calendar(s), timespec.Steps(timespec.EXPRESSION_STEPS)).loop}
    assert systemd_fails <= warned, sorted(systemd_fails - warned)
    assert "*-01/5-01 00:00:00 Europe/Berlin" in systemd_fails


@pytest.mark.parametrize("release", RELEASES)
def test_each_loop_check_warns_about_is_one_this_release_gives_up_on(release):
    """check's warning names 252 and 257 and a start: from that start, this release fails too."""
    analyzer = _analyzer(release)
    specs = [f"{c} {zone}" for c in calendars() for zone in ZONES] + [f"{s} Europe/Berlin" for s in STEP_FORMS]
    loops = {s: found.loop for s in dict.fromkeys(specs)
             if (found := timespec.search(parse_calendar(s), timespec.Steps(timespec.EXPRESSION_STEPS))).loop}
    assert "*-01/5-01 00:00:00 Europe/Berlin" in loops
    for spec, loop in loops.items():
        assert _systemd(analyzer, [spec], f"{loop.after:%Y-%m-%d %H:%M:%S}")[spec] is None, (spec, loop.after)
