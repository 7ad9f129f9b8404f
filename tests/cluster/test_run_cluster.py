"""`jobgen run` of a cluster-locked job: the holder gets the unit's environment, including
the variables of `environment_file` that the backend URL's `${VAR}` refers to (before,
the file was ignored and the run failed with 78)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockservers import PASSWORD, PASSWORD_VAR, Server

pytestmark = pytest.mark.cluster

JOBGEN_BIN = str(Path(sys.executable).parent / "jobgen")


def test_run_takes_the_backend_password_from_the_environment_file(server: Server, lock_name,
                                                                   tmp_path):
    out = tmp_path / "out"
    envfile = tmp_path / "lock.env"
    envfile.write_text(f"{PASSWORD_VAR}='{PASSWORD}'\n")
    manifest = tmp_path / "cluster.yaml"
    manifest.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"}, "jobs": {"sync": {
        "command": ["/bin/sh", "-c", f'echo "token=$JOBGEN_LOCK_TOKEN" > "{out}"'],
        "schedule": "daily", "timeout": "1h", "environment_file": str(envfile),
        "lock": {"scope": "cluster", "name": lock_name, "backend": server.url()},
    }}}))
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_VAR}  # not from the caller
    res = subprocess.run([JOBGEN_BIN, "run", str(manifest), "sync", "--holder", JOBGEN_BIN],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert out.read_text().startswith("token=")
    assert PASSWORD not in res.stderr
