#!/usr/bin/env python3
"""jobgen's benchmark: render cost against systemd-cron's generator, start-up, memory.

    .venv/bin/python bench/bench.py [--runs N] [--quick]     # writes bench/results.md

What it measures (issue "Performance"; every number is a fresh process, as users run it):

1. `jobgen render` of generated manifests with 100, 1,000 and 10,000 jobs into an EMPTY
   folder with an empty render cache, and again into the folder it just wrote (nothing
   changed: the cache's case), and that again with --no-cache (compile and compare);
2. the same 1,000 jobs as a cron.d file through systemd-cron's generator, in the same run,
   the two taken in turn (jobgen, generator, jobgen, ...), reported as a ratio. The Debian package `systemd-cron` is downloaded with apt-get and
   unpacked into a temporary folder (never installed); its generator reads /etc/crontab,
   /etc/cron.d and /var/spool/cron, so the unpacked copy is pointed at temporary folders;
3. start-up: `jobgen --version` and `jobgen check` on the examples, against
   `python -c "import typer"` and the interpreter alone;
4. peak memory (the child's ru_maxrss) at every size.

Wall time is the median of --runs runs with the spread (min..max); CPU is user+system of
the child (os.wait4). A benchmark, not a test: nothing here is ever asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def existing_user() -> str:
    """The jobs' user: one that exists here, so systemd-cron's generator (which looks every
    cron.d user up with getpwnam() and skips an unknown one) does its real per-job work
    rather than a failed lookup; jobgen gets the same name."""
    import pwd

    for name in ("daemon", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    return pwd.getpwuid(os.getuid()).pw_name


USER = existing_user()
OUT = Path(__file__).with_name("results.md")
SIZES = (100, 1000, 10000)


def installed_jobgen(tmp: Path) -> list[str]:
    """jobgen as users run it: the wheel built from this checkout, pip-installed into a
    fresh virtualenv, which compiles its bytecode at install time. The development
    checkout is an editable install whose bytecode a PYTHONDONTWRITEBYTECODE environment
    never writes, so every process would compile jobgen from source again."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO)], check=True)
    return [str(venv / "bin" / "jobgen")]


@dataclass
class Sample:
    wall: float
    cpu: float
    rss_kib: int


@dataclass
class Stat:
    label: str
    samples: list[Sample]

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def cpu(self) -> float:
        return statistics.median(s.cpu for s in self.samples)

    @property
    def rss_mib(self) -> float:
        return max(s.rss_kib for s in self.samples) / 1024

    def spread(self) -> str:
        walls = [s.wall for s in self.samples]
        return f"{min(walls):.2f}..{max(walls):.2f}"


def measure(argv: list[str], env: dict | None = None, cwd: Path | None = None, before=None) -> Sample:
    """One run of argv in a fresh process: wall time, CPU and peak RSS of that child alone."""
    if before:
        before()
    start = time.perf_counter()
    # stderr to a file, not a pipe: a render's notes could fill a pipe nobody reads yet.
    with tempfile.TemporaryFile() as errfile:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=errfile, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        errfile.seek(0)
        err = errfile.read().decode(errors="replace")
    if proc.returncode not in (0, 1):
        raise SystemExit(f"bench: {' '.join(argv[:6])}... exited {proc.returncode}:\n{err[-2000:]}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def repeat(label: str, runs: int, argv: list[str], **kw) -> Stat:
    return Stat(label, [measure(argv, **kw) for _ in range(runs)])


def alternating(runs: int, *specs: tuple[str, list[str], dict]) -> list[Stat]:
    """Runs of several commands taken in turn (a, b, a, b, ...), so that a slow spell of
    the machine (another guest's disk, a page-cache flush) falls on both sides of a ratio."""
    stats = [Stat(label, []) for label, _, _ in specs]
    for _ in range(runs):
        for stat, (_, argv, kw) in zip(stats, specs):
            stat.samples.append(measure(argv, **kw))
    return stats


# --------------------------------------------------------------------------- inputs


# One manifest holds at most 1 MiB (README "Limits", some 8,000 jobs): larger sets are
# rendered as several manifests of PER_MANIFEST jobs in one `jobgen render`, as users split them.
PER_MANIFEST = 1000


def manifest(n: int, first: int = 0) -> str:
    """N daily jobs, one command, schedule and user each, target 252 (the issue's shape)."""
    lines = ["jobgen: 1", "target: {systemd: '252'}", "jobs:"]
    for i in range(first, first + n):
        lines += [
            f"  task-{i:05d}:",
            f"    command: [/usr/bin/php, /srv/app/artisan, 'task:{i}']",
            f"    schedule: '*-*-* {i % 24:02d}:{i % 60:02d}:00'",
            f"    user: {USER}",
        ]
    return "\n".join(lines) + "\n"


def crontab(n: int) -> str:
    """The same jobs as a cron.d file (minute hour dom month dow user command)."""
    return "".join(f"{i % 60} {i % 24} * * * {USER} /usr/bin/php /srv/app/artisan task:{i}\n" for i in range(n))


def systemd_cron(tmp: Path) -> Path | None:
    """systemd-cron's generator, unpacked (never installed) and pointed at tmp/cron."""
    deb_dir = tmp / "deb"
    deb_dir.mkdir()
    r = subprocess.run(["apt-get", "download", "systemd-cron"], cwd=deb_dir, capture_output=True, text=True)
    debs = list(deb_dir.glob("systemd-cron_*.deb"))
    if r.returncode != 0 or not debs:
        print(f"bench: systemd-cron not downloadable ({r.stderr.strip()[:200]}); comparison skipped", file=sys.stderr)
        return None
    root = tmp / "systemd-cron"
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(root)], check=True)
    (gen,) = [p for p in root.rglob("systemd-crontab-generator") if p.is_file()]
    cron = tmp / "cron"
    for sub in ("cron.d", "spool"):
        (cron / sub).mkdir(parents=True)
    text = gen.read_text()
    # Its inputs are hard-coded paths: point them at the temporary folders (same length
    # of work; the parsing and unit writing are what is measured).
    for old, new in (
        ("'/etc/crontab'", repr(str(cron / "crontab"))),
        ("'/etc/cron.d'", repr(str(cron / "cron.d"))),
        ("'/var/spool/cron/crontabs'", repr(str(cron / "spool"))),
        ("'/etc/cron.' + period", repr(str(cron / "none.")) + " + period"),
        ("'/run/crond.reboot'", repr(str(cron / "reboot"))),
        ("'/run/systemd/use_run_parts'", repr(str(cron / "use_run_parts"))),
    ):
        text = text.replace(old, new)
    patched = tmp / "systemd-crontab-generator"
    patched.write_text(text)
    patched.chmod(0o755)
    deb_version = debs[0].name.split("_")[1]
    patched.with_suffix(".version").write_text(deb_version)
    return patched


def empty(folder: Path, *also: Path):
    """Before a run: ``folder`` empty, ``also`` (the render cache) gone."""

    def clear() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        for other in also:
            shutil.rmtree(other, ignore_errors=True)
        folder.mkdir(parents=True)
        # The deleted files' writeback is the previous run's cost: without this the next
        # run's creates and sync wait for it (ext4), for jobgen and systemd-cron alike.
        os.sync()

    return clear


# --------------------------------------------------------------------------- report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="sizes 100 and 1000 only, 3 runs")
    args = ap.parse_args()
    runs = 3 if args.quick else args.runs
    sizes = SIZES[:2] if args.quick else SIZES
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jobgen-bench-") as t:
        tmp = Path(t)
        jobgen = installed_jobgen(tmp)
        python = [str(Path(jobgen[0]).with_name("python"))]
        # The render cache (README: Render cache) of these runs: removed before every
        # render into an empty folder (a first render knows nothing), kept for the
        # render that follows into the folder it wrote (what a user's next render finds).
        cache = tmp / "cache"
        env = {**os.environ, "JOBGEN_CACHE_DIR": str(cache)}
        gen = systemd_cron(tmp)
        version = gen.with_suffix(".version").read_text() if gen else "not measured"
        cron_stat = None
        renders: dict[int, Stat] = {}
        rerenders: dict[int, Stat] = {}
        uncached: dict[int, Stat] = {}
        for n in sizes:
            parts = []
            for first in range(0, n, PER_MANIFEST):
                m = tmp / f"jobs-{n}-{first // PER_MANIFEST:02d}.yaml"
                m.write_text(manifest(min(PER_MANIFEST, n - first), first))
                parts.append(str(m))
            out = tmp / f"out-{n}"
            k = max(3, runs if n < 10000 else 3)
            label = f"{n} jobs" + (f" ({len(parts)} manifests)" if len(parts) > 1 else "")
            argv = [*jobgen, "render", *parts, "-o", str(out), "-q"]
            first_render = (f"render {label}, empty folder", argv, {"before": empty(out, cache), "env": env})
            if n == 1000 and gen is not None:
                # The comparison: jobgen and systemd-cron's generator in turn, same jobs.
                (tmp / "cron" / "cron.d" / "jobs").write_text(crontab(1000))
                cron_out = tmp / "cron-out"
                cron = ("systemd-cron generator, 1000 jobs", [*python, str(gen), str(cron_out), str(cron_out), str(cron_out)], {"before": empty(cron_out)})
                renders[n], cron_stat = alternating(runs, first_render, cron)
            else:
                renders[n] = repeat(first_render[0], k, argv, **first_render[2])
            rerenders[n] = repeat(f"render {label}, nothing changed", k, argv, env=env)
            uncached[n] = repeat(f"render {label}, nothing changed, --no-cache", k, [*argv, "--no-cache"], env=env)
        startup = [
            repeat("python -c pass", runs, [*python, "-c", "pass"]),
            repeat('python -c "import typer"', runs, [*python, "-c", "import typer"]),
            # What any render pays before its first job: the interpreter and the runtime
            # dependencies pyproject fixes (typer, jinja2, PyYAML) imported, nothing else.
            repeat('python -c "import typer, jinja2, yaml"', runs, [*python, "-c", "import typer, jinja2, yaml"]),
            repeat("jobgen --version", runs, [*jobgen, "--version"]),
            repeat("jobgen check examples/*.yaml", runs, [*jobgen, "check", *map(str, sorted((REPO / "examples").glob("*.yaml")))]),
        ]

    rows += ["| what | wall, median (spread) | CPU | peak RSS |", "|---|---|---|---|"]
    for stat in [*(s for n in sizes for s in (renders[n], rerenders[n], uncached[n])), *([cron_stat] if cron_stat else []), *startup]:
        rows.append(f"| {stat.label} | {stat.wall:.3f} s ({stat.spread()}) | {stat.cpu:.3f} s | {stat.rss_mib:.0f} MiB |")

    ratios = ["| ratio | measured | target |", "|---|---|---|"]
    if cron_stat and 1000 in renders:
        ratios.append(f"| render 1,000 jobs / systemd-cron generator (wall) | {renders[1000].wall / cron_stat.wall:.2f}× | ≤ 1.0× |")
        ratios.append(f"| render 1,000 jobs / systemd-cron generator (CPU) | {renders[1000].cpu / cron_stat.cpu:.2f}× | |")
    for n in sizes:
        ratios.append(f"| re-render {n} unchanged / first render | {rerenders[n].wall / renders[n].wall:.2f}× | ≤ 0.3× |")
        ratios.append(f"| re-render {n} unchanged with --no-cache / first render | {uncached[n].wall / renders[n].wall:.2f}× | |")
    if 10000 in renders:
        ratios.append(f"| render 10,000 / render 1,000 (wall) | {renders[10000].wall / renders[1000].wall:.2f}× | ≤ 11× |")
        ratios.append(f"| peak RSS at 10,000 jobs | {renders[10000].rss_mib:.0f} MiB | < 200 MiB |")
    ratios.append(f"| jobgen --version / import typer | {startup[3].wall / startup[1].wall:.2f}× | ≤ 1.3× |")
    if cron_stat:
        ratios.append(f"| import typer, jinja2, yaml alone / systemd-cron generator (the floor) | {startup[2].wall / cron_stat.wall:.2f}× | |")
    if 100 in renders:
        ratios.append(f"| import typer alone / render 100 jobs (the floor of a re-render) | {startup[1].wall / renders[100].wall:.2f}× | |")

    text = "\n".join([
        "# jobgen benchmark",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"systemd-cron {version}. Produced by `bench/run` (`bench/bench.py`): jobgen is the wheel of",
        "this checkout pip-installed into a fresh virtualenv (bytecode compiled, as users get it); every row is a fresh",
        f"process; wall time is the median of {runs} runs (3 at 10,000 jobs) with min..max; CPU is",
        "user+system of the child; peak RSS is the child's ru_maxrss. Jobs: one command, calendar",
        f"schedule and user (`{USER}`, one that exists here, for both) each, target systemd 252, into an empty folder unless stated; 10,000",
        "jobs are 10 manifests of 1,000 in one `jobgen render` (one manifest holds at most 1 MiB).",
        "",
        *ratios,
        "",
        *rows,
        "",
    ])
    OUT.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
