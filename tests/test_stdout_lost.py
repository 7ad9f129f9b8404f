"""What jobgen's exit code says when its standard output cannot be written.

The code is the outcome of the work; text that could not be written is lost, never the code.
A command whose product is on disk or on the host (render -o, apply) keeps its own code; one
whose only product is what it prints (plan, schema, ...) cannot have succeeded and ends 73.
A reader that left (`| head -1`, EPIPE) had what it wanted: no message, the command's code.
Every other failure is one line on stderr. Never "internal error" (70) or a traceback."""

from __future__ import annotations

import fcntl
import shlex
import subprocess
from pathlib import Path

import pytest

from jobgen.cli.exits import EXIT_OK, EXIT_OUTPUT
from support.cli import JOBGEN

ROOT = Path(__file__).resolve().parent.parent
SHOP = ROOT / "examples" / "shop.yaml"
ENOSPC = "jobgen: error: cannot write the output: No space left on device\n"
EBADF = "jobgen: error: cannot write the output: Bad file descriptor\n"
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named only from Python 3.10 on some platforms
MANIFEST = """\
jobgen: 1
target: {systemd: 258}
jobs:
  tick:
    command: [/bin/true]
    schedule: hourly
"""


def sh(*args: str, redirect: str) -> subprocess.CompletedProcess:
    """jobgen ARGS with stdout redirected as a shell does it (`>/dev/full`, `>&-`)."""
    argv = " ".join(shlex.quote(a) for a in (*JOBGEN, *args))
    return subprocess.run(["/bin/sh", "-c", f"exec {argv} {redirect}"], capture_output=True, text=True, timeout=120)


@pytest.fixture
def manifest(tmp_path) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST)
    return path


def test_render_to_a_folder_keeps_its_code_when_its_listing_cannot_be_written(manifest, tmp_path):
    out = tmp_path / "out"
    r = sh("render", str(manifest), "-o", str(out), redirect=">/dev/full")
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_OK, "", ENOSPC)
    assert sorted(p.name for p in out.iterdir()) == ["tick.service", "tick.timer", "tmpfiles.d"]


def test_render_diff_whose_diff_is_lost_is_73(manifest, tmp_path):
    out = tmp_path / "out"
    r = sh("render", str(manifest), "-o", str(out), "--diff", redirect=">/dev/full")
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_OUTPUT, "", ENOSPC)
    assert not out.exists()


@pytest.mark.skipif(subprocess.run(["which", "systemctl"], capture_output=True).returncode != 0, reason="needs systemctl for --root")
def test_apply_into_an_image_keeps_its_code_when_its_report_cannot_be_written(manifest, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    r = sh("apply", str(manifest), "--root", str(root), redirect=">/dev/full")
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_OK, "", ENOSPC)
    units = root / "etc/systemd/system"
    assert (units / "tick.timer").is_file() and (units / "timers.target.wants/tick.timer").is_symlink()


@pytest.mark.parametrize("args", [("plan", str(SHOP)), ("schema",)], ids=["plan", "schema"])
@pytest.mark.parametrize("redirect, line", [(">/dev/full", ENOSPC), (">&-", EBADF)], ids=["full", "closed"])
def test_a_command_whose_product_is_its_output_is_73_when_it_cannot_be_written(args, redirect, line):
    r = sh(*args, redirect=redirect)
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_OUTPUT, "", line)


def test_a_reader_that_leaves_after_the_first_line_is_no_error():
    """`jobgen plan ... | head -1`: the writer meets EPIPE once the reader closes its end."""
    p = subprocess.Popen([*JOBGEN, "plan", str(SHOP), "--next", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The smallest pipe buffer, so that what follows the first line cannot all fit in it.
    fcntl.fcntl(p.stdout.fileno(), F_SETPIPE_SZ, 4096)
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    assert (p.wait(timeout=120), err) == (EXIT_OK, b"")
    assert first.startswith(f"{SHOP}: ".encode())


@pytest.mark.parametrize(("redirect", "says"), [(">/dev/full", ENOSPC), (">&-", EBADF)])
def test_version_that_cannot_be_written_is_one_line_and_73(redirect, says):
    """`jobgen --version` is answered before the typer app (and its guard) is imported; its
    line is its product, judged as the typer commands' output is."""
    r = sh("--version", redirect=redirect)
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_OUTPUT, "", says)


def test_version_to_a_reader_that_left_is_silent_and_0():
    p = subprocess.Popen([*JOBGEN, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before jobgen writes: its write meets no reader (EPIPE)
    assert (p.wait(timeout=120), p.stderr.read()) == (EXIT_OK, b"")


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("redirect, line", [(">/dev/full", ENOSPC), (">&-", EBADF)], ids=["full", "closed"])
def test_a_queue_listing_that_cannot_be_written_is_73_and_enqueue_keeps_its_request(tmp_path, fmt, redirect, line):
    """`jobgen queue` answers with its listing, as `status` does: lost, it is 73, never a
    silent 0 with nothing shown. enqueue's request is recorded all the same: its code
    stays 0, with the line, and the request is there."""
    store = ["--spool", str(tmp_path), "--job", "j"]
    r = sh("enqueue", *store, redirect=redirect)
    assert (r.returncode, r.stdout) == (EXIT_OK, "")
    assert r.stderr.splitlines() == [f"jobgen enqueue: j: enqueued: {next((tmp_path / 'pending').iterdir()).stem} (1 pending)",
                                     line.rstrip("\n")]
    r = sh("queue", *store, "--format", fmt, redirect=redirect)
    assert (r.returncode, r.stdout, r.stderr) == (EXIT_OUTPUT, "", line)


def test_a_queue_listing_to_a_reader_that_left_is_silent_and_0(tmp_path):
    store = ["--spool", str(tmp_path), "--job", "j"]
    for _ in range(3):
        subprocess.run([*JOBGEN, "enqueue", *store], capture_output=True, check=True, timeout=120)
    p = subprocess.Popen([*JOBGEN, "queue", *store], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before jobgen writes: its write meets no reader (EPIPE)
    assert (p.wait(timeout=120), p.stderr.read()) == (EXIT_OK, b"")
