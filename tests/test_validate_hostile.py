"""Hostile values that systemd refuses or ignores: `check` refuses them with a positioned
line (the exact lines: tests/errors/lock-credential-*, working-directory-*,
environment-file-*, memory-max-*), and `jobgen run` refuses them again before it touches
a file, for a plan that did not come through `check`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from jobgen.compiler import pipeline
from jobgen.runtime import run


def _spec(tmp_path: Path, command: list[str], **job) -> run.Spec:
    path = tmp_path / "m.yaml"
    path.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"}, "jobs": {"show": {
        "command": command, "schedule": "daily", **job}}}))
    return pipeline.build(str(path), None, "/usr/bin/jobgen").plan.runs["show"]


def _start(spec) -> int:
    with open(os.devnull, "wb") as sink:
        return run.start(run.build(spec), sink, sink)


@pytest.mark.parametrize("name,why", [
    ("../../{tmp}/stolen", "the credential name '../../{tmp}/stolen' is not valid"),
    ("..", "the credential name '..' is not valid"),
    ("pw\nx", "the credential name 'pw\\nx' is not valid"),
])
def test_run_refuses_a_credential_name_before_touching_a_file(tmp_path: Path, name: str, why: str) -> None:
    """`jobgen run` as root copied the source to wherever '../..' led, owned by the job's
    user. Now: one error (status 243/CREDENTIALS), the job does not run, nothing is read or
    written."""
    secret, marker = tmp_path / "secret", tmp_path / "ran"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    spec = _spec(tmp_path, ["/bin/touch", str(marker)])
    tmp = str(tmp_path).lstrip("/")
    bad = dataclasses.replace(spec, credentials=((name.format(tmp=tmp), str(secret)),))
    with pytest.raises(run.RunError) as exc:
        _start(bad)
    assert exc.value.code == 243
    assert str(exc.value).startswith(f"lock.credential: {why.format(tmp=tmp)} (systemd ignores the line")
    assert str(exc.value).endswith("; nothing was read or written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml", "secret"]


def test_run_refuses_a_relative_credential_source(tmp_path: Path, monkeypatch) -> None:
    """A relative source would be read from the caller's working folder."""
    (tmp_path / "planted").write_text("from the working folder\n")
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "ran"
    bad = dataclasses.replace(_spec(tmp_path, ["/bin/touch", str(marker)]), credentials=(("pw", "planted"),))
    with pytest.raises(run.RunError) as exc:
        _start(bad)
    assert exc.value.code == 243
    assert str(exc.value) == ("lock.credential: the source 'planted' is not an absolute path; write "
                              "NAME:/absolute/path, e.g. 'redis-password:/etc/jobgen/redis.pass'; "
                              "nothing was read or written")
    assert not marker.exists()
