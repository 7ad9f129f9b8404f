"""`jobgen status`: what the jobs did on this host, from the journal and from systemd.

Every run of a jobgen job ends with one journal line from the reporter (compiler/plan.py
REPORTER): SYSLOG_IDENTIFIER=jobgen, JOBGEN_JOB, JOBGEN_OUTCOME, JOBGEN_EXIT_STATUS. Counting
those lines in a window gives the outcomes; `systemctl show` gives each timer's next elapse and
whether it is enabled.

The readers (`read_journal`, `read_show`) and the formats are pure; `collect` is the edge that
runs journalctl and systemctl.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable

from jobgen.runtime import spawn

# What the reporter writes (compiler/plan.py REPORTER), in the order status lists them.
OUTCOMES = ("success", "failed", "timeout", "skipped", "wait-expired", "deferred")
FORMAT_VERSION = 1
DEFAULT_SINCE = "-24h"
TIMEOUT = 60
SHOW_PROPERTIES = ("Id", "NextElapseUSecRealtime", "UnitFileState", "ActiveState", "LastTriggerUSec")


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

    def as_json(self) -> dict:
        return {
            "name": self.name,
            "counts": dict(self.counts),
            "last_run": self.last_run,
            "last_outcome": self.last_outcome,
            "last_exit_status": self.last_exit_status,
            "next_elapse": self.next_elapse,
            "timer_enabled": self.timer_enabled,
            "timer_active": self.timer_active,
        }


# --------------------------------------------------------------------------- readers


def read_journal(lines: Iterable[str]) -> list[dict]:
    """`journalctl -o json` output -> the reporter's entries (other lines are ignored)."""
    out = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("SYSLOG_IDENTIFIER") == "jobgen" and isinstance(entry.get("JOBGEN_JOB"), str):
            out.append(entry)
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


def summarize(jobs: list[str], entries: list[dict], timers: dict[str, dict[str, str]]) -> list[JobStatus]:
    """One JobStatus per job: outcome counts and last run from the entries, the timer's state."""
    by_job = {name: JobStatus(name) for name in jobs}
    for entry in sorted(entries, key=lambda e: int(e.get("__REALTIME_TIMESTAMP", 0))):
        status = by_job.get(entry["JOBGEN_JOB"])
        if status is None:
            continue
        outcome = entry.get("JOBGEN_OUTCOME", "")
        if outcome in status.counts:
            status.counts[outcome] += 1
        status.last_run = int(entry.get("__REALTIME_TIMESTAMP", 0)) / 1e6
        status.last_outcome = outcome
        status.last_exit_status = entry.get("JOBGEN_EXIT_STATUS")
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


def collect(jobs: list[str] | None, since: str = DEFAULT_SINCE, run: Run = spawn.run) -> list[JobStatus]:
    """Ask this host: journalctl for the reporter's lines, systemctl for the timers.

    jobs None: every job that logged in the window."""
    matches = ["SYSLOG_IDENTIFIER=jobgen"] + [f"JOBGEN_JOB={j}" for j in jobs or ()]
    journal = run(["journalctl", "--no-pager", "-o", "json", f"--since={since}", *matches],
                  capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    if journal.returncode not in (0, 1):  # 1: nothing matched on some versions
        raise RuntimeError(f"journalctl failed (exit {journal.returncode}): {journal.stderr.strip()}")
    entries = read_journal(journal.stdout.splitlines())
    if jobs is None:
        jobs = sorted({e["JOBGEN_JOB"] for e in entries})
    timers: dict[str, dict[str, str]] = {}
    if jobs:
        # TZ=UTC and the C locale: timestamps come out as 'Fri 2027-01-01 00:00:00 UTC'.
        env = {**os.environ, "TZ": "UTC", "LC_ALL": "C"}
        show = run(["systemctl", "show", "-p", ",".join(SHOW_PROPERTIES) + ",LoadState", *(f"{j}.timer" for j in jobs)],
                   capture_output=True, text=True, timeout=TIMEOUT, env=env)  # fmt: skip
        timers = read_show(show.stdout)
    return summarize(jobs, entries, timers)


# --------------------------------------------------------------------------- formats


def as_json(statuses: list[JobStatus], since: str) -> dict:
    return {"format": FORMAT_VERSION, "since": since, "jobs": [s.as_json() for s in statuses]}


def _label(value: str) -> str:
    """Prometheus exposition format: label values escape \\, " and newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# metric -> (help, how to get the samples of one job)
_METRICS: dict[str, tuple[str, Callable[[JobStatus], list[tuple[str, float]]]]] = {
    "jobgen_runs": (
        "Runs of the job in the window (jobgen status --since), by outcome (journal field JOBGEN_OUTCOME).",
        lambda s: [(f',outcome="{o}"', float(n)) for o, n in s.counts.items()],
    ),
    "jobgen_last_outcome": (
        "1 for the outcome of the job's last run in the window, 0 for the others.",
        lambda s: [(f',outcome="{o}"', 1.0 if s.last_outcome == o else 0.0) for o in OUTCOMES] if s.last_outcome else [],
    ),
    "jobgen_last_run_timestamp_seconds": (
        "When the job's last run in the window ended (its journal line), in unix seconds.",
        lambda s: [("", s.last_run)] if s.last_run is not None else [],
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
                lines.append(f'{metric}{{job="{_label(status.name)}"{labels}}} {_number(value)}')
    return "\n".join(lines) + "\n"
