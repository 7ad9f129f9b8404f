"""Hostile values that systemd refuses or ignores: `check` refuses them with a positioned
line (the exact lines: tests/errors/lock-credential-*, working-directory-*,
environment-file-*, memory-max-*), and `jobgen run` refuses them again before it touches
a file, for a plan that did not come through `check`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    bad = spec._replace(credentials=((name.format(tmp=tmp), str(secret)),))
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
    bad = _spec(tmp_path, ["/bin/touch", str(marker)])._replace(credentials=(("pw", "planted"),))
    with pytest.raises(run.RunError) as exc:
        _start(bad)
    assert exc.value.code == 243
    assert str(exc.value) == ("lock.credential: the source 'planted' is not an absolute path; write "
                              "NAME:/absolute/path, e.g. 'redis-password:/etc/jobgen/redis.pass'; "
                              "nothing was read or written")
    assert not marker.exists()


JOBGEN_BIN = str(Path(sys.executable).parent / "jobgen")


def _planted_env_file(tmp_path: Path) -> Path:
    """A folder where another user wrote '-/etc/report.env': what '--/etc/report.env'
    names relative to it."""
    cwd = tmp_path / "shared"
    (cwd / "-" / "etc").mkdir(parents=True)
    (cwd / "-" / "etc" / "report.env").write_text("LD_PRELOAD=/tmp/evil.so\nMARK=planted\n")
    return cwd


def test_run_refuses_an_environment_file_that_names_the_working_folder(tmp_path: Path) -> None:
    cwd, out = _planted_env_file(tmp_path), tmp_path / "out"
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        'jobgen: 1\ntarget: {systemd: ">=252"}\njobs:\n  report:\n'
        f'    command: [/bin/sh, -c, \'echo "$MARK $LD_PRELOAD" > {out}\']\n'
        '    schedule: daily\n    environment_file: "--/etc/report.env"\n')
    r = subprocess.run([JOBGEN_BIN, "run", str(manifest), "report"], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr == (f"{manifest}:7:23: error: job 'report': 'environment_file': must be an absolute path "
                        "(optionally prefixed with one '-'), got '--/etc/report.env'\n"
                        "jobgen: 1 error; nothing written\n")
    assert not out.exists()


def test_run_never_reads_a_relative_environment_file(tmp_path: Path, monkeypatch) -> None:
    """For a plan that did not come through `check`: systemd ignores the line, and so does
    `jobgen run` — it never reads the working folder."""
    cwd = _planted_env_file(tmp_path)
    monkeypatch.chdir(cwd)
    spec = _spec(tmp_path, ["/bin/true"])._replace(environment_files=("--/etc/report.env", "-etc/x", "/../x"))
    env = run.build(spec).env
    assert "MARK" not in env and "LD_PRELOAD" not in env
