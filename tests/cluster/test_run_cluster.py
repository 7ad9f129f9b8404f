"""`jobgen run` of a cluster-locked job: the holder gets the unit's environment, including
the variables of `environment_file` that the backend URL's `${VAR}` refers to (before,
the file was ignored and the run failed with 78)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockservers import PASSWORD, PASSWORD_VAR, token_job_manifest, Server

pytestmark = pytest.mark.cluster

JOBGEN_BIN = str(Path(sys.executable).parent / "jobgen")


def test_run_takes_the_backend_password_from_the_environment_file(server: Server, lock_name,
                                                                   tmp_path):
    out = tmp_path / "out"
    manifest = token_job_manifest(tmp_path, lock_name, server.url(), out)
    env = {k: v for k, v in os.environ.items() if k != PASSWORD_VAR}  # not from the caller
    res = subprocess.run([JOBGEN_BIN, "run", str(manifest), "sync", "--holder", JOBGEN_BIN],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert out.read_text().startswith("token=")
    assert PASSWORD not in res.stderr
