"""Host lock files: where they live, who owns them, and how their path reaches tmpfiles.d.

Threat model (README: Threat model): a lock file that another user can open is a lock
that user can hold, and a held lock makes every run of the job exit 75 ("skipped", which
counts as success: no alert). So the lock files live in /run/jobgen (in root-only /run, not
world-writable /run/lock), created by systemd-tmpfiles as 0600 owned by the job's user.

Each case runs real `systemd-tmpfiles --root=DIR --create` on the snippet jobgen rendered;
the user cases run real flock(1), touch(1) and mv(1) as real local users made by the test.
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from jobgen.compiler import names, pipeline
from jobgen.compiler.diagnostics import ManifestError
from jobgen.compiler.target import parse_target

TARGET = parse_target("252")


def render(manifest: str, name: str = "locks.yaml") -> dict[str, bytes]:
    return pipeline.build(name, TARGET, text=manifest).files


def errors(manifest: str) -> list[str]:
    with pytest.raises(ManifestError) as exc:
        pipeline.build("locks.yaml", TARGET, text=manifest)
    return [str(d) for d in exc.value.diagnostics if d.severity == "error"]


def job(path: str | None = None, user: str | None = None, hardening: str | None = None) -> str:
    lines = ["jobgen: 1", "jobs:", "  nightly:", "    command: [/bin/true]", "    schedule: daily"]
    if hardening:
        lines.append(f"    hardening: {hardening}")
    if user:
        lines.append(f"    user: {user}")
    if path is not None:
        lines += ["    lock:", "      scope: host", f"      path: {path!r}".replace("'", '"') if "'" in path else f"      path: '{path}'"]
    return "\n".join(lines) + "\n"


def tmpfiles_binary(release: str) -> list[str] | None:
    """argv of systemd-tmpfiles of a release: the host's (252 on Debian 12), or the one in
    the cached systemd tree (tests/support/sdanalyze.py), run with that tree's loader."""
    host = shutil.which("systemd-tmpfiles")
    if host:
        out = subprocess.run([host, "--version"], capture_output=True, text=True).stdout.split()
        if out[1:2] == [release]:
            return [host]
    folder = Path(os.environ.get("JOBGEN_CACHE") or Path.home() / ".cache/jobgen") / "systemd" / release
    try:
        loader = dict(line.split("=", 1) for line in (folder / "loader").read_text().splitlines() if "=" in line)
    except OSError:
        return None
    libs = ":".join(str(folder / p) for p in loader["library_path"].split(":"))
    binary = folder / "root/usr/bin/systemd-tmpfiles"
    return [str(folder / loader["ldso"]), "--library-path", libs, str(binary)] if binary.exists() else None


@pytest.fixture(params=["252", "257"], ids=lambda r: f"tmpfiles{r}")
def tmpfiles(request):
    argv = tmpfiles_binary(request.param)
    if argv is None:
        pytest.skip(f"no systemd-tmpfiles {request.param}: scripts/fetch-systemd-versions caches it")
    return argv


def tmpfiles_create(tmpfiles: list[str], root: Path, files: dict[str, bytes]) -> subprocess.CompletedProcess:
    (snippet,) = [data for name, data in files.items() if name.startswith("tmpfiles.d/")]
    conf = root / "jobgen.conf"
    conf.write_bytes(snippet)
    r = subprocess.run([*tmpfiles, f"--root={root}", "--create", str(conf)], capture_output=True, text=True)
    conf.unlink()
    return r


def tree(root: Path) -> list[str]:
    """Everything under root, as paths relative to it (etc/ is the test's own user table)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            rel = os.path.relpath(os.path.join(dirpath, n), root)
            if not rel.startswith("etc"):
                out.append(rel)
    return sorted(out)


@pytest.fixture
def root():
    d = Path(tempfile.mkdtemp(prefix="jobgen-locks-"))
    os.chmod(d, 0o755)  # other users must reach the lock folder, as on a host
    (d / "etc").mkdir()
    # systemd-tmpfiles --root resolves user names in ROOT/etc/passwd
    shutil.copy("/etc/passwd", d / "etc/passwd")
    shutil.copy("/etc/group", d / "etc/group")
    yield d
    shutil.rmtree(d)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="systemd-tmpfiles --create with owners, useradd: needs root")


# --------------------------------------------------------------------------- what is rendered


def test_lock_dir_is_root_only_run_and_files_are_0600_of_the_jobs_user():
    files = render(job(user="shop"))
    snippet = files["tmpfiles.d/jobgen-locks.conf"].decode()
    assert names.LOCK_DIR == "/run/jobgen"
    assert "d /run/jobgen 0755 root root -\n" in snippet
    assert "f /run/jobgen/nightly.lock 0600 shop root -\n" in snippet
    assert "f /run/jobgen/nightly.ended 0600 shop root -\n" in snippet  # the overrun stamp
    assert "/run/lock" not in snippet and "/run/lock" not in files["nightly.service"].decode()


@needs_root
def test_space_in_lock_path_is_one_tmpfiles_field(tmpfiles, root):
    files = render(job("/run/my jobs/nightly.lock"))
    assert b'f "/run/my jobs/nightly.lock" 0600 root root -' in files["tmpfiles.d/jobgen-locks.conf"]
    assert b'"/run/my jobs/nightly.lock"' in files["nightly.service"]  # flock's argv, quoted
    r = tmpfiles_create(tmpfiles, root, files)
    assert r.returncode == 0, r.stderr
    assert tree(root) == ["run", "run/jobgen", "run/jobgen/nightly.ended", "run/my jobs", "run/my jobs/nightly.lock"]
    st = (root / "run/my jobs/nightly.lock").stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and stat.S_ISREG(st.st_mode)


@needs_root
def test_tmpfiles_field_injection_creates_nothing_else(tmpfiles, root):
    # Written raw, this line made systemd-tmpfiles create /run/pwn, mode 0666, with content.
    evil = "/run/pwn 0666 root root - owned /x.lock"
    files = render(job(evil))
    r = tmpfiles_create(tmpfiles, root, files)
    assert r.returncode == 0, r.stderr
    assert tree(root) == [
        "run",
        "run/jobgen",
        "run/jobgen/nightly.ended",
        "run/pwn 0666 root root - owned ",
        "run/pwn 0666 root root - owned /x.lock",
    ]
    assert (root / "run" / "pwn 0666 root root - owned " / "x.lock").read_bytes() == b""
    assert stat.S_IMODE((root / "run" / "pwn 0666 root root - owned " / "x.lock").stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "path, why",
    [
        ("/run/%i/x.lock", "8:7: error: job 'nightly': 'lock.path' must not contain '%': systemd-tmpfiles would expand it as a specifier (tmpfiles.d(5)) and flock(1) would not"),
        # '..' is refused by every path key's own check, at the value, as systemd refuses it
        ("/run/jobgen/../shadow.lock", "8:13: error: job 'nightly': 'lock.path': must be a normalized path without '..'"),
        ("/run/./x.lock", "8:7: error: job 'nightly': 'lock.path' must be normalized: no '.' or '..' component, no '//' and no trailing '/'"),
        ("/run//x.lock", "8:7: error: job 'nightly': 'lock.path' must be normalized"),
    ],
)
def test_lock_paths_tmpfiles_and_flock_would_read_differently_are_refused(path, why):
    (msg,) = errors(job(path))
    assert msg.startswith(f"locks.yaml:{why}"), msg
    assert msg.endswith(f", got {path!r}"), msg


# --------------------------------------------------------------------------- other users


def sh_as(user: str, script: str, *args: str) -> subprocess.CompletedProcess:
    """script run as `user` (real uid, gid and supplementary groups of that user)."""
    return subprocess.run(
        ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "/bin/sh", "-c", script, "sh", *args],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip


@pytest.fixture
def users():
    """Two local users made for this test, removed after: the job's user, and another user
    who is even a member of the job user's group."""
    owner, other = "jobgen-t-owner", "jobgen-t-other"
    for u in (owner, other):
        subprocess.run(["userdel", u], capture_output=True)
    subprocess.run(["useradd", "--no-create-home", "--user-group", owner], check=True)
    subprocess.run(["useradd", "--no-create-home", "--user-group", "--groups", owner, other], check=True)
    try:
        yield owner, other
    finally:
        for u in (other, owner):
            subprocess.run(["userdel", u], capture_output=True)


@needs_root
def test_another_user_cannot_create_replace_or_flock_a_jobs_lock_file(root, users):
    tmpfiles = tmpfiles_binary("252") or ["systemd-tmpfiles"]
    owner, other = users
    shutil.copy("/etc/passwd", root / "etc/passwd")  # now with the two users
    shutil.copy("/etc/group", root / "etc/group")
    r = tmpfiles_create(tmpfiles, root, render(job(user=owner)))
    assert r.returncode == 0, r.stderr
    lock = root / "run/jobgen/nightly.lock"
    st = lock.stat()
    assert (pwd.getpwuid(st.st_uid).pw_name, stat.S_IMODE(st.st_mode)) == (owner, 0o600)

    # The job's user takes its lock; root can too (flock(1) as `jobgen run` uses it).
    assert sh_as(owner, 'flock --nonblock "$1" true', str(lock)).returncode == 0
    # Another user -- even one in the job user's group -- can do none of it:
    held = sh_as(other, 'flock --nonblock "$1" true', str(lock))
    assert held.returncode != 0 and "Permission denied" in held.stderr, held
    created = sh_as(other, 'touch "$1"', str(root / "run/jobgen/other.lock"))
    assert created.returncode != 0 and "Permission denied" in created.stderr, created
    replaced = sh_as(other, 'touch "$1.new" 2>/dev/null || : > /tmp/jobgen-t-$$ && mv -f /tmp/jobgen-t-$$ "$1"', str(lock))
    assert replaced.returncode != 0 and "Permission denied" in replaced.stderr, replaced
    removed = sh_as(other, 'rm -f "$1"', str(lock))
    assert removed.returncode != 0 and "Permission denied" in removed.stderr, removed
    assert lock.stat().st_ino == st.st_ino and lock.stat().st_uid == st.st_uid
    assert not (root / "run/jobgen/other.lock").exists()


def test_space_in_lock_path_stays_one_path_in_read_write_paths(tmp_path):
    # hardening: strict makes / read-only; the lock's folder is listed in ReadWritePaths=,
    # a space-separated list: unquoted, "/run/my jobs" would be "/run/my" and "jobs".
    files = render(job("/run/my jobs/nightly.lock", hardening="strict"))
    assert b'\nReadWritePaths="/run/my jobs"\n' in files["nightly.service"]
    for name in ("nightly.service", "nightly.timer"):
        (tmp_path / name).write_bytes(files[name])
    r = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "nightly.service")], capture_output=True, text=True)
    assert "ReadWritePaths" not in r.stderr, r.stderr
