"""Every overlap policy has a behaviour in every command that speaks of policies.

contract/policies.py OVERLAP is the list: a policy is a row there plus its code in each
command. This test takes each row (never a list of names written here) and asks each
command what it does with a job of that policy, through the command's own function (the
body `jobgen COMMAND` runs, called without the command line):

  check   the job validates;
  render  the service runs under the policy's lock (flock iff it locks) and its reporter
          logs the policy's conflict word, or, for a queueing policy, the trigger records a
          request and NAME-drain.service runs them;
  plan    the report names the policy and says its overrun and hung-run consequences;
  status  the policy's conflict word is a column, and a queueing job's units are read
          for queue events;
  run     `jobgen run` ends a lock conflict with the policy's word (or records a request);
  schema  the policy is in the JSON Schema's enum of `overlap`, with its description.

test_a_policy_row_without_its_code_fails_every_command adds a row to the table alone (a
policy without its code) and shows each command's check catches it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from jobgen.cli import check as check_cmd
from jobgen.cli import plan as plan_cmd
from jobgen.cli import render as render_cmd
from jobgen.cli import schema as schema_cmd
from jobgen.cli import status as status_cmd
from jobgen.cli.answer import Ended, Format
from jobgen.compiler import pipeline
from jobgen.compiler.plan import DEFAULT_HOLDER
from jobgen.compiler.target import parse_target
from jobgen.contract import outcomes, policies
from jobgen.contract.policies import OVERLAP
from jobgen.host import status as host_status
from jobgen.runtime import run as runtime
from jobgen.tools.schema import SCHEMA_ID

CONFLICT_EXIT = "75"  # contract/locks.py: what the lock wrapper exits with on a conflict
COMMANDS = ("check", "render", "plan", "status", "run", "schema")


def manifest(folder: Path, name: str) -> Path:
    """Two jobs of policy ``name``: 'long' can outlast its interval (a plan risk), 'hang'
    has no timeout (the hung-run risk)."""
    policy = OVERLAP[name]
    lines = ["jobgen: 1", "target: {systemd: '257'}", "jobs:"]
    for job, keys in (("long", ["schedule: hourly", "timeout: 2h"]), ("hang", ["schedule: daily"])):
        lines += [f"  {job}:", "    command: [/bin/true]", *(f"    {k}" for k in keys), f"    overlap: {name}"]
        if policy.waits:
            lines.append("    wait_timeout: 1min")
    path = folder / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def call(capsys, command: Callable[..., int], *args, **kw) -> tuple[int, str, str]:
    """A command's function as `jobgen` runs it: (exit code, stdout, stderr)."""
    try:
        code = command(*args, **kw)
    except Ended as exc:  # build_all's "problems in the manifest"
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- each command's check
# Each returns what is missing for the policy (empty: the command handles it).

def check_problems(name: str, tmp_path: Path, capsys) -> list[str]:
    code, out, err = call(capsys, check_cmd.check, [manifest(tmp_path, name)])
    return [] if code == 0 and f"{tmp_path / name}.yaml: ok (" in out else [f"check: exit {code}: {err.strip()}"]


def render_problems(name: str, tmp_path: Path, capsys) -> list[str]:
    policy, out_dir = OVERLAP[name], tmp_path / "units"
    code, _, err = call(capsys, render_cmd.render, [manifest(tmp_path, name)], output=out_dir, holder=DEFAULT_HOLDER,
                        layout_name="flat")
    if code != 0:
        return [f"render: exit {code}: {err.strip()}"]
    service = (out_dir / "long.service").read_text()
    start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    problems = []
    if policy.queues:
        if f"{DEFAULT_HOLDER} enqueue" not in start or not (out_dir / "long-drain.service").exists():
            problems.append("render: a queueing policy's trigger must record a request and a drainer run it")
    else:
        if ("flock" in start) is not policy.locks:
            problems.append(f"render: the service's lock is not the policy's (locks={policy.locks}): {start}")
        stop = next((line for line in service.splitlines() if line.startswith("ExecStopPost=")), "")
        if not stop.endswith(f" {policy.conflict_outcome}"):
            problems.append(f"render: the reporter does not log '{policy.conflict_outcome}' for a conflict: {stop}")
    return problems


def plan_problems(name: str, tmp_path: Path, capsys) -> list[str]:
    policy = OVERLAP[name]
    code, out, err = call(capsys, plan_cmd.plan, manifest(tmp_path, name), job=None, next_=1,
                          start="2026-03-01T00:00:00Z", local_zone="UTC", fmt=Format.json)
    if code != 0:
        return [f"plan: exit {code}: {err.strip()}"]
    jobs = {j["name"]: j for j in json.loads(out)["jobs"]}
    risks = {job: {r["code"]: r["message"] for r in j["risks"]} for job, j in jobs.items()}
    problems = [f"plan: job {job} is reported with overlap {j['overlap']}" for job, j in jobs.items() if j["overlap"] != name]
    if not risks["long"].get("timeout-exceeds-interval", "").endswith(f": {policy.overrun_consequence}"):
        problems.append(f"plan: the overrun risk does not say '{policy.overrun_consequence}': {risks['long']}")
    if not risks["hang"].get("no-timeout", "").endswith(policy.hung_run_consequence):
        problems.append(f"plan: the hung-run risk does not say '{policy.hung_run_consequence}': {risks['hang']}")
    return problems


def _built(name: str, tmp_path: Path):
    try:
        return pipeline.build(str(manifest(tmp_path, name)), parse_target("257")), None
    except Exception as exc:  # noqa: BLE001 - a policy the compiler refuses is the finding
        return None, f"{type(exc).__name__}: {exc}"


def status_problems(name: str, tmp_path: Path, capsys) -> list[str]:
    policy = OVERLAP[name]
    header = status_cmd._text([], "-24h")[1].split()
    problems = []
    if policy.locks and policy.conflict_outcome not in header:
        problems.append(f"status: no column for '{policy.conflict_outcome}' (columns: {header})")
    result, why = _built(name, tmp_path)
    if result is None:
        return [*problems, f"status: the manifest does not compile: {why}"]
    kinds = {source.kind for source in host_status.sources_of(result.plan.journal_units, {})}
    expected = outcomes.QUEUE_UNIT if policy.queues else outcomes.RUN_UNIT
    if kinds != {expected}:
        problems.append(f"status: the job's units are read as {kinds}, not {expected}")
    return problems


def run_problems(name: str, tmp_path: Path, capsys) -> list[str]:
    policy = OVERLAP[name]
    result, why = _built(name, tmp_path)
    if result is None:
        return [f"run: the manifest does not compile: {why}"]
    spec = result.plan.runs["long"]
    if policy.queues:
        return [] if spec.argv[1:2] == ("enqueue",) else [f"run: a queueing job's run must record a request: {spec.argv}"]
    problems = []
    if policy.locks and runtime.outcome("success", "exited", CONFLICT_EXIT, spec.conflict_outcome) != policy.conflict_outcome:
        problems.append(f"run: a lock conflict does not end '{policy.conflict_outcome}'")
    if (spec.argv[0] == "/usr/bin/flock") is not policy.locks:
        problems.append(f"run: the run's lock is not the policy's (locks={policy.locks}): {spec.argv}")
    return problems


def schema_problems(name: str, tmp_path: Path, capsys) -> list[str]:
    code, out, _ = call(capsys, schema_cmd.schema, SCHEMA_ID)
    overlap = json.loads(out)["properties"]["jobs"]["additionalProperties"]["properties"]["overlap"]
    problems = [] if code == 0 and name in overlap["enum"] else [f"schema: '{name}' is not in the enum {overlap['enum']}"]
    if not any(text.startswith(f"{name}: ") for text in overlap.get("enumDescriptions", [])):
        problems.append(f"schema: no description of '{name}'")
    return problems


CHECKS = {"check": check_problems, "render": render_problems, "plan": plan_problems,
          "status": status_problems, "run": run_problems, "schema": schema_problems}


def test_every_command_that_speaks_of_policies_is_checked():
    assert tuple(CHECKS) == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("policy", tuple(OVERLAP))
def test_every_policy_has_a_behaviour_in_every_command(policy: str, command: str, tmp_path: Path, capsys) -> None:
    assert CHECKS[command](policy, tmp_path, capsys) == []


# --------------------------------------------------------------------------- a row without its code

FAKE = policies.OverlapPolicy("fake", locks=True, waits=False, conflict_outcome="fake-conflict", defers_overrun=False,
                              every_from_end=False, overrun_consequence="runs pile up somewhere new",
                              hung_run_consequence="later runs do something new")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_policy_row_without_its_code_fails_every_command(command: str, tmp_path: Path, capsys, monkeypatch) -> None:
    """The table is the list the test takes: a row added there alone (no validation
    choice, no outcome word, no schema entry) is a policy without behaviour, and each
    command's check says so."""
    monkeypatch.setitem(OVERLAP, FAKE.name, FAKE)
    assert FAKE.name in tuple(OVERLAP)  # what the parametrized test above would now take
    assert CHECKS[command](FAKE.name, tmp_path, capsys) != []
