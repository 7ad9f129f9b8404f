"""`jobgen status`: what the jobs did on this host, from the journal and from systemd.

Every run of a jobgen job ends with one journal line from the reporter (compiler/plan.py
REPORTER, ExecStopPost= `logger --journald`): SYSLOG_IDENTIFIER=jobgen, JOBGEN_JOB,
JOBGEN_OUTCOME, JOBGEN_EXIT_STATUS, JOBGEN_INVOCATION_ID. `jobgen enqueue|drain` log queue
events the same way. Counting those lines in a window gives the outcomes; `systemctl show`
gives each timer's next elapse and whether it is enabled.

Any local user can send a journal entry with any of those fields, so a field the sender
writes proves nothing. A line counts only when journald's trusted fields (the ones starting
with '_', systemd.journal-fields(7), which journald fills in itself) say it came from one of
the job's own services (`Plan.journal_units`, the plan's names) and from the user those
services run as (_UID: root, or the job's `user:`; the kernel's SCM_CREDENTIALS). journald
learns _SYSTEMD_UNIT from the sender's cgroup, and loses that race when the sender has
already exited: seen on real 252 and 257 for about one reporter line in five (logger exits
right after sending). Such a line counts only if its JOBGEN_INVOCATION_ID is an activation
that systemd itself logged for that unit (PID 1's lines carry UNIT= and INVOCATION_ID=, and
_PID=1 is again the kernel's word), and one run outcome counts per activation. The job's
own user stays trusted for its own job: it can already make its runs fail or succeed.

The readers (`read_journal`, `read_show`, `attest`, `summarize`) and the formats are pure;
`collect` is the edge that runs systemctl and journalctl.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable

from jobgen.contract import outcomes
from jobgen.contract.outcomes import QUEUE_EVENTS
from jobgen.runtime import spawn

OUTCOMES = outcomes.RUN  # what the reporter writes, in the order status lists them
FORMAT_VERSION = 1
DEFAULT_SINCE = "-24h"
TIMEOUT = 60
SHOW_PROPERTIES = ("Id", "NextElapseUSecRealtime", "UnitFileState", "ActiveState", "LastTriggerUSec", "LoadState")
RUN, QUEUE = outcomes.RUN_UNIT, outcomes.QUEUE_UNIT  # Plan.journal_units kinds


class StatusError(Exception):
    """`jobgen status` cannot answer; ``kind`` says why: 'systemd' (systemctl cannot reach
    systemd), 'since' (journalctl refused --since), 'journal' (the journal cannot be read)."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


@dataclass(frozen=True)
class Source:
    """One service whose journal lines are a job's own (Plan.journal_units)."""

    job: str
    unit: str
    kind: str  # RUN or QUEUE
    uid: int | None  # what its processes run as; None: the user does not exist here


@dataclass
class JobStatus:
    name: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    last_run: float | None = None  # unix seconds of the last reporter line
    last_outcome: str | None = None
    last_exit_status: str | None = None
    next_elapse: float | None = None
    timer_enabled: bool | None = None  # None: no such timer on this host
    timer_active: bool | None = None
    queued: bool = False  # overlap: queue: the job's lines are queue events, not run outcomes
    queue_counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(QUEUE_EVENTS, 0))
    last_queue_event: str | None = None
    last_queue_time: float | None = None

    def as_json(self) -> dict:
        doc = {
            "name": self.name,
            "counts": dict(self.counts),
            "last_run": self.last_run,
            "last_outcome": self.last_outcome,
            "last_exit_status": self.last_exit_status,
            "next_elapse": self.next_elapse,
            "timer_enabled": self.timer_enabled,
            "timer_active": self.timer_active,
        }
        if self.queued:
            doc["queue"] = {"counts": dict(self.queue_counts), "last_event": self.last_queue_event,
                            "last_event_time": self.last_queue_time}
        return doc


# --------------------------------------------------------------------------- readers


def read_journal(lines: Iterable[str]) -> list[dict[str, str]]:
    """`journalctl -o json` output -> its entries, each with its fields whose value is one
    string (lines that are not JSON objects are ignored).

    journalctl gives a field the sender wrote twice as an array, one with bytes that are
    not printable UTF-8 as an array of numbers, and one past 4096 bytes as null
    (journalctl(1), -o json). Every sender can do that (a local user's `logger --journald`,
    the job's own command), and no reporter line has such a field: it is dropped, so the
    line lacks it (it is then no jobgen line, or counts nothing) instead of stopping
    status for every job."""
    out = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append({k: v for k, v in entry.items() if isinstance(v, str)})
    return out


def _unix(value: str) -> float | None:
    """A timestamp property of `systemctl show` run with TZ=UTC: 'Fri 2027-01-01 00:00:00 UTC'
    (252 ignores --timestamp=unix for NextElapseUSecRealtime), or '@1798761600'; '' for none."""
    value = value.strip()
    try:
        if value.startswith("@"):
            return float(value[1:])
        if value.endswith(" UTC"):
            return datetime.strptime(value, "%a %Y-%m-%d %H:%M:%S UTC").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None
    return None


def read_show(text: str) -> dict[str, dict[str, str]]:
    """`systemctl show UNIT... -p ...`: blocks separated by empty lines -> Id -> properties."""
    out: dict[str, dict[str, str]] = {}
    for block in text.split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if props.get("Id"):
            out[props["Id"]] = props
    return out


def _time(entry: dict) -> int:
    try:
        return int(entry.get("__REALTIME_TIMESTAMP", 0))
    except (TypeError, ValueError):
        return 0


def attest(entries: list[dict], sources: Iterable[Source]) -> list[tuple[Source, dict]]:
    """The jobgen lines journald attests as the jobs' own, each with its Source, oldest
    first (see the module's docstring for the rule and why)."""
    by_unit = {s.unit: s for s in sources}
    # Activations systemd itself logged: PID 1, as root, about one of the jobs' units.
    witnessed = {(e.get("UNIT"), e.get("INVOCATION_ID")) for e in entries
                 if e.get("_PID") == "1" and e.get("_UID") == "0" and e.get("UNIT") in by_unit}
    accepted: list[tuple[Source, dict, bool]] = []
    for entry in entries:
        job = entry.get("JOBGEN_JOB")
        if entry.get("SYSLOG_IDENTIFIER") != "jobgen" or not isinstance(job, str):
            continue
        unit = entry.get("_SYSTEMD_UNIT")
        if unit is not None:
            source, by_cgroup = by_unit.get(unit), True
        else:  # journald lost the race for the sender's cgroup: systemd's own lines must vouch
            invocation = entry.get("JOBGEN_INVOCATION_ID")
            source = next((s for s in by_unit.values() if s.job == job and (s.unit, invocation) in witnessed), None)
            by_cgroup = False
        if source is None or source.job != job or source.uid is None or entry.get("_UID") != str(source.uid):
            continue
        accepted.append((source, entry, by_cgroup))
    # One outcome per activation (the reporter writes one): journald's own unit attribution
    # first, then the last line (the reporter runs after everything else in the unit).
    runs: dict[tuple[str, str], tuple[Source, dict, bool]] = {}
    rest = []
    for source, entry, by_cgroup in accepted:
        invocation = (entry.get("_SYSTEMD_INVOCATION_ID") if by_cgroup else None) or entry.get("JOBGEN_INVOCATION_ID")
        if source.kind != RUN or not invocation:
            rest.append((source, entry))
            continue
        key = (source.unit, invocation)
        held = runs.get(key)
        if held is None or (by_cgroup, _time(entry)) >= (held[2], _time(held[1])):
            runs[key] = (source, entry, by_cgroup)
    chosen = rest + [(s, e) for s, e, _ in runs.values()]
    return sorted(chosen, key=lambda se: _time(se[1]))


def summarize(jobs: list[str], lines: list[tuple[Source, dict]], timers: dict[str, dict[str, str]],
              queued: Iterable[str] = ()) -> list[JobStatus]:
    """One JobStatus per job: outcome counts and last run from the attested lines (queue
    events apart from run outcomes), the timer's state."""
    by_job = {name: JobStatus(name) for name in jobs}
    for name in queued:
        if name in by_job:
            by_job[name].queued = True
    for source, entry in lines:
        status = by_job.get(source.job)
        if status is None:
            continue
        word = entry.get("JOBGEN_OUTCOME", "")
        when = _time(entry) / 1e6
        if source.kind == RUN and word in status.counts:
            status.counts[word] += 1
            status.last_run, status.last_outcome = when, word
            status.last_exit_status = entry.get("JOBGEN_EXIT_STATUS")
        elif source.kind == QUEUE and word in status.queue_counts:
            status.queued = True
            status.queue_counts[word] += 1
            status.last_queue_time, status.last_queue_event = when, word
    for status in by_job.values():
        props = timers.get(f"{status.name}.timer")
        if props is None or props.get("LoadState") == "not-found" or props.get("UnitFileState", "") == "":
            continue
        status.next_elapse = _unix(props.get("NextElapseUSecRealtime", ""))
        status.timer_enabled = props.get("UnitFileState") in ("enabled", "enabled-runtime", "linked", "alias")
        status.timer_active = props.get("ActiveState") == "active"
    return [by_job[name] for name in jobs]


# --------------------------------------------------------------------------- the edge


Run = Callable[..., subprocess.CompletedProcess]


def uid_of(user: str | None) -> int | None:
    """The uid a unit with User=`user` runs as on this host (root without one); None when
    no such user exists here (then none of its lines can be attested)."""
    if user is None:
        return 0
    if user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def sources_of(journal_units: dict[str, tuple[tuple[str, str], ...]], users: dict[str, str | None]) -> list[Source]:
    """Plan.journal_units and each job's user -> the Sources of attest()."""
    return [Source(job, unit, kind, uid_of(users.get(job))) for job, units in journal_units.items() for unit, kind in units]


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no message")


def _ask(run: Run, argv: list[str], env: dict[str, str], kind: str) -> subprocess.CompletedProcess:
    try:
        # errors="replace": bytes that are not UTF-8 are not a reason to fail with a traceback;
        # what is read from them is checked like any other answer.
        return run(argv, capture_output=True, text=True, errors="replace", timeout=TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        raise StatusError(kind, f"{argv[0]} did not answer within {TIMEOUT}s") from None
    except OSError as exc:  # not installed, not executable
        raise StatusError(kind, f"cannot run {argv[0]}: {exc.strerror or exc}") from None


def collect(sources: list[Source], since: str = DEFAULT_SINCE, run: Run = spawn.run) -> list[JobStatus]:
    """Ask this host: systemctl for the timers, journalctl for the jobs' lines and for
    systemd's own lines about their units. Raises StatusError."""
    jobs = list(dict.fromkeys(s.job for s in sources))
    # TZ=UTC and the C locale: timestamps come out as 'Fri 2027-01-01 00:00:00 UTC'.
    env = {**os.environ, "TZ": "UTC", "LC_ALL": "C", "SYSTEMD_COLORS": "0"}
    # The journal first: a --since journalctl cannot read is the caller's mistake, whatever
    # the state of systemd. journalctl(1): different fields AND, one field repeated ORs, '+'
    # ORs two groups.
    matches = ["SYSLOG_IDENTIFIER=jobgen", *(f"JOBGEN_JOB={j}" for j in jobs)]
    if sources:
        matches += ["+", "_PID=1", *(f"UNIT={s.unit}" for s in sources)]
    journal = _ask(run, ["journalctl", "--no-pager", "-o", "json", f"--since={since}", *matches], env, "journal")
    if journal.returncode != 0:  # no match is exit 0 (247, 252, 257, 262)
        said = _first_line(journal.stderr)
        if "timestamp" in said:
            raise StatusError("since", f"--since {since}: journalctl cannot read it as a time ({said}); "
                                       "give e.g. -24h, today or '2026-12-01 00:00'")
        raise StatusError("journal", f"cannot read the journal: journalctl exited {journal.returncode}: {said}")
    if "You are currently not seeing messages from" in journal.stderr:
        # journalctl exits 0 for a user outside the journal's groups and shows only what that
        # user may read, with this notice (src/shared/journal-util.c, 252..257): every job
        # would look idle.
        raise StatusError("journal", "cannot read the system journal as this user (journalctl shows it only to root "
                                     "and the groups systemd-journal and adm); run jobgen status as one of them")
    timers: dict[str, dict[str, str]] = {}
    if jobs:
        show = _ask(run, ["systemctl", "show", "-p", ",".join(SHOW_PROPERTIES), *(f"{j}.timer" for j in jobs)], env, "systemd")
        if show.returncode != 0:  # not booted with systemd, no bus: no timer state, and no trust in a table of zeros
            raise StatusError("systemd", f"cannot reach systemd: systemctl show exited {show.returncode}: {_first_line(show.stderr)}")
        timers = read_show(show.stdout)
        # systemctl show answers every unit it is asked about, one it does not know with
        # LoadState=not-found: no answer is not "no timer here" (a stub systemctl, a wrapper
        # that swallows output), and a table of '-' timers would say what nobody knows.
        unanswered = [f"{j}.timer" for j in jobs if f"{j}.timer" not in timers]
        if unanswered:
            raise StatusError("systemd", f"cannot reach systemd: systemctl show said nothing about {unanswered[0]}")
    lines = attest(read_journal(journal.stdout.splitlines()), sources)
    return summarize(jobs, lines, timers, {s.job for s in sources if s.kind == QUEUE})


# --------------------------------------------------------------------------- formats


def as_json(statuses: list[JobStatus], since: str) -> dict:
    return {"format": FORMAT_VERSION, "since": since, "jobs": [s.as_json() for s in statuses]}


def _label(value: str) -> str:
    """Prometheus exposition format: label values escape \\, " and newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# The label names of the metrics, in one place (README "jobgen status" and examples/alerts.rules.yml
# use them). Not `job`: Prometheus attaches its own `job` label (the scrape job) to every
# series, so a `job` label from node_exporter's textfile collector is renamed `exported_job`
# on scrape (honor_labels: false, the default) and a query on job="..." matches nothing.
JOB_LABEL = "jobgen_job"
OUTCOME_LABEL = "outcome"
EVENT_LABEL = "event"

# metric -> (help, how to get the samples of one job)
_METRICS: dict[str, tuple[str, Callable[[JobStatus], list[tuple[str, float]]]]] = {
    "jobgen_runs": (
        "Runs of the job in the window (jobgen status --since), by outcome (journal field JOBGEN_OUTCOME).",
        lambda s: [(f',{OUTCOME_LABEL}="{o}"', float(n)) for o, n in s.counts.items()],
    ),
    "jobgen_last_outcome": (
        "1 for the outcome of the job's last run in the window, 0 for the others.",
        lambda s: [(f',{OUTCOME_LABEL}="{o}"', 1.0 if s.last_outcome == o else 0.0) for o in OUTCOMES] if s.last_outcome else [],
    ),
    "jobgen_last_run_timestamp_seconds": (
        "When the job's last run in the window ended (its journal line), in unix seconds.",
        lambda s: [("", s.last_run)] if s.last_run is not None else [],
    ),
    "jobgen_queue_events": (
        "overlap: queue: requests recorded, run and put back in the window, by event (JOBGEN_OUTCOME of jobgen enqueue|drain).",
        lambda s: [(f',{EVENT_LABEL}="{e}"', float(n)) for e, n in s.queue_counts.items()] if s.queued else [],
    ),
    "jobgen_next_elapse_timestamp_seconds": (
        "When the job's timer elapses next (systemd NextElapseUSecRealtime), in unix seconds.",
        lambda s: [("", s.next_elapse)] if s.next_elapse is not None else [],
    ),
    "jobgen_timer_enabled": (
        "1 if the job's timer is enabled, 0 if not.",
        lambda s: [("", 1.0 if s.timer_enabled else 0.0)] if s.timer_enabled is not None else [],
    ),
}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def as_prometheus(statuses: list[JobStatus]) -> str:
    """node_exporter's textfile collector format (Prometheus text exposition format 0.0.4)."""
    lines = []
    for metric, (help_text, samples) in _METRICS.items():
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for status in statuses:
            for labels, value in samples(status):
                lines.append(f'{metric}{{{JOB_LABEL}="{_label(status.name)}"{labels}}} {_number(value)}')
    return "\n".join(lines) + "\n"
