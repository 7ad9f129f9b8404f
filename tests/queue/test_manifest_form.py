"""`jobgen enqueue|queue MANIFEST JOB` answer as the units' `--spool` form does.

The manifest form starts a child jobgen in the job's process context (cli/queue.py) and
relays its output. What the child's answer meets on our side (a full disk, a closed
stdout) is judged as the --spool form judges its own (exits.judged): the same line, and
73 when the listing was the product. Before, the relay dropped it: exit 0, nothing said.

The manifest form's spool is /var/lib/jobgen/queue/JOB: each run here has a /var/lib of
the test's own (a bind mount in a private mount namespace, as tests/test_crontab.py).
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from jobgen.cli.exits import EXIT_OUTPUT
from support.cli import JOBGEN, PLAIN, TIMEOUT

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="needs root and unshare (a private mount namespace)")

MANIFEST = """\
jobgen: 1
target: {systemd: 258}
jobs:
  q:
    command: [/bin/true]
    schedule: hourly
    overlap: queue
"""
ENOSPC = "jobgen: error: cannot write the output: No space left on device\n"
EBADF = "jobgen: error: cannot write the output: Bad file descriptor\n"


@pytest.fixture
def host(tmp_path) -> Path:
    """A folder that is /var/lib for the runs, with job q's spool as tmpfiles.d makes it."""
    (tmp_path / "var-lib" / "jobgen" / "queue" / "q").mkdir(parents=True, mode=0o700)
    (tmp_path / "m.yaml").write_text(MANIFEST)
    return tmp_path


def sh(host: Path, *args: str, redirect: str = "") -> tuple[int, str, str]:
    """jobgen ARGS with ``host``/var-lib as /var/lib and stdout redirected as a shell does
    it (`>/dev/full`, `>&-`): (exit code, stdout, stderr)."""
    argv = " ".join(shlex.quote(a) for a in (*JOBGEN, *args))
    script = f"mount --bind {shlex.quote(str(host / 'var-lib'))} /var/lib && exec {argv} {redirect}"
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script], cwd=host,
                       capture_output=True, text=True, env={**os.environ, **PLAIN}, timeout=TIMEOUT)
    return r.returncode, r.stdout, r.stderr


def pending(host: Path) -> list[str]:
    return sorted(p.name.removesuffix(".json") for p in (host / "var-lib/jobgen/queue/q/pending").iterdir())


SPOOL = ["--spool", "/var/lib/jobgen/queue/q", "--job", "q"]


@pytest.mark.parametrize("redirect, line", [(">/dev/full", ENOSPC), (">&-", EBADF)], ids=["full", "closed"])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_listing_of_the_manifest_form_that_cannot_be_written_is_73_as_the_spool_forms(host, fmt, redirect, line):
    assert sh(host, "queue", "m.yaml", "q", "--format", fmt, redirect=redirect) == (EXIT_OUTPUT, "", line)
    assert sh(host, "queue", *SPOOL, "--format", fmt, redirect=redirect) == (EXIT_OUTPUT, "", line)


@pytest.mark.parametrize("redirect, line", [(">/dev/full", ENOSPC), (">&-", EBADF)], ids=["full", "closed"])
def test_an_enqueue_of_the_manifest_form_whose_id_cannot_be_written_is_recorded_and_0(host, redirect, line):
    code, out, err = sh(host, "enqueue", "m.yaml", "q", "--", "kept", redirect=redirect)
    (rid,) = pending(host)
    assert (code, out, err) == (0, "", f"jobgen enqueue: q: enqueued: {rid} (1 pending)\n{line}")
    code, out, err = sh(host, "enqueue", *SPOOL, "--", "kept", redirect=redirect)
    (_, rid) = pending(host)
    assert (code, out, err) == (0, "", f"jobgen enqueue: q: enqueued: {rid} (2 pending)\n{line}")


def test_an_enqueue_too_long_for_one_command_line_is_not_recorded_and_64(host):
    # The child jobgen's command line is the request's arguments and the job's environment:
    # past execve(2)'s limit (E2BIG) it was an internal error (70). Said as the --spool form
    # says arguments too big for one request, with its code. The limit is a quarter of the
    # stack limit (execve(2)): 8 MiB of stack make it 2 MiB here, whatever the caller's.
    # A word is at most 128 KiB (MAX_ARG_STRLEN), an environment value 64 KiB (README
    # "Limits"): the arguments, 1.94 MB, reach us; with the job's 240 KB of environment on
    # top of them they do not reach the child.
    environment = "".join(f"      BIG{n}: {'x' * 60_000}\n" for n in range(4))
    (host / "m.yaml").write_text(MANIFEST + "    environment:\n" + environment)
    words = ["y" * 97_000] * 20
    script = f"mount --bind {shlex.quote(str(host / 'var-lib'))} /var/lib && exec \"$@\""
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "-",
                        *JOBGEN, "enqueue", "m.yaml", "q", "--", *words], cwd=host, capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", **PLAIN}, timeout=TIMEOUT,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_STACK, (8 << 20, 8 << 20)))
    assert (r.returncode, r.stdout, r.stderr) == (64, "", "jobgen enqueue: q: rejected: request not recorded (the arguments "
                                                  "with the job's environment are too long for one command line: Argument list too long)\n")
    assert os.listdir(host / "var-lib/jobgen/queue/q") == []  # the spool as tmpfiles.d made it: nothing written
