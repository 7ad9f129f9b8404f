"""What every jobgen benchmark measures with, in one place: the launcher, samples and their
medians, runs taken in turn, the machine's facts, the folders written into (tmpfs and disk),
and the private mount namespace in which the other generators find their inputs.

How a number is taken: METHOD below, which every results file states.
A benchmark, not a test: nothing here is asserted, numbers depend on the machine and its load.
"""

from __future__ import annotations

METHOD = """How every number is taken (bench/harness.py):
- every run is a fresh process started by `launch`, a small C program (LAUNCH_C in
  bench/harness.py, compiled once into jobgen's cache): it forks, execs the command and reads
  wait4(2)'s rusage of that child alone. So CPU is the child's user+system time (with any
  children it waited for) and peak RSS is the child's ru_maxrss, without the share of a
  Python parent: a child forked (or vforked) from a Python process starts with the parent's
  pages mapped, and Linux keeps that high-water mark in the child's ru_maxrss across exec.
  The launcher's own share is what a `/bin/true` row shows (about 1 MiB);
- wall time is the launcher's CLOCK_MONOTONIC around fork and wait4;
- runs of the tools compared are taken in turn (a, b, c, b, c, a, ...: the order rotates each
  round), so a slow spell of the machine falls on every side of a ratio; the figure is the
  median of the rounds (CPU is the figure compared; wall time is given beside it).
"""

import hashlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("JOBGEN_CACHE", Path.home() / ".cache" / "jobgen"))
REFERENCES = CACHE / "bench-references"

LAUNCH_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* launch RESULT-FILE COMMAND [ARG...]: run COMMAND as a child, write its wall time, CPU and
   peak RSS (wait4's rusage of that child alone) to RESULT-FILE; exit with its exit code. */
int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: launch RESULT-FILE COMMAND [ARG...]\n"); return 2; }
    int out = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) { perror(argv[1]); return 2; }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 2; }
    if (pid == 0) { execvp(argv[2], argv + 2); perror(argv[2]); _exit(127); }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) { perror("wait4"); return 2; }
    clock_gettime(CLOCK_MONOTONIC, &b);
    long long wall = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    dprintf(out, "wall_ns=%lld utime_us=%lld stime_us=%lld maxrss_kib=%ld exit=%d\n", wall,
            (long long)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
            (long long)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec, ru.ru_maxrss, code);
    return code;
}
"""


def launcher() -> Path:
    """The compiled launcher, built once per source text (cc from the build tools)."""
    digest = hashlib.sha256(LAUNCH_C.encode()).hexdigest()[:12]
    binary = CACHE / "bench" / f"launch-{digest}"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        src = binary.with_suffix(".c")
        src.write_text(LAUNCH_C)
        tmp = binary.with_name(binary.name + f".{os.getpid()}")
        subprocess.run(["cc", "-O2", "-o", str(tmp), str(src)], check=True)
        os.replace(tmp, binary)
    return binary


@dataclass
class Sample:
    wall: float  # seconds
    cpu: float  # seconds, user + system of the child
    rss_kib: int
    exit: int = 0


def parse_launch(line: str) -> Sample:
    """The launcher's result line -> Sample. Raises ValueError on anything else."""
    fields = dict(part.split("=", 1) for part in line.split())
    try:
        return Sample(
            wall=int(fields["wall_ns"]) / 1e9,
            cpu=(int(fields["utime_us"]) + int(fields["stime_us"])) / 1e6,
            rss_kib=int(fields["maxrss_kib"]),
            exit=int(fields["exit"]),
        )
    except KeyError as e:
        raise ValueError(f"launcher result without {e.args[0]}: {line!r}") from None


def measure(argv: list[str], env: dict | None = None, cwd: Path | None = None, before=None,
            ok=(0,)) -> Sample:
    """One run of argv in a fresh process, through the launcher. `before` runs first, untimed
    (emptying an output folder, say); an exit code outside `ok` stops the benchmark."""
    if before:
        before()
    with tempfile.NamedTemporaryFile("r") as result, tempfile.TemporaryFile() as err:
        subprocess.run([str(launcher()), result.name, *argv], stdout=subprocess.DEVNULL, stderr=err,
                       env=env, cwd=cwd, check=False)
        line = Path(result.name).read_text()
        if not line:
            err.seek(0)
            raise SystemExit(f"bench: launcher failed for {argv[:4]}: {err.read().decode(errors='replace')[-2000:]}")
        sample = parse_launch(line)
        if sample.exit not in ok:
            err.seek(0)
            raise SystemExit(f"bench: {' '.join(argv[:6])} ... exited {sample.exit}:\n"
                             f"{err.read().decode(errors='replace')[-2000:]}")
    return sample


@dataclass
class Stat:
    label: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    @property
    def rss_mib(self) -> float:
        return max(s.rss_kib for s in self.samples) / 1024

    def spread(self, what: str = "wall") -> str:
        values = [getattr(s, what) for s in self.samples]
        return f"{ms(min(values))}–{ms(max(values))}"

    def row(self, *extra: str) -> str:
        """| label | extra... | CPU median (spread) | wall median (spread) | peak RSS |"""
        return (f"| {self.label} | {' | '.join(extra) + ' | ' if extra else ''}{ms(self.cpu)} ({self.spread('cpu')}) | "
                f"{ms(self.wall)} ({self.spread('wall')}) | {self.rss_mib:.1f} MiB |")


ROW_HEADER = "CPU ms, median (min–max) | wall ms, median (min–max) | peak RSS |"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}" if seconds >= 0.0995 else f"{seconds * 1000:.1f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b > 0 else "n/a"


def in_turn(rounds: int, specs: list[tuple[Stat, list[str], dict]]) -> None:
    """Runs of several commands taken in turn, the order rotated every round so no tool
    always runs right after another one (page cache, writeback, CPU frequency); each spec's
    samples are appended to its Stat. A spec's dict is measure()'s keywords."""
    for r in range(rounds):
        k = r % len(specs)
        for stat, argv, kw in specs[k:] + specs[:k]:
            stat.samples.append(measure(argv, **kw))


# --------------------------------------------------------------------------- where and what


def fstype(path: Path) -> str:
    """The type of the file system holding path, as mounted (ext4, tmpfs, ...)."""
    return subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


def machine_facts(python: str, **where: Path) -> str:
    """Cores, load, kernel, interpreter, and the file system type of each named folder."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    py = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0], sys.executable)"],
                        capture_output=True, text=True, check=True).stdout.strip()
    places = ", ".join(f"{name} on {p} ({fstype(p)})" for name, p in where.items())
    return (f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {load} (1, 5, 15 min), "
            f"kernel {platform.release()}, Python {py} (the interpreter of every Python row)"
            + (f"; {places}" if places else "") + ".")


def in_private_namespace(argv: list[str]) -> subprocess.CompletedProcess:
    """Run argv in a private mount namespace (unshare -m, propagation private): its mounts
    (the tmpfs, the overlays over /etc, /var and /run) vanish with it and this machine never
    sees them. Needs root, as bench/run's set-up does."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise SystemExit("bench: needs root and unshare(1) for a private mount namespace")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", *argv], check=True)


def mount_tmpfs(path: Path, size: str = "2g") -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "jobgen-bench", str(path)], check=True)


def overlay(target: str, scratch: Path) -> None:
    """An overlay over `target` whose writes land in `scratch` (a tmpfs): inside the private
    namespace the other generators' compiled-in input folders (/etc/cron.d, /etc/crontab,
    /etc/containers/systemd, /var/spool/cron) can be filled without touching this machine."""
    up, work = scratch / "upper", scratch / "work"
    shutil.rmtree(scratch, ignore_errors=True)
    up.mkdir(parents=True)
    work.mkdir()
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={target},upperdir={up},workdir={work}", target],
                   check=True)


def umount(target: str) -> None:
    subprocess.run(["umount", target], check=True)


JOBGEN_DIR = "/etc/jobgen"
CRON_DIR = "/etc/cron.d"
QUADLET_DIR = "/etc/containers/systemd"
# What the reference generators would also read on this machine: removed inside the overlay
# (only ever paths under /etc, which the overlay holds), so every tool sees only the case's jobs.
CRON_ALSO = ("/etc/crontab", "/etc/anacrontab", "/etc/cron.hourly", "/etc/cron.daily", "/etc/cron.weekly",
             "/etc/cron.monthly", "/etc/cron.yearly")


class Stage:
    """The namespace's mounts: overlays over /etc, /var and /run on a tmpfs, reset on demand."""

    def __init__(self, scratch: Path):
        self.scratch = scratch
        self.mounted: list[str] = []

    def reset(self, files: list[tuple[int, int]], who: str) -> None:
        for target in reversed(self.mounted):
            umount(target)
        self.mounted = []
        for target in ("/etc", "/var", "/run"):
            overlay(target, self.scratch / "overlay" / target.strip("/"))
            self.mounted.append(target)
        for path in (JOBGEN_DIR, CRON_DIR, QUADLET_DIR, *CRON_ALSO):
            assert path.startswith("/etc/") and "/etc" in self.mounted, path
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.lexists(path):
                os.unlink(path)
        for d in (JOBGEN_DIR, CRON_DIR, QUADLET_DIR):
            os.makedirs(d)
        for k, (first, count) in enumerate(files):
            Path(JOBGEN_DIR, f"jobs-{k:02d}.yaml").write_text(jobgen_manifest(first, count, who))
            Path(CRON_DIR, f"jobs-{k:02d}").write_text(crontab_lines(first, count, who))
            for i in range(first, first + count):
                Path(QUADLET_DIR, f"task-{i:05d}.container").write_text(quadlet_container(i, who))

    def close(self) -> None:
        for target in reversed(self.mounted):
            umount(target)


def disk_scratch() -> Path:
    """A folder on the disk (the file system of jobgen's cache, never a tmpfs)."""
    d = CACHE / "bench" / "disk"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def emptied(folder: Path, *also: Path, sync: bool = False):
    """`before` for measure(): `folder` empty, `also` gone; with sync, the deleted files'
    writeback done first (on a disk it would otherwise land on the next run, whichever tool)."""

    def clear() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        for other in also:
            shutil.rmtree(other, ignore_errors=True)
        folder.mkdir(parents=True)
        if sync:
            os.sync()

    return clear


# --------------------------------------------------------------------------- the same jobs, per tool


def user() -> str:
    """The jobs' user, the same for every tool: one that exists here, so systemd-cron's
    generators (getpwnam() per cron.d line; an unknown user is skipped) do their real work."""
    import pwd

    for name in ("daemon", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return pwd.getpwuid(os.getuid()).pw_name


def job_schedule(i: int) -> tuple[int, int]:
    """Job i's (minute, hour): the one daily time every tool's input states."""
    return i % 60, i % 24


def jobgen_manifest(first: int, count: int, who: str, target: str | None = None) -> str:
    """`count` daily jobs, one command, calendar schedule and user each."""
    lines = ["jobgen: 1", *([f"target: {{systemd: '{target}'}}"] if target else []), "jobs:"]
    for i in range(first, first + count):
        minute, hour = job_schedule(i)
        lines += [
            f"  task-{i:05d}:",
            f"    command: [/usr/bin/php, /srv/app/artisan, 'task:{i}']",
            f"    schedule: '*-*-* {hour:02d}:{minute:02d}:00'",
            f"    user: {who}",
        ]
    return "\n".join(lines) + "\n"


def crontab_lines(first: int, count: int, who: str) -> str:
    """The same jobs as a cron.d file (minute hour dom month dow user command)."""
    return "".join(f"{job_schedule(i)[0]} {job_schedule(i)[1]} * * * {who} /usr/bin/php /srv/app/artisan task:{i}\n"
                   for i in range(first, first + count))


def quadlet_container(i: int, who: str) -> str:
    """Job i as a Quadlet .container file: one command and user; Quadlet makes a .service of
    it (it has no timer of its own), so it is a reference for scale, not a like-for-like."""
    return (f"[Unit]\nDescription=task {i}\n\n[Container]\nImage=docker.io/library/php:8\n"
            f"Exec=/usr/bin/php /srv/app/artisan task:{i}\nUser={who}\n")


# --------------------------------------------------------------------------- the reference tools


def reference_versions() -> dict[str, str]:
    """package -> version of the fetched reference packages (bench/fetch-references)."""
    out = {}
    for suite in ("bookworm", "trixie"):
        f = REFERENCES / suite / "versions"
        if f.exists():
            for line in f.read_text().splitlines():
                name, version = line.split()
                out[f"{name}@{suite}"] = version
    return out


def systemd_cron_python(python: str) -> list[str] | None:
    """systemd-cron 1.15.19's generator (Debian 12), a Python script, run by `python` (the
    interpreter jobgen's console scripts use) rather than its #!/usr/bin/python3."""
    g = REFERENCES / "bookworm" / "root" / "lib" / "systemd" / "system-generators" / "systemd-crontab-generator"
    return [python, str(g)] if g.exists() else None


def _trixie(binary: str) -> list[str] | None:
    root = REFERENCES / "trixie" / "root"
    libdir = root / "usr" / "lib" / "x86_64-linux-gnu"
    loaders = sorted(libdir.glob("ld-linux-*.so.2"))
    if not loaders or not (root / binary).exists():
        return None
    return [str(loaders[0]), "--library-path", str(libdir), str(root / binary)]


def systemd_cron_cpp() -> list[str] | None:
    """systemd-cron 2.x's C++ generator (Debian 13), through Debian 13's own loader and libraries."""
    return _trixie("usr/lib/systemd/system-generators/systemd-crontab-generator")


def quadlet() -> list[str] | None:
    """Podman 5.4's quadlet (Debian 13), through Debian 13's own loader and libc."""
    return _trixie("usr/libexec/podman/quadlet")


# --------------------------------------------------------------------------- jobgen as users run it


VENV_ENV = "JOBGEN_BENCH_VENV"
STAMP = "jobgen-bench-complete"


def installed_jobgen() -> Path:
    """The virtualenv holding jobgen as users run it: the wheel built from this checkout,
    pip-installed (bytecode compiled at install time; the development checkout is an editable
    install whose bytecode a PYTHONDONTWRITEBYTECODE environment never writes). bench/run
    builds it once for every script and names it in JOBGEN_BENCH_VENV; a script run alone
    builds it itself."""
    given = os.environ.get(VENV_ENV)
    if given and (Path(given) / STAMP).exists():
        return Path(given)
    venv = CACHE / "bench" / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # With the cluster clients, for the lock holder's benchmark (an extra is only imported
    # when its backend is used).
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    f"{REPO}[redis,mariadb,postgres]"], check=True)
    (venv / STAMP).write_text("complete\n")
    os.environ[VENV_ENV] = str(venv)
    return venv


def measured_in_namespace(script: str, runs: int, *extra: str) -> tuple[Path, str, str]:
    """The outer half every benchmark script shares: the references fetched, jobgen
    installed, the machine's facts taken, then the script's own `--inner` half run in a
    private mount namespace. Returns (jobgen's virtualenv, the facts before, what the
    inner half wrote)."""
    subprocess.run([str(REPO / "bench" / "fetch-references")], check=True)
    venv = installed_jobgen()
    before = machine_facts(str(venv / "bin" / "python"))
    with tempfile.NamedTemporaryFile("r", suffix=".md") as part:
        in_private_namespace([sys.executable, script, "--inner", "--venv", str(venv), "--part", part.name,
                              "--runs", str(runs), *extra])
        return venv, before, Path(part.name).read_text()


def reference_line(keep) -> str:
    """The reference tools' versions, those whose package name ``keep`` accepts."""
    return ", ".join(f"{k.split('@')[0]} {v} (Debian {'12' if k.endswith('bookworm') else '13'})"
                     for k, v in reference_versions().items() if keep(k))

