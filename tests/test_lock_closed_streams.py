"""`jobgen lock` run with its output streams closed (`2>&-`, `>&-`) still ends with the
outcome's exit code: the code is then the only word a caller gets, so a closed stream
must not turn "server unreachable" (69) into a crash's 1.

No server is needed: port 1 on loopback refuses at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.contract.locks import EXIT

JOBGEN = Path(sys.executable).with_name("jobgen")
LOCK = ("lock", "--backend", "redis://127.0.0.1:1/0", "--name", "closed-streams", "--connect-timeout", "5", "--", "/bin/true")


@pytest.mark.parametrize("closed", ["2>&-", ">&- 2>&-", ">&-"])
def test_a_closed_stream_leaves_the_outcomes_exit_code(closed: str) -> None:
    pytest.importorskip("redis")
    argv = " ".join([str(JOBGEN), *LOCK])
    r = subprocess.run(["/bin/sh", "-c", f"exec {argv} {closed}"], capture_output=True, text=True,
                       env={"PATH": os.environ["PATH"]}, timeout=60)
    assert r.returncode == EXIT["unreachable"][0], (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stdout + r.stderr
