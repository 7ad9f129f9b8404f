"""Boot real systemd in a container and drive units inside it.

jobgen's end-to-end tests run the units it renders under the systemd releases it targets:
Debian 12 (bookworm, systemd 252) and Debian 13 (trixie, systemd 257). The machine running
the tests need not run systemd as PID 1, so the container is booted with systemd-nspawn in
the mode that works without a host manager or D-Bus, and everything inside is driven with
nsenter + systemctl/journalctl (they talk to the container's manager over
/run/systemd/private, no D-Bus needed).

Traps this module avoids (each seen on the development machines, see the comments below):
- never bind-mount host device nodes into the container: a booted systemd re-owned the
  host's /dev/null once; systemd-nspawn builds its own /dev, and teardown checks /dev/null;
- without `--keep-unit` nspawn wants D-Bus; with it, nspawn splits *its own* cgroup into
  supervisor/ and payload/, so it is started inside a cgroup of its own, removed afterwards;
- nspawn leaves /run/systemd/nspawn/* behind on a disk-backed /run, so it runs in a private
  mount namespace with a tmpfs over /run/systemd;
- systemd >= 256 refuses the hybrid cgroup layout: SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import hashlib
import io
import json
import os
import platform
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

# systemd release under test -> Debian suite whose root filesystem carries it.
RELEASES = {"252": "bookworm", "257": "trixie"}

# What the root filesystem holds beyond debootstrap's minbase: systemd as init, util-linux for
# flock(1) and logger(1) (the lock and the outcome reporter of jobgen's units), procps so a
# scenario can find and kill a job's process, python3 + python3-venv so jobgen itself (the
# wheel built from the worktree) runs where systemd runs: `jobgen apply`, `jobgen run`, the
# generator, `jobgen lock`. No dbus: nothing here needs systemd-run/busctl.
ROOTFS_PACKAGES = ("systemd", "systemd-sysv", "util-linux", "procps", "python3", "python3-venv")

# Timers that would only add noise (and journal lines) to a throw-away container.
ROOTFS_MASKED_UNITS = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "systemd-tmpfiles-clean.timer",
)

# Bump when the recipe above changes: the version is part of the cache path (rootfs/SUITE.vN),
# so a worktree still on an older recipe keeps its own tree instead of rebuilding ours, and
# a tree with another stamp at our path is rebuilt.
ROOTFS_RECIPE = {"version": 2, "packages": ROOTFS_PACKAGES, "masked": ROOTFS_MASKED_UNITS}
ROOTFS_STAMP = "etc/jobgen-e2e-rootfs.json"

CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CGROUP_PREFIX = "jobgen-e2e-"
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

BOOT_TIMEOUT = 60.0
HALT_TIMEOUT = 30.0


class HarnessError(RuntimeError):
    """The container could not be built, booted or cleaned up."""


# ---------------------------------------------------------------------------------------------
# Host prerequisites and the cache


def cache_dir() -> Path:
    return Path(os.environ.get("JOBGEN_CACHE") or Path.home() / ".cache" / "jobgen")


def nspawn_binary() -> str | None:
    """systemd-nspawn unpacked by scripts/fetch-container-tools, else one on PATH."""
    cached = cache_dir() / "tools" / "systemd-nspawn"
    if os.access(cached, os.X_OK):
        return str(cached)
    return shutil.which("systemd-nspawn")


def missing_prerequisites(suites: list[str]) -> str | None:
    """Why the container tests cannot run here, naming what to run; None when they can."""
    if os.geteuid() != 0:
        return "booting systemd in a container needs root (as root: scripts/bootstrap, scripts/fetch-container-tools, then the e2e tests)"
    if nspawn_binary() is None:
        return "systemd-nspawn not found: run scripts/fetch-container-tools"
    for tool in ("nsenter", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found: run scripts/bootstrap (package util-linux)"
    if not all(rootfs_ready(s) for s in suites) and shutil.which("debootstrap") is None:
        return "debootstrap not found (needed to build the root filesystems): run scripts/bootstrap"
    if not cgroup_roots():
        return "cgroup hierarchy not found under /sys/fs/cgroup: mount cgroup2 there"  # a missing component: a CI failure (tests/conftest.py)
    return None


def debian_mirror() -> str:
    """The host's own Debian mirror (the only network these machines reach)."""
    if os.environ.get("JOBGEN_DEBIAN_MIRROR"):
        return os.environ["JOBGEN_DEBIAN_MIRROR"]
    for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
        for line in Path(path).read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    with contextlib.suppress(OSError):
        for line in Path("/etc/apt/sources.list").read_text().splitlines():
            words = line.split()
            if words and words[0] == "deb":
                return next(w for w in words[1:] if w.startswith("http"))
    return "http://deb.debian.org/debian"


# ---------------------------------------------------------------------------------------------
# Root filesystems: one cached tree per suite, built once, booted read-only (--volatile=overlay)


def rootfs_path(suite: str) -> Path:
    return cache_dir() / "rootfs" / f"{suite}.v{ROOTFS_RECIPE['version']}"


def rootfs_ready(suite: str) -> bool:
    try:
        stamp = json.loads((rootfs_path(suite) / ROOTFS_STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp == json.loads(json.dumps(ROOTFS_RECIPE))


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive flock(2): two test runs never debootstrap the same suite at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_rootfs(suite: str) -> float | None:
    """Build the suite's tree unless a current one is cached; seconds spent building, or None."""
    final = rootfs_path(suite)
    with _file_lock(final.parent / f".{final.name}.lock"):
        if rootfs_ready(suite):
            return None
        started = time.monotonic()
        # Built next to its final place (same file system) and renamed in one step, so a
        # half-built tree is never mistaken for a cached one.
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.build-", dir=final.parent))
        try:
            tree = work / "root"
            _debootstrap(suite, tree)
            _prepare_tree(tree)
            (tree / ROOTFS_STAMP).write_text(json.dumps(ROOTFS_RECIPE, indent=1) + "\n")
            if final.exists():
                final.rename(work / "old")
            tree.rename(final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return time.monotonic() - started


def ensure_rootfs_all(suites: list[str]) -> dict[str, float | None]:
    """Build missing trees in parallel (each is mostly waiting on the mirror and dpkg)."""
    results: dict[str, float | None] = {}
    errors: list[BaseException] = []

    def build(suite: str) -> None:
        try:
            results[suite] = ensure_rootfs(suite)
        except BaseException as e:  # reported in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=build, args=(s,)) for s in suites]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def _debootstrap(suite: str, tree: Path) -> None:
    argv = [
        "debootstrap",
        "--variant=minbase",
        "--include=" + ",".join(ROOTFS_PACKAGES),
        f"--keyring={DEBIAN_KEYRING}",
        suite,
        str(tree),
        debian_mirror(),
    ]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1800)
    if r.returncode != 0:
        log = tree / "debootstrap" / "debootstrap.log"
        detail = log.read_text()[-4000:] if log.exists() else r.stdout[-4000:]
        raise HarnessError(f"debootstrap {suite} failed (exit {r.returncode}):\n{detail}")


def _prepare_tree(tree: Path) -> None:
    for leftover in glob.glob(str(tree / "var/cache/apt/archives/*.deb")):
        os.unlink(leftover)
    shutil.rmtree(tree / "var/lib/apt/lists", ignore_errors=True)
    (tree / "var/lib/apt/lists/partial").mkdir(parents=True)
    # Empty machine-id: systemd makes a transient one at each boot (no first-boot setup).
    (tree / "etc/machine-id").write_text("")
    units = tree / "etc/systemd/system"
    for unit in ROOTFS_MASKED_UNITS:
        link = units / unit
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to("/dev/null")


# ---------------------------------------------------------------------------------------------
# jobgen inside the container: the wheel built from the worktree, installed offline


JOBGEN_VENV = "/opt/jobgen"
# Console scripts linked into /usr/bin, where units, the generator folder and root's PATH find
# them; a script the wheel does not (yet) carry is not linked.
JOBGEN_SCRIPTS = ("jobgen", "jobgen-generator")
WHEELS_IN_CONTAINER = "/var/tmp/jobgen-wheels"


def build_wheel(repo: Path, dest: Path) -> Path:
    """`pip wheel --no-deps` of the worktree: the same artefact a user installs."""
    dest.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dest), str(repo)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    wheels = sorted(dest.glob("jobgen-*.whl"))
    if r.returncode != 0 or not wheels:
        raise HarnessError(f"pip wheel of {repo} failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    return wheels[-1]


def runtime_requirements(repo: Path) -> list[str]:
    with open(repo / "pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def wheelhouse(repo: Path, python: str) -> Path:
    """Wheels of jobgen's runtime dependencies for CPython `python` ("3.13") on this machine's
    architecture, downloaded once into the cache (the container itself reaches no index)."""
    reqs = runtime_requirements(repo)
    key = hashlib.sha256(json.dumps([python, platform.machine(), reqs]).encode()).hexdigest()[:12]
    final = cache_dir() / "wheelhouse" / f"cp{python.replace('.', '')}-{key}"
    with _file_lock(final.parent / f".{final.name}.lock"):
        if (final / "COMPLETE").exists():
            return final
        shutil.rmtree(final, ignore_errors=True)
        arch = platform.machine()
        abi = "cp" + python.replace(".", "")
        argv = [
            sys.executable, "-m", "pip", "download", "-q", "--dest", str(final),
            "--only-binary=:all:", "--python-version", python, "--implementation", "cp", "--abi", abi,
            "--platform", f"manylinux2014_{arch}", "--platform", f"manylinux_2_28_{arch}", *reqs,
        ]  # fmt: skip
        r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            shutil.rmtree(final, ignore_errors=True)
            raise HarnessError(f"downloading jobgen's dependencies for Python {python} failed:\n{r.stderr[-4000:]}")
        (final / "COMPLETE").write_text("\n".join(reqs) + "\n")
        return final


def rootfs_python(suite: str) -> str:
    """The CPython version ("3.11") of a suite's root filesystem, read from the tree."""
    found = sorted(
        p.name[len("python"):]
        for p in (rootfs_path(suite) / "usr/bin").glob("python3.*")
        if re.fullmatch(r"python3\.\d+", p.name)
    )
    if not found:
        raise HarnessError(f"no python3 in the {suite} root filesystem")
    return found[-1]


def _tar_of(files: list[Path]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for f in files:
            tar.add(f, arcname=f.name)
    return buf.getvalue()


def persistent_overlay_mount(suite: str, persist: Path) -> str:
    """Shell text that mounts the suite's cached tree with persist/upper over it at
    persist/merged (run it in a private mount namespace: unshare --mount)."""
    for d in ("upper", "work", "merged"):
        (persist / d).mkdir(parents=True, exist_ok=True)
    opts = f"lowerdir={rootfs_path(suite)},upperdir={persist / 'upper'},workdir={persist / 'work'}"
    return f"mount -t overlay overlay -o {shlex.quote(opts)} {shlex.quote(str(persist / 'merged'))}"


def in_image(suite: str, persist: Path, argv: list[str], **kw) -> subprocess.CompletedProcess:
    """Run argv on the host with the persistent tree mounted at persist/merged (not booted):
    how an image root is filled before its first boot."""
    script = persistent_overlay_mount(suite, persist) + ' && exec "$@"'
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh", *argv], **kw)


# ---------------------------------------------------------------------------------------------
# cgroups: nspawn runs in one of its own per hierarchy, removed after the container stops


def cgroup_roots() -> list[Path]:
    """Mount points of the host's cgroup hierarchies that nspawn uses.

    Pure cgroup2 host: /sys/fs/cgroup. Hybrid host (these machines): the named v1
    hierarchy /sys/fs/cgroup/systemd and the controller-less cgroup2 /sys/fs/cgroup/unified.
    """
    base = Path("/sys/fs/cgroup")
    if _fstype(base) == "cgroup2":
        return [base]
    return [p for p in (base / "systemd", base / "unified") if _fstype(p) in ("cgroup", "cgroup2")]


def _fstype(path: Path) -> str | None:
    best = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        mountpoint = left.split()[4]
        if mountpoint == str(path):
            best = right.split()[0]
    return best


def _cgroup_pids(cgroup: Path) -> list[int]:
    pids = []
    for procs in cgroup.rglob("cgroup.procs"):
        with contextlib.suppress(OSError):
            pids += [int(p) for p in procs.read_text().split()]
    return pids


def _remove_cgroup(cgroup: Path) -> None:
    """rmdir deepest first (cgroup directories can only be removed when empty)."""
    if not cgroup.is_dir():
        return
    for d in sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            d.rmdir()
    cgroup.rmdir()


def reap_stale_containers() -> list[str]:
    """Clean up after a test run that died without tearing down (kill -9 of pytest).

    Our cgroups are named jobgen-e2e-<suite>-<pytest pid>-<n>; one whose pytest is gone is
    stale. Its processes (nspawn, the container) are ended by pid, then the cgroup removed.
    """
    reaped = []
    for root in cgroup_roots():
        for cg in root.glob(CGROUP_PREFIX + "*"):
            m = re.fullmatch(CGROUP_PREFIX + r"[a-z]+-(\d+)-\d+", cg.name)
            if not m or _pid_alive(int(m.group(1))):
                continue
            for pid in _cgroup_pids(cg):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while _cgroup_pids(cg) and time.monotonic() < deadline:
                time.sleep(0.1)
            with contextlib.suppress(OSError):
                _remove_cgroup(cg)
            reaped.append(str(cg))
    return reaped


def _pid_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (killed, not yet reaped by its parent) counts as gone."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rpartition(")")[2].split()[0] != "Z"


def dev_null_intact() -> str | None:
    """The host's /dev/null must still be crw-rw-rw- root:root; a description if not."""
    st = os.stat("/dev/null")
    mode = stat.filemode(st.st_mode)
    if mode != "crw-rw-rw-" or st.st_uid != 0 or os.major(st.st_rdev) != 1 or os.minor(st.st_rdev) != 3:
        return f"host /dev/null is now {mode} uid={st.st_uid} gid={st.st_gid} rdev={st.st_rdev:#x}"
    return None


# ---------------------------------------------------------------------------------------------
# The container


_live: set["Container"] = set()
_counter = 0


@atexit.register
def _halt_all_at_exit() -> None:
    for c in list(_live):
        with contextlib.suppress(Exception):
            c.halt()


@dataclass(eq=False)
class Container:
    """One booted systemd. `boot()` it, `run()` commands inside, `halt()` it (always)."""

    release: str  # "252" / "257"
    private_network: bool = True
    extra_nspawn_args: tuple[str, ...] = ()
    # A folder that keeps the container's writes across boots (a reboot = halt, then boot a
    # new Container with the same `persist`): an overlay of the cached tree with its upper
    # layer in persist/upper. None: writes go to a tmpfs and vanish at halt.
    persist: Path | None = None
    name: str = ""
    nspawn_pid: int | None = None
    leader: int | None = None  # the container's PID 1 as seen from the host
    boot_seconds: float | None = None
    halt_seconds: float | None = None
    _proc: subprocess.Popen | None = None
    _cgroups: list[Path] = field(default_factory=list)
    _console: Path | None = None

    @property
    def suite(self) -> str:
        return RELEASES[self.release]

    # -- lifecycle ----------------------------------------------------------------------------

    def boot(self) -> "Container":
        global _counter
        _counter += 1
        self.name = f"{CGROUP_PREFIX}{self.suite}-{os.getpid()}-{_counter}"
        self._cgroups = [root / self.name for root in cgroup_roots()]
        for cg in self._cgroups:
            cg.mkdir()
        self._console = cache_dir() / "run" / f"{self.name}.console"
        self._console.parent.mkdir(parents=True, exist_ok=True)
        _live.add(self)
        try:
            self._start_nspawn()
            self._wait_ready()
        except BaseException:
            self.halt()
            raise
        return self

    def _start_nspawn(self) -> None:
        nspawn = nspawn_binary()
        assert nspawn, "missing_prerequisites() is checked first"
        argv = [
            nspawn,
            "--register=no",  # no machined on the host ...
            "--keep-unit",  # ... and no D-Bus: both are required (else "Failed to open system bus")
            f"--directory={self.persist / 'merged' if self.persist else rootfs_path(self.suite)}",
            f"--machine={self.name[:64]}",
            "--boot",
            "--console=pipe",
            # writes go to a tmpfs (or to persist/upper); the cached tree stays pristine
            *([] if self.persist else ["--volatile=overlay"]),
            *(["--private-network"] if self.private_network else []),
            *self.extra_nspawn_args,
        ]
        # A private mount namespace with a tmpfs over /run/systemd: what nspawn puts there
        # (/run/systemd/nspawn/{locks,propagate}) vanishes with the namespace.
        wrapped = [
            "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
            'mkdir -p /run/systemd && mount -t tmpfs -o mode=0755 tmpfs /run/systemd && ' + self._overlay_mount() + 'exec "$@"',
            "sh", *argv,
        ]  # fmt: skip
        env = {
            "PATH": os.environ.get("PATH", CONTAINER_PATH),
            # systemd >= 256 refuses hybrid cgroups; 252 boots fine on a pure cgroup2 too.
            "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1",
        }
        cgroups = self._cgroups

        def enter_own_cgroups() -> None:  # runs in the child between fork and exec
            for cg in cgroups:
                with open(cg / "cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))

        started = time.monotonic()
        with open(self._console, "wb") as console:
            self._proc = subprocess.Popen(
                wrapped,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=enter_own_cgroups,
            )
        self.nspawn_pid = self._proc.pid  # unshare and sh exec, so this pid becomes nspawn
        self._boot_started = started

    def _overlay_mount(self) -> str:
        """Shell text mounting persist/merged (in nspawn's private mount namespace: the mount
        goes away with it, persist/upper stays)."""
        if not self.persist:
            return ""
        return persistent_overlay_mount(self.suite, self.persist) + " && "

    def _wait_ready(self) -> None:
        deadline = self._boot_started + BOOT_TIMEOUT
        while self.leader is None:
            if self._proc.poll() is not None:
                raise HarnessError(f"systemd-nspawn exited {self._proc.returncode}:\n{self.console()}")
            if time.monotonic() > deadline:
                raise HarnessError(f"container PID 1 did not appear in {BOOT_TIMEOUT}s:\n{self.console()}")
            self.leader = self._find_leader()
            if self.leader is None:
                time.sleep(0.05)
        remaining = max(1.0, deadline - time.monotonic())
        r = self.run("systemctl", "is-system-running", "--wait", check=False, timeout=remaining)
        self.boot_seconds = time.monotonic() - self._boot_started
        state = r.stdout.strip()
        if state != "running":
            failed = self.run("systemctl", "--failed", "--no-legend", "--plain", check=False).stdout
            raise HarnessError(f"systemd {self.release} booted to state {state!r}; failed units:\n{failed}")

    def _find_leader(self) -> int | None:
        """PID 1 of the container: the child of nspawn running systemd, once its socket exists."""
        children = Path(f"/proc/{self.nspawn_pid}/task/{self.nspawn_pid}/children")
        with contextlib.suppress(OSError):
            for pid in children.read_text().split():
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                if comm == "systemd" and os.path.exists(f"/proc/{pid}/root/run/systemd/private"):
                    return int(pid)
        return None

    def halt(self) -> None:
        """Orderly halt (SIGTERM to nspawn), forced after HALT_TIMEOUT; then remove cgroups.

        Safe to call twice and on a half-booted container. Raises HarnessError if something
        could not be cleaned up or the host's /dev/null was changed.
        """
        if self not in _live:
            return
        _live.discard(self)
        problems = []
        started = time.monotonic()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)  # nspawn: SIGTERM = "halt the container"
            try:
                self._proc.wait(HALT_TIMEOUT)
            except subprocess.TimeoutExpired:
                problems.append(f"container did not halt within {HALT_TIMEOUT}s; killed")
                for pid in (self.leader, self.nspawn_pid):
                    if pid:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)  # SIGKILL of PID 1 ends the whole pid ns
                self._proc.wait(10)
        self.halt_seconds = time.monotonic() - started
        # Anything still in our cgroups was started for this container: end it by pid.
        for cg in self._cgroups:
            for pid in _cgroup_pids(cg):
                problems.append(f"process {pid} left in {cg}; killed")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        for cg in self._cgroups:
            while True:
                try:
                    _remove_cgroup(cg)
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        problems.append(f"cgroup {cg} not removable: {e}")
                        break
                    time.sleep(0.1)
        leftovers = [
            line.split()[4]
            for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if self.name in line
        ]
        if leftovers:
            problems.append(f"mounts left on the host: {leftovers}")
        if broken := dev_null_intact():
            problems.append(broken)
        if problems:
            raise HarnessError(f"teardown of {self.name}: " + "; ".join(problems))

    def console(self) -> str:
        with contextlib.suppress(OSError):
            return self._console.read_text(errors="replace")[-6000:]
        return ""

    # -- acting inside ------------------------------------------------------------------------

    def command(self, *argv: str) -> list[str]:
        """argv that runs *argv inside the container, outside any unit (like a login shell)."""
        assert self.leader, "container not booted"
        return [
            "nsenter", f"--target={self.leader}", "--all", "--root", "--wd",
            "env", "-i", f"PATH={CONTAINER_PATH}", "TERM=dumb", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0",
            "LANG=C.UTF-8", *argv,
        ]  # fmt: skip

    def run(
        self,
        *argv: str,
        input: str | bytes | None = None,
        check: bool = True,
        timeout: float = 60,
        binary: bool = False,
    ) -> subprocess.CompletedProcess:
        r = subprocess.run(
            self.command(*argv),
            input=input,
            capture_output=True,
            text=not binary,
            timeout=timeout,
        )
        if check and r.returncode != 0:
            raise HarnessError(
                f"in systemd {self.release}: {argv!r} exited {r.returncode}\n"
                f"stdout: {r.stdout!r}\nstderr: {r.stderr!r}"
            )
        return r

    def spawn(self, *argv: str) -> subprocess.Popen:
        """Start *argv inside the container in the background (stdin/stdout are pipes).

        The process is not part of any unit. It dies with the container at the latest.
        """
        return subprocess.Popen(
            self.command(*argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

    def systemctl(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.run("systemctl", *args, check=check, timeout=timeout)

    def write_file(self, path: str, content: str | bytes, mode: str = "0644") -> None:
        """Create a file inside (through nsenter, never via /proc/PID/root: absolute symlinks
        there would resolve on the host)."""
        data = content.encode() if isinstance(content, str) else content
        self.run(
            "/bin/sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"', "sh", path, mode,
            input=data, binary=True,
        )  # fmt: skip

    def read_file(self, path: str) -> bytes:
        return self.run("cat", path, binary=True).stdout

    def install_units(self, outdir: Path) -> list[str]:
        """Install a rendered output tree; returns the unit file names installed.

        Unit files and drop-in folders go to /etc/systemd/system, tmpfiles.d/*.conf to
        /etc/tmpfiles.d (then `systemd-tmpfiles --create` makes e.g. /run/jobgen/);
        finally `systemctl daemon-reload`.
        """
        units, tmpfiles = [], []
        for path in sorted(p for p in Path(outdir).rglob("*") if p.is_file()):
            rel = path.relative_to(outdir)
            parent = rel.parent.name
            if parent == "tmpfiles.d" and path.suffix == ".conf":
                target = f"/etc/tmpfiles.d/{path.name}"
                tmpfiles.append(target)
            elif parent.endswith(".d") and path.suffix == ".conf":
                target = f"/etc/systemd/system/{parent}/{path.name}"
            elif path.suffix in (".service", ".timer", ".target", ".socket", ".path", ".slice"):
                target = f"/etc/systemd/system/{path.name}"
                units.append(path.name)
            else:
                continue
            self.write_file(target, path.read_bytes())
        if tmpfiles:
            self.run("systemd-tmpfiles", "--create", *tmpfiles)
        self.systemctl("daemon-reload")
        return units

    def install_jobgen(self, wheel: Path, deps: Path) -> str:
        """Install the jobgen wheel (and its dependencies from the wheelhouse `deps`, no index)
        into a venv at /opt/jobgen with /usr/bin links; returns `jobgen --version`."""
        files = [wheel, *sorted(p for p in deps.iterdir() if p.suffix == ".whl")]
        self.run("/bin/sh", "-c", f"rm -rf {WHEELS_IN_CONTAINER} && mkdir -p {WHEELS_IN_CONTAINER}")
        self.run("tar", "-x", "-C", WHEELS_IN_CONTAINER, input=_tar_of(files), binary=True)
        links = " ".join(JOBGEN_SCRIPTS)
        script = f"""set -e
            [ -x {JOBGEN_VENV}/bin/python ] || python3 -m venv {JOBGEN_VENV}
            {JOBGEN_VENV}/bin/python -m pip install -q --disable-pip-version-check --no-index \\
                --find-links {WHEELS_IN_CONTAINER} --force-reinstall {WHEELS_IN_CONTAINER}/{wheel.name}
            for s in {links}; do
                if [ -x {JOBGEN_VENV}/bin/$s ]; then ln -sfn {JOBGEN_VENV}/bin/$s /usr/bin/$s; fi
            done
            rm -rf {WHEELS_IN_CONTAINER}
        """
        self.run("/bin/sh", "-c", script, timeout=300)
        return self.run("jobgen", "--version").stdout.strip()

    # -- the journal --------------------------------------------------------------------------

    def journal(self, *matches: str) -> list[dict]:
        """Journal entries as dicts (journalctl -o json), oldest first.

        `matches` are journalctl match arguments: FIELD=value (different fields AND, same
        field OR) and "+" between groups for OR, e.g. ("_SYSTEMD_UNIT=a.service", "+",
        "UNIT=a.service").
        """
        r = self.run("journalctl", "--no-pager", "--output=json", "--all", *matches, check=False)
        if r.returncode not in (0, 1):
            raise HarnessError(f"journalctl {matches}: {r.stderr}")
        return [_decode_entry(json.loads(line)) for line in r.stdout.splitlines() if line.startswith("{")]

    def unit_journal(self, *units: str, extra: tuple[str, ...] = ()) -> list[dict]:
        """Everything about the given units: the manager's lines on them (UNIT=) and what their
        processes logged (_SYSTEMD_UNIT=), plus `extra` match groups, merged in time order."""
        matches: list[str] = []
        for group in [f"UNIT={u}" for u in units] + [f"_SYSTEMD_UNIT={u}" for u in units] + list(extra):
            matches += [group, "+"]
        return self.journal(*matches[:-1]) if matches else []


def _decode_entry(entry: dict) -> dict:
    """journalctl -o json writes non-UTF-8 or binary field values as arrays of byte values."""
    for k, v in entry.items():
        if isinstance(v, list) and all(isinstance(b, int) for b in v):
            entry[k] = bytes(v).decode("utf-8", "replace")
    return entry


def wait_until(probe, done, what: str, timeout: float, context=lambda: "", interval: float = 0.3):
    """Poll ``probe()`` until ``done(value)`` and return the value; at the deadline fail
    naming what was awaited, the last value and ``context()`` (a journal, say). The one
    polling loop of the container tests: each waits on a fact inside the container."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout}s for {what}; last: {value!r}\n{context()}")
        time.sleep(interval)


def format_journal(entries: list[dict]) -> str:
    """Human-readable journal lines: time, identifier[pid], message, and jobgen's fields."""
    lines = []
    for e in entries:
        t = int(e.get("__REALTIME_TIMESTAMP", 0)) / 1e6
        stamp = time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int(t * 1e6) % 1_000_000:06d}"
        ident = e.get("SYSLOG_IDENTIFIER") or e.get("_COMM") or "?"
        pid = e.get("_PID") or e.get("SYSLOG_PID") or ""
        extra = " ".join(f"{k}={v}" for k, v in sorted(e.items()) if k.startswith("JOBGEN_"))
        lines.append(f"{stamp} {ident}[{pid}]: {e.get('MESSAGE', '')}" + (f"  [{extra}]" if extra else ""))
    return "\n".join(lines)
