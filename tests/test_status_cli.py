"""`jobgen status` when the host cannot answer or the output cannot be written: one line, its
own exit code (README "Exit codes"), nothing written. Real systemctl and journalctl, no mocks:
systemd is made unreachable by hiding /run (where systemctl finds systemd's private socket,
the D-Bus system bus and /run/systemd/system, the "booted with systemd" mark) in a private
mount namespace. What status reports on a running systemd: tests/e2e/test_status.py."""

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from jobgen.cli.exits import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OUTPUT, EXIT_REFUSED
from support.cli import JOBGEN, PLAIN, jobgen

MANIFEST = textwrap.dedent("""\
    jobgen: 1
    target: {systemd: ">=252"}
    jobs:
      report: {command: [/bin/true], schedule: daily}
    """)

# Run inside a private mount namespace with an empty /run: no systemd to reach there.
WITHOUT_SYSTEMD = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs jobgen-test /run && exec "$@"', "-"]


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(MANIFEST)
    return path


def needs(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install systemd util-linux)")


def test_unreachable_systemd_is_an_error_not_a_table_of_zeros(manifest, tmp_path):
    needs("systemctl", "journalctl", "unshare")
    if os.geteuid() != 0:
        pytest.skip("needs root (a private mount namespace)")
    # What systemctl itself says there, to quote it (its words differ between releases).
    said = subprocess.run([*WITHOUT_SYSTEMD, "systemctl", "show", "-p", "Id", "report.timer"], capture_output=True, text=True)
    assert said.returncode != 0 and said.stdout == ""
    out = tmp_path / "jobgen.prom"
    r = jobgen("status", str(manifest), "--format", "prometheus", "-o", str(out), prefix=tuple(WITHOUT_SYSTEMD))
    first = next(line for line in said.stderr.splitlines() if line.strip())
    assert r.stderr == f"jobgen: error: cannot reach systemd: systemctl show exited {said.returncode}: {first}\n"
    assert (r.returncode, r.stdout) == (EXIT_REFUSED, "")
    assert list(tmp_path.iterdir()) == [manifest]  # no textfile, no temporary file


def test_since_journalctl_cannot_read(manifest, tmp_path):
    needs("journalctl")
    r = jobgen("status", str(manifest), "--since", "garbage", "-o", str(tmp_path / "jobgen.prom"))
    assert r.stderr == ("jobgen: error: --since garbage: journalctl cannot read it as a time "
                        "(Failed to parse timestamp: garbage); give e.g. -24h, today or '2026-12-01 00:00'\n")
    assert (r.returncode, r.stdout) == (EXIT_INVALID, "")
    assert list(tmp_path.iterdir()) == [manifest]


@pytest.mark.parametrize("where,reason", [
    ("missing/jobgen.prom", "No such file or directory"),
    ("m.yaml/jobgen.prom", "Not a directory"),
])
def test_output_that_cannot_be_written(manifest, tmp_path, where, reason):
    out = tmp_path / where
    r = jobgen("status", str(manifest), "--format", "prometheus", "-o", str(out))
    assert r.stderr == f"jobgen: error: cannot write {out}: {reason}\n"
    assert (r.returncode, r.stdout) == (EXIT_OUTPUT, "")
    assert list(tmp_path.iterdir()) == [manifest]
    assert manifest.read_text() == MANIFEST


def test_output_in_a_folder_this_user_cannot_write(manifest):
    # As nobody when root (root writes anywhere), in a folder nobody can reach.
    prefix = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups") if os.geteuid() == 0 else ()
    top = Path(tempfile.mkdtemp(prefix="jobgen-status-"))
    try:
        top.chmod(0o755)
        shutil.copy(manifest, top / "m.yaml")
        (top / "m.yaml").chmod(0o644)
        folder = top / "ro"
        folder.mkdir(mode=0o555)
        r = jobgen("status", str(top / "m.yaml"), "-o", str(folder / "jobgen.prom"), prefix=prefix)
        assert r.stderr == f"jobgen: error: cannot write {folder / 'jobgen.prom'}: Permission denied\n"
        assert (r.returncode, r.stdout) == (EXIT_OUTPUT, "")
        assert list(folder.iterdir()) == []
    finally:
        shutil.rmtree(top)


def test_status_needs_the_manifest():
    r = jobgen("status")
    assert r.returncode == EXIT_INVALID and "Missing argument 'MANIFEST'" in r.stderr


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, EXIT_INTERRUPTED), (signal.SIGTERM, -signal.SIGTERM)])
def test_a_run_stopped_while_the_journal_is_read_leaves_the_textfile_as_it_was(manifest, tmp_path, signum, code):
    # Ctrl-C, or systemd stopping a status service (SIGTERM), while journalctl reads: the -o
    # file's temporary file is already made (so that an unwritable folder fails at once).
    # A journalctl that says it started, then waits on its standard input (the test's pipe).
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "journalctl").write_text('#!/bin/sh\n: > "$JOBGEN_TEST_STARTED"\nexec cat\n')
    (fake / "journalctl").chmod(0o755)
    started = tmp_path / "started"
    folder = tmp_path / "textfiles"
    folder.mkdir()
    (folder / "jobgen.prom").write_text("# the last good file\n")
    env = {**os.environ, **PLAIN, "PATH": f"{fake}:/usr/bin:/bin", "JOBGEN_TEST_STARTED": str(started)}
    proc = subprocess.Popen([*JOBGEN, "status", str(manifest), "--format", "prometheus", "-o", str(folder / "jobgen.prom")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    # Ctrl-C says so in one line, as every command does; SIGTERM ends the process by its signal.
    assert (proc.returncode, out, err) == (code, "", "jobgen: interrupted\n" if signum == signal.SIGINT else "")
    assert [(p.name, p.read_text()) for p in folder.iterdir()] == [("jobgen.prom", "# the last good file\n")]


@pytest.mark.parametrize("what,says", [
    ("exits 0 and says nothing (a stub, a wrapper that swallows it)", ""),
    ("exits 0 and says bytes that are not UTF-8", r"\377\376Id=report.timer"),
])
def test_a_systemctl_that_does_not_answer_for_the_timer_is_not_no_timer(manifest, tmp_path, what, says):
    # A real systemctl answers every unit it is asked about (LoadState=not-found for one it
    # does not know): no answer must not become a table of '-' timers, nor a traceback.
    needs("journalctl")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text(f"#!/bin/sh\nprintf '{says}'\n")
    (fake / "systemctl").chmod(0o755)
    out = tmp_path / "jobgen.prom"
    r = jobgen("status", str(manifest), "-o", str(out), env={**os.environ, "PATH": f"{fake}:/usr/bin:/bin"})
    assert r.stderr == "jobgen: error: cannot reach systemd: systemctl show said nothing about report.timer\n"
    assert (r.returncode, r.stdout) == (EXIT_REFUSED, "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "m.yaml"]


def _device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # what /dev/null is


@pytest.mark.parametrize("what,make,reason", [
    ("a device, as -o /dev/null", _device, "not a regular file"),
    ("a link, as -o /dev/stdout", lambda p: p.symlink_to("/proc/self/fd/1"), "a symbolic link"),
    ("a FIFO", os.mkfifo, "not a regular file"),
    ("a folder", lambda p: p.mkdir(), "not a regular file"),
])
def test_an_output_that_is_not_a_regular_file_is_not_replaced(manifest, tmp_path, what, make, reason):
    # -o renames a new file over the name: as root, `-o /dev/null` turned /dev/null into a
    # regular file holding the metrics.
    out = tmp_path / "out"
    make(out)
    before = os.lstat(out)
    r = jobgen("status", str(manifest), "-o", str(out))
    assert r.stderr == f"jobgen: error: cannot write {out}: {reason}; -o replaces a regular file by renaming a new one over it\n"
    assert (r.returncode, r.stdout) == (EXIT_OUTPUT, "")
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml", "out"]


def test_a_full_file_system_leaves_the_old_textfile_and_no_temporary_file(manifest, tmp_path):
    # The -o folder on a full tmpfs (in a private mount namespace): writing fails with ENOSPC,
    # and closing the temporary file flushed and failed again before it was removed, so a
    # status timer left one more `.jobgen.prom.*.tmp` at every run.
    needs("journalctl", "unshare")
    if os.geteuid() != 0:
        pytest.skip("mounts a tmpfs")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text('#!/bin/sh\nfor u in "$@"; do case "$u" in *.timer) printf "Id=%s\\nLoadState=loaded\\n'
                                    'UnitFileState=enabled\\nActiveState=active\\n\\n" "$u";; esac; done\n')
    (fake / "systemctl").chmod(0o755)
    folder = tmp_path / "full"
    folder.mkdir()
    # Mounted, filled, then jobgen; then what the folder holds, on stdout after jobgen's (none).
    full = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs -o size=64k jobgen-test "$0" && echo old > "$0/jobgen.prom" && '
            '{ head -c 1000000 /dev/zero > "$0/fill" 2>/dev/null; true; } && "$@"; code=$?; ls -A "$0"; cat "$0/jobgen.prom"; '
            'exit $code', str(folder)]
    r = jobgen("status", str(manifest), "--format", "prometheus", "-o", str(folder / "jobgen.prom"), prefix=full,
               env={**os.environ, "PATH": f"{fake}:/usr/bin:/bin"})
    assert r.stderr == f"jobgen: error: cannot write {folder / 'jobgen.prom'}: No space left on device\n"
    assert (r.returncode, r.stdout) == (EXIT_OUTPUT, "fill\njobgen.prom\nold\n")
