"""Owning a command's process tree (runtime/tree.py), as `jobgen lock` and the queue
drainer do: a command that leaves nothing behind is started, drained and reaped without
a /proc scan (each reads every process on the host); one that leaves a process behind
still has it found, killed and reaped. Each case runs in a fresh interpreter, whose only
children are the ones it starts (pytest's own process may have others)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from jobgen.runtime import tree

scans = []
scan = tree._scan
tree._scan = lambda: scans.append(1) or scan()
before = tree.has_children()
owned = tree.Tree.start(sys.argv[1:], {"PATH": "/usr/bin:/bin"})
status = owned.proc.wait()
left = len(owned.members())
owned.kill()
owned.reap()
print(json.dumps({"before": before, "status": status, "left": left, "scans": len(scans),
                  "after": tree.has_children(), "subreaper": tree.is_subreaper()}))
"""


def probe(*argv: str) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                       timeout=60, check=True)
    return json.loads(r.stdout)


def test_a_command_that_leaves_nothing_behind_is_owned_without_a_proc_scan() -> None:
    assert probe("true") == {"before": False, "status": 0, "left": 0, "scans": 0,
                             "after": False, "subreaper": False}


@pytest.mark.parametrize("script", ["sleep 60 & exit 3", "(setsid sleep 60 &); exit 3"])
def test_a_process_left_behind_is_still_found_killed_and_reaped(script: str) -> None:
    got = probe("sh", "-c", script)
    assert got["status"] == 3 and got["left"] == 1
    assert got["scans"] > 0  # found by the scan the children check lets through
    assert got["after"] is False and got["subreaper"] is False
