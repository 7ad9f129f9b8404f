"""A status line that cannot be written is lost, never the request's.

Where there is no journal, `enqueue`, `drain` and `queue` write their journal lines to
stderr (runtime/journal.py). A caller may have closed it (`2>&-`), pointed it at a full
disk (`2>/dev/full`) or at a pipe whose reader left: the line is lost, and the work goes on
as if it had been written. Before, every drain failed on its `started` line after the
attempt was counted (exit 1): a request used up its attempts and ended in failed/ without
its command ever running; an enqueue that set a file aside said "request not recorded" (71)
or exited 1, and `queue` exited 1 with an empty listing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.contract.queue import FAILED, PENDING, RUNNING, SET_ASIDE
from support.cli import JOBGEN, PLAIN, TIMEOUT, jobgen

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="needs root and unshare (a private mount namespace)")

ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path), **PLAIN}  # the units' minimal environment
# How stderr is lost: the shell's redirection, or none (a pipe whose reader left: EPIPE).
LOST = {"closed": "2>&-", "full": "2>/dev/full", "reader-gone": ""}
STRAY = "its name is not a request id (SEQ-HEX.json)"


def without_stderr(how: str, *args: str) -> tuple[int, str]:
    """jobgen ARGS with no journal, whatever the machine (an empty /run in a private mount
    namespace, as tests/test_status_cli.py WITHOUT_SYSTEMD), and its stderr lost ``how``:
    (exit code, stdout)."""
    read, write = os.pipe()
    os.close(read)  # "reader-gone": the reader left before anything was written
    try:
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            f'mount -t tmpfs jobgen-test /run && exec "$@" {LOST[how]}', "-", *JOBGEN, *args],
                           stdout=subprocess.PIPE, stderr=write, text=True, env=ENV, timeout=TIMEOUT)
    finally:
        os.close(write)
    return r.returncode, r.stdout


def store(spool: Path) -> list[str]:
    return ["--spool", str(spool), "--job", "export"]


def enqueue(spool: Path, *args: str) -> str:
    r = jobgen("enqueue", *store(spool), "--", *args, env=ENV)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def on_disk(spool: Path) -> dict[str, list[str]]:
    return {state: sorted(os.listdir(spool / state)) for state in (PENDING, RUNNING, FAILED, SET_ASIDE)}


@pytest.mark.parametrize("how", LOST)
def test_a_drain_whose_lines_cannot_be_written_runs_each_request_once(tmp_path, how):
    spool = tmp_path / "spool"
    spool.mkdir()
    for arg in ("first", "second"):
        enqueue(spool, arg)
    ran = tmp_path / "ran"
    code, out = without_stderr(how, "drain", *store(spool), "--", "/bin/sh", "-c", f'echo "$JOBGEN_REQUEST_ATTEMPT $*" >> {ran}', "job")
    assert (code, out) == (0, "")
    assert ran.read_text() == "1 first\n1 second\n"  # each started once, on its first attempt
    assert on_disk(spool) == {PENDING: [], RUNNING: [], FAILED: [], SET_ASIDE: []}


@pytest.mark.parametrize("how", LOST)
def test_an_enqueue_that_sets_a_file_aside_records_its_request(tmp_path, how):
    spool = tmp_path / "spool"
    (spool / PENDING).mkdir(parents=True)
    (spool / PENDING / "stray").write_text("x")
    code, out = without_stderr(how, "enqueue", *store(spool), "--", "kept")
    (name,) = os.listdir(spool / PENDING)
    assert (code, out) == (0, f"{name.removesuffix('.json')}\n")
    assert json.loads((spool / PENDING / name).read_text())["args"] == ["kept"]
    assert on_disk(spool) == {PENDING: [name], RUNNING: [], FAILED: [], SET_ASIDE: ["stray"]}


@pytest.mark.parametrize("how", LOST)
def test_a_listing_that_sets_a_file_aside_is_still_the_listing(tmp_path, how):
    spool = tmp_path / "spool"
    spool.mkdir()
    rid = enqueue(spool, "kept")
    (spool / PENDING / "stray").write_text("x")
    code, out = without_stderr(how, "queue", *store(spool))
    head, row, aside = out.splitlines()
    assert (code, head) == (0, f"# export: 1 pending, 0 running, 0 failed, 1 {SET_ASIDE}")
    assert row.startswith(f"pending  {rid}  age ") and row.endswith("  attempts 0  kept")
    assert aside == f"{SET_ASIDE} {spool / SET_ASIDE / 'stray'}  ({STRAY}; never run: inspect it, then remove it)"
