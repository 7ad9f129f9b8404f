"""`jobgen schema`: generated from validation's key tables, and held to a real JSON Schema validator.

* every key validation knows is in the schema, and the schema has no other;
* every valid manifest of the repository (examples, test cases, lint cases, imported crontabs)
  passes the `jsonschema` package's Draft 2020-12 validator;
* a manifest the schema rejects is rejected by `jobgen check` too (one per kind of mistake).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from jobgen.compiler import validate
from jobgen.tools import crontab
from jobgen.tools.schema import schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def _jobgen(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "jobgen", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=60)


def _object(sub: dict) -> dict:
    """The object alternative of a oneOf (lock, schedule)."""
    return next(alt for alt in sub["oneOf"] if alt.get("type") == "object")


# ----------------------------------------------------------------------------- same keys as validation


def test_the_schema_is_a_valid_json_schema_and_the_cli_prints_it():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    result = _jobgen("schema")
    assert result.returncode == 0 and json.loads(result.stdout) == SCHEMA


def test_keys_are_exactly_validations_keys():
    props = SCHEMA["properties"]
    assert list(props) == list(validate.TOP_LEVEL_KEYS)
    assert set(props["jobs"]["additionalProperties"]["properties"]) == set(validate.JOB_KEYS)
    assert set(props["workers"]["additionalProperties"]["properties"]) == set(validate.WORKER_KEYS)
    assert set(props["defaults"]["properties"]) == set(validate.JOB_KEYS) | set(validate.WORKER_KEYS)
    job = props["jobs"]["additionalProperties"]["properties"]
    assert set(_object(job["lock"])["properties"]) == set(validate._LOCK_KEYS)
    assert set(_object(job["schedule"])["properties"]) == set(validate._SCHEDULE_FORMS)


def test_choices_are_validations_choices():
    job = SCHEMA["properties"]["jobs"]["additionalProperties"]["properties"]
    worker = SCHEMA["properties"]["workers"]["additionalProperties"]["properties"]
    assert job["overlap"] == {"enum": ["skip", "wait", "allow", "queue"]}
    assert job["hardening"] == {"enum": ["none", "default", "strict"]}
    assert worker["restart"] == {"enum": ["on-failure", "always", "on-abnormal", "no"]}
    assert _object(job["lock"])["properties"]["scope"] == {"enum": ["unit", "host", "cluster"]}


# ----------------------------------------------------------------------------- valid manifests pass


def _valid_manifests() -> list[Path]:
    lint = [p for p in (ROOT / "tests" / "errors").glob("*.yaml") if "# exit: 0" in p.read_text()]
    return sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("tests/cases/*.yaml"), *lint])


@pytest.mark.parametrize("path", _valid_manifests(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_valid_manifest_passes_the_schema(path):
    assert _jobgen("check", str(path.relative_to(ROOT))).returncode == 0  # valid for jobgen
    assert [e.message for e in VALIDATOR.iter_errors(yaml.safe_load(path.read_text()))] == []


@pytest.mark.parametrize("name", ["etc/crontab", "cron.d/php", "shop"])
def test_imported_crontabs_pass_the_schema(name):
    path = ROOT / "tests" / "crontabs" / name
    text = crontab.manifest(crontab.read(path.read_text(), path.name, system=crontab.system_format(str(path))), name)
    assert [e.message for e in VALIDATOR.iter_errors(yaml.safe_load(text))] == []


# ----------------------------------------------------------------------------- what the schema rejects, check rejects

REJECTED = {
    "a misspelt job key": "jobs:\n  a: {command: [/bin/true], schedule: daily, timout: 5min}\n",
    "a worker key on a job": "jobs:\n  a: {command: [/bin/true], schedule: daily, stop_timeout: 30s}\n",
    "an unknown overlap policy": "jobs:\n  a: {command: [/bin/true], schedule: daily, overlap: stack}\n",
    "an unknown top-level key": "job:\n  a: {command: [/bin/true], schedule: daily}\n",
    "a mapping as command": "jobs:\n  a: {command: {path: /bin/true}, schedule: daily}\n",
    "a relative command": "jobs:\n  a: {command: 'true', schedule: daily}\n",
    "two schedule forms": "jobs:\n  a: {command: [/bin/true], schedule: {every: 5min, after_boot: 1min}}\n",
    "an unknown lock key": "jobs:\n  a: {command: [/bin/true], schedule: daily, lock: {scope: host, file: /x.lock}}\n",
    "an unknown lock scope": "jobs:\n  a: {command: [/bin/true], schedule: daily, lock: global}\n",
    "a bad environment name": "jobs:\n  a: {command: [/bin/true], schedule: daily, environment: {1ABC: x}}\n",
    "a job name with a space": "jobs:\n  'a b': {command: [/bin/true], schedule: daily}\n",
    "instances zero": "workers:\n  w: {command: [/bin/true], stop_timeout: 30s, instances: 0}\n",
    "a bad restart": "workers:\n  w: {command: [/bin/true], stop_timeout: 30s, restart: sometimes}\n",
    "an unknown target key": "target: {version: 252}\njobs:\n  a: {command: [/bin/true], schedule: daily}\n",
    "a relative working directory": "jobs:\n  a: {command: [/bin/true], schedule: daily, working_directory: srv}\n",
}


@pytest.mark.parametrize("case", REJECTED, ids=list(REJECTED))
def test_what_the_schema_rejects_check_rejects(case, tmp_path):
    text = "jobgen: 1\n" + REJECTED[case]
    assert list(VALIDATOR.iter_errors(yaml.safe_load(text))), "the schema accepts it"
    path = tmp_path / "m.yaml"
    path.write_text(text)
    result = _jobgen("check", str(path))
    assert result.returncode == 2 and ": error: " in result.stderr


def test_readme_shows_the_editor_line():
    readme = (ROOT / "README.md").read_text()
    assert "# yaml-language-server: $schema=./jobgen.schema.json" in readme
    assert "jobgen schema > jobgen.schema.json" in readme
