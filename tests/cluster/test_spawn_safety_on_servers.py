"""A `jobgen/` package planted in the operator's working folder never runs.

`jobgen enqueue MANIFEST JOB` and `jobgen queue MANIFEST JOB` start another jobgen (the
runtime command, as the job's user); `jobgen run` starts the unit's argv (the holder). Each
is run here, by its console script as an operator types it, from a folder where another
local user planted `jobgen/__init__.py` (and `__main__.py`) that write a marker file. The
marker is never written, the request is recorded on the real redis-server, and the exit
codes are the commands' own.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from lockservers import PASSWORD, PASSWORD_VAR, token_job_manifest, RedisServer
from support.cli import Ran, jobgen

pytestmark = pytest.mark.cluster

JOBGEN_BIN = str(Path(sys.executable).parent / "jobgen")
PLANTED = "open({marker!r}, 'a').write('planted code ran\\n')\n"


@pytest.fixture
def hostile_cwd(tmp_path: Path) -> tuple[Path, Path]:
    """(working folder with a planted jobgen package, the marker it would write)."""
    cwd = tmp_path / "shared"
    (cwd / "jobgen").mkdir(parents=True)
    marker = tmp_path / "MARKER"
    for name in ("__init__.py", "__main__.py"):
        (cwd / "jobgen" / name).write_text(PLANTED.format(marker=str(marker)))
    return cwd, marker


def _manifest(tmp_path: Path, server: RedisServer, name: str) -> Path:
    envfile = tmp_path / "lock.env"
    envfile.write_text(f"{PASSWORD_VAR}='{PASSWORD}'\n")
    manifest = tmp_path / "queued.yaml"
    manifest.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"}, "jobs": {"export": {
        "command": ["/bin/true"], "schedule": "daily", "timeout": "1h", "environment_file": str(envfile),
        "overlap": "queue", "lock": {"scope": "cluster", "name": name, "backend": server.url()},
    }}}))
    return manifest


def _jobgen(cwd: Path, *args: str) -> Ran:
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_VAR}
    return jobgen(*args, cwd=cwd, env=env, program=[JOBGEN_BIN])


def test_enqueue_and_queue_from_a_planted_folder_run_jobgen_not_the_plant(redis_server, lock_name, tmp_path, hostile_cwd):
    cwd, marker = hostile_cwd
    manifest = _manifest(tmp_path, redis_server, lock_name)

    enq = _jobgen(cwd, "enqueue", str(manifest), "export", "--", "2026-11")
    assert enq.returncode == 0, enq.stderr
    request_id = enq.stdout.strip()
    assert enq.stderr.startswith(f"jobgen enqueue: export: enqueued: {request_id} (1 pending)")

    listed = _jobgen(cwd, "queue", str(manifest), "export", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert [(r["id"], r["state"], r["args"]) for r in doc["requests"]] == [(request_id, "pending", ["2026-11"])]

    assert not marker.exists(), marker.read_text()


def test_run_from_a_planted_folder_starts_the_holder_not_the_plant(redis_server, lock_name, tmp_path, hostile_cwd):
    cwd, marker = hostile_cwd
    out = tmp_path / "ran"
    manifest = token_job_manifest(tmp_path, lock_name, redis_server.url(), out)
    res = _jobgen(cwd, "run", str(manifest), "sync")
    assert res.returncode == 0, res.stderr
    assert out.read_text().startswith("token=")
    assert not marker.exists(), marker.read_text()
