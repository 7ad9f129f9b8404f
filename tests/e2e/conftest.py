"""Fixtures for jobgen's end-to-end tests: real systemd 252 and 257 in containers.

    .venv/bin/python -m pytest tests/e2e -m e2e

Needs root, systemd-nspawn (scripts/fetch-container-tools) and debootstrap (scripts/bootstrap)
the first time, when the root filesystems are built into ${JOBGEN_CACHE:-~/.cache/jobgen}/rootfs.

One container per systemd release for the whole session; scenarios keep apart by unit name
(every test uses its own job names), so a test leaves its timers stopped but its units in place.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # whatever pytest's import mode

from hosts import Host  # noqa: E402
from container import (  # noqa: E402
    RELEASES,
    Container,
    HarnessError,
    build_wheel,
    dev_null_intact,
    ensure_rootfs_all,
    format_journal,
    missing_prerequisites,
    reap_stale_containers,
    rootfs_python,
    wheelhouse,
)

REPO = Path(__file__).resolve().parents[2]

# Filled in while the session runs, printed at its end (pytest_terminal_summary).
TIMINGS: dict[str, float] = {}
_session_started = time.monotonic()


# ---------------------------------------------------------------------------------------------
# Containers


@pytest.fixture(scope="session")
def e2e_host():
    """Skip unless this machine can boot containers; build missing root filesystems once."""
    suites = list(RELEASES.values())
    if reason := missing_prerequisites(suites):
        pytest.skip(reason)
    reap_stale_containers()
    # A CI runner stops a job with SIGTERM: make it unwind like Ctrl-C so every container is
    # halted by its fixture (atexit in container.py covers what remains; a stale container of
    # a pytest killed with SIGKILL is reaped by the next session, above).
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    started = time.monotonic()
    for suite, seconds in ensure_rootfs_all(suites).items():
        if seconds is not None:
            TIMINGS[f"rootfs {suite} built (s)"] = seconds
    TIMINGS["rootfs ready, wall (s)"] = time.monotonic() - started
    yield
    if broken := dev_null_intact():
        pytest.fail(broken)


@pytest.fixture(scope="session", params=sorted(RELEASES), ids=lambda r: f"systemd{r}")
def systemd(request, e2e_host) -> Container:
    """A booted container of one systemd release, shared by every scenario of the session."""
    container = Container(request.param)
    try:
        container.boot()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    TIMINGS[f"boot to ready, systemd {container.release} (s)"] = container.boot_seconds
    yield container
    container.halt()  # raises if a process, cgroup or mount was left behind, or /dev/null changed
    TIMINGS[f"halt, systemd {container.release} (s)"] = container.halt_seconds


# ---------------------------------------------------------------------------------------------
# jobgen installed inside a container


@dataclass
class JobgenDist:
    """The wheel built from this worktree once per session, installable into any container."""

    wheel: Path
    installed: dict[int, str] = field(default_factory=dict)  # id(container) -> `jobgen --version`

    def install(self, container: Container) -> str:
        """Install into a booted container (once per boot); returns `jobgen --version` there."""
        key = id(container), container.leader
        if key not in self.installed:
            started = time.monotonic()
            deps = wheelhouse(REPO, rootfs_python(container.suite))
            self.installed[key] = container.install_jobgen(self.wheel, deps)
            TIMINGS.setdefault(f"install jobgen, systemd {container.release} (s)", time.monotonic() - started)
        return self.installed[key]


@pytest.fixture(scope="session")
def jobgen_dist(e2e_host, tmp_path_factory) -> JobgenDist:
    """`pip wheel --no-deps` of the worktree, built once; its dependencies come from a cached
    wheelhouse per container Python (pip download on the host: the containers reach no index)."""
    started = time.monotonic()
    try:
        wheel = build_wheel(REPO, tmp_path_factory.mktemp("wheel"))
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    TIMINGS["jobgen wheel built (s)"] = time.monotonic() - started
    return JobgenDist(wheel)


@pytest.fixture
def systemd_jobgen(systemd, jobgen_dist) -> Container:
    """The session's container of one systemd release with jobgen installed in /opt/jobgen
    (`jobgen`, and `jobgen-generator` when the wheel has it, linked into /usr/bin)."""
    try:
        jobgen_dist.install(systemd)
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    return systemd


# ---------------------------------------------------------------------------------------------
# jobgen render


def render_available() -> str | None:
    """None when `python -m jobgen render` works, else why not."""
    r = subprocess.run([*JOBGEN, "render", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        return "`jobgen render` is not available: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    return None


def render(manifest: str, release: str, outdir: Path) -> Path:
    """Render `manifest` (YAML text) for systemd `release` with jobgen itself."""
    outdir.mkdir(parents=True, exist_ok=True)
    src = outdir.parent / (outdir.name + ".yaml")
    src.write_text(manifest)
    argv = [*JOBGEN, "render", str(src), "-o", str(outdir), "--systemd", release]
    r = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        raise AssertionError(f"jobgen render failed (exit {r.returncode}):\n{r.stderr}{r.stdout}\n--- manifest:\n{manifest}")
    return outdir


# ---------------------------------------------------------------------------------------------
# Scenario helper: one per test, bound to the test's container


from jobgen.compiler.names import LOCK_DIR  # noqa: E402  (host lock files of rendered jobs)
from support.cli import JOBGEN  # noqa: E402
EX_TEMPFAIL = 75


@dataclass
class Run:
    """One activation of a unit, reconstructed from the journal by its invocation ID."""

    invocation: str
    start: float  # seconds (CLOCK_REALTIME of the container = host)
    end: float | None
    entries: list[dict] = field(default_factory=list)

    def messages(self) -> list[str]:
        return [e.get("MESSAGE", "") for e in self.entries]

    @property
    def outcome(self) -> str | None:
        return next((e["JOBGEN_OUTCOME"] for e in self.entries if "JOBGEN_OUTCOME" in e), None)


@dataclass
class Scenario:
    container: Container
    tmp: Path
    units: list[str] = field(default_factory=list)
    holders: list[subprocess.Popen] = field(default_factory=list)

    @property
    def release(self) -> str:
        return self.container.release

    # -- deploying ----------------------------------------------------------------------------

    def deploy(self, manifest: str) -> list[str]:
        """Render the manifest with jobgen for this container's systemd and install it."""
        if reason := render_available():
            pytest.skip(reason)
        outdir = render(manifest, self.release, self.tmp / f"out{len(self.units)}")
        installed = self.container.install_units(outdir)
        self.units += installed
        return installed

    def install_files(self, files: dict[str, str]) -> None:
        """Hand-written units/drop-ins (path under /etc/systemd/system -> text), reloaded."""
        for rel, text in files.items():
            self.container.write_file(f"/etc/systemd/system/{rel}", text)
            if "/" not in rel:
                self.units.append(rel)
        self.container.systemctl("daemon-reload")

    # -- acting -------------------------------------------------------------------------------

    def sh(self, script: str, *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return self.container.run("/bin/sh", "-c", script, check=check, timeout=timeout)

    def manual_run(self, job: str, command: list[str], *, wait: float | None = None) -> subprocess.CompletedProcess:
        """The job run from a shell through the same host lock (what `jobgen run` does):
        outside every unit, so systemd's own one-instance rule does not apply."""
        mode = ["--wait", str(wait)] if wait is not None else ["--nonblock"]
        argv = ["/usr/bin/flock", *mode, "--conflict-exit-code", str(EX_TEMPFAIL), f"{LOCK_DIR}/{job}.lock", *command]
        return self.container.run(*argv, check=False, timeout=120)

    def hold_lock(self, job: str) -> subprocess.Popen:
        """Take the job's host lock from a shell and keep it until release(holder)."""
        p = self.container.spawn(
            "/usr/bin/flock", "--nonblock", f"{LOCK_DIR}/{job}.lock", "/bin/sh", "-c", "echo held; read _; exit 0"
        )
        line = p.stdout.readline()
        assert line == b"held\n", f"could not take the lock of {job}: {line!r} {p.stdout.read()!r}"
        self.holders.append(p)
        return p

    def release_lock(self, holder: subprocess.Popen) -> None:
        holder.stdin.close()  # the holder reads stdin until EOF, then exits and the lock is free
        holder.wait(10)

    def stop(self, *units: str) -> None:
        self.container.systemctl("stop", *units, check=False)

    def finish(self) -> None:
        for p in self.holders:
            if p.poll() is None:
                p.stdin.close()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()  # the nsenter on the host; the container halt ends the rest
        timers = [u for u in self.units if u.endswith((".timer", ".target"))]
        others = [u for u in self.units if not u.endswith((".timer", ".target")) and "@." not in u]
        if timers or others:
            self.container.systemctl("stop", *timers, *others, check=False, timeout=120)

    # -- observing ----------------------------------------------------------------------------

    def journal(self, *units: str) -> list[dict]:
        units = units or tuple(self.units)
        jobs = {u.rsplit(".", 1)[0] for u in units if u.endswith(".service")}
        return self.container.unit_journal(*units, extra=tuple(f"JOBGEN_JOB={j}" for j in sorted(jobs)))

    def journal_text(self, *units: str) -> str:
        entries = self.journal(*units)
        return f"--- journal of {', '.join(units or self.units)} (systemd {self.release}):\n" + format_journal(entries)

    def outcomes(self, job: str) -> list[dict]:
        """The reporter's lines for `job` (SYSLOG_IDENTIFIER=jobgen, JOBGEN_JOB=job), oldest first."""
        return self.container.journal("SYSLOG_IDENTIFIER=jobgen", f"JOBGEN_JOB={job}")

    def wait_outcomes(self, job: str, count: int = 1, timeout: float = 30) -> list[str]:
        got = self.wait_for(
            lambda: [e["JOBGEN_OUTCOME"] for e in self.outcomes(job)],
            lambda o: len(o) >= count,
            timeout,
            f"{count} outcome line(s) of job {job}",
        )
        return got

    def wait_for(self, probe: Callable, done: Callable, timeout: float, what: str, interval: float = 0.2):
        """Poll `probe()` until `done(value)`; on the deadline fail with the journal attached."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if done(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"waited {timeout}s for {what}; last: {value!r}\n{self.journal_text()}")
            time.sleep(interval)

    def runs(self, unit: str) -> list[Run]:
        """Activations of `unit`, from the manager's and the processes' journal lines grouped
        by invocation ID; start = first line, end = the manager's final line (None if running).

        The reporter's line is matched by JOBGEN_JOB too: journald learns a sender's unit and
        invocation from its cgroup, and loses that race when the sender (`logger`) has already
        exited. Such a line is placed in the activation whose time window holds it.
        """
        job = unit.rsplit(".", 1)[0]
        by_id: dict[str, Run] = {}
        unplaced = []
        for e in self.container.unit_journal(unit, extra=(f"JOBGEN_JOB={job}",)):
            t = int(e["__REALTIME_TIMESTAMP"]) / 1e6
            inv = e.get("INVOCATION_ID") or e.get("_SYSTEMD_INVOCATION_ID")
            if not inv:
                unplaced.append((t, e))
                continue
            run = by_id.setdefault(inv, Run(inv, t, None))
            run.entries.append(e)
            if e.get("UNIT") == unit and _is_final(e.get("MESSAGE", "")):
                run.end = t
        runs = sorted(by_id.values(), key=lambda r: r.start)
        for t, e in unplaced:
            for run in runs:
                if run.start <= t and (run.end is None or t <= run.end):
                    run.entries.append(e)
                    run.entries.sort(key=lambda x: int(x["__REALTIME_TIMESTAMP"]))
                    break
        return runs

    def unit_result(self, run: Run) -> str | None:
        """'success' or the failure result systemd logged for this activation."""
        for msg in run.messages():
            if "Deactivated successfully" in msg or msg.startswith("Finished "):
                return "success"
            if m := re.search(r"Failed with result '([^']+)'", msg):
                return m.group(1)
        return None


def _is_final(message: str) -> bool:
    # systemd >= 248 logs "Deactivated successfully." or "Failed with result '...'." when the
    # unit has gone inactive/failed; "Finished"/"Failed to start" are the job-end lines; an
    # ExecCondition= (243) that says no ends with "Skipped due to 'exec-condition'".
    return (
        "Deactivated successfully" in message
        or "Failed with result" in message
        or "Skipped due to" in message
        or message.startswith(("Finished ", "Failed to start ", "Stopped ", "Condition check resulted in "))
    )


@pytest.fixture
def scenario(systemd, request):
    with tempfile.TemporaryDirectory(prefix="jobgen-e2e-") as tmp:
        s = Scenario(systemd, Path(tmp))
        request.node.jobgen_scenario = s
        yield s
        s.finish()


# ---------------------------------------------------------------------------------------------
# Reporting: failed scenarios carry their journal; the session prints its timings


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    s = getattr(item, "jobgen_scenario", None)
    if s is not None and report.when == "call" and report.failed and s.units:
        try:
            report.sections.append((f"journal (systemd {s.release})", s.journal_text()))
        except Exception as e:  # the container itself may be what broke
            report.sections.append(("journal", f"unreadable: {e}"))


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    TIMINGS["e2e session total (s)"] = time.monotonic() - _session_started
    terminalreporter.section("jobgen e2e timings")
    for k, v in TIMINGS.items():
        terminalreporter.write_line(f"{k:45} {v:8.2f}")


# ---------------------------------------------------------------------------------------------
# A container of its own with a persistent tree, for tests that reboot (hosts.py)


@pytest.fixture(params=sorted(RELEASES), ids=lambda r: f"systemd{r}")
def host(request, e2e_host, jobgen_dist) -> Host:
    persist = Path(tempfile.mkdtemp(prefix="jobgen-e2e-disk-"))
    h = Host(request.param, persist, jobgen_dist)
    try:
        yield h
    finally:
        h.halt()
        shutil.rmtree(persist, ignore_errors=True)


