"""A host lock held elsewhere, as another run of the job would hold it: flock(1) on the file."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def hold(lock: Path, seconds: int = 300) -> subprocess.Popen:
    """flock(1) holding ``lock``; returns once a probe can no longer take it (observable,
    no fixed sleep). The caller kills and waits for it."""
    holder = subprocess.Popen(["/usr/bin/flock", str(lock), "sleep", str(seconds)])
    deadline = time.monotonic() + 120  # generous: flock(1) may start slowly on a loaded machine
    while subprocess.run(["/usr/bin/flock", "--nonblock", str(lock), "true"]).returncode == 0:
        assert time.monotonic() < deadline, "the holding flock(1) never took the lock"
        time.sleep(0.1)
    return holder
