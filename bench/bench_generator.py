#!/usr/bin/env python3
"""Benchmark: what `jobgen-generator` costs at every boot and `systemctl daemon-reload`.

    .venv/bin/python bench/bench_generator.py        # writes bench/results-generator.md

The real console script (the one systemd runs) with JOBGEN_MANIFEST_DIRS pointing at
synthetic manifests, writing into fresh, empty output folders on a tmpfs (/dev/shm when
there is one), as systemd's /run/systemd/generator is: systemd empties those folders
before every run. Cases: no manifest at all (what every host with the generator linked
pays), 10 jobs, 200 jobs in one manifest, and 200 jobs spread over 20 manifests.
The floor is the interpreter alone, twice: `python -c pass` (site and the virtualenv's
.pth files, as the console script starts) and `python -I -c pass` (isolated: no site
packages); the no-manifest run is also given as a ratio to the latter (aim: at most 2x,
systemd.generator(7) asks generators to be fast).
The cases above run with the compiled cache off (each run compiles); a second table
(cache_rows) gives cold runs (no cache entry) and warm ones (a hit) of 10 and 200 jobs
against systemd-cron's generator on the same jobs as a cron.d file (bench.py's unpacked
Debian package, fetched with apt-get download).
Each case runs RUNS times in a fresh process; wall time and CPU (user + system) are
reported as the median with min-max spread, peak RSS as the largest child. The
interpreter alone (`python -c pass`) is the floor. A benchmark, not a test: numbers
depend on the machine and its load and are never asserted.
"""

from __future__ import annotations

import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 7
OUT = Path(__file__).with_name("results-generator.md")
GENERATOR = Path(sys.executable).with_name("jobgen-generator")


def manifest(first: int, count: int) -> str:
    lines = ["jobgen: 1", "defaults: {user: app}", "jobs:"]
    for i in range(first, first + count):
        lines += [f"  job-{i:05d}:", f"    command: [/usr/bin/php, artisan, 'task:{i}']", "    schedule: '*:0/5'", "    timeout: 4min"]
        if i % 3 == 0:
            lines += ["    overlap: wait", "    wait_timeout: 1min"]
    return "\n".join(lines) + "\n"


# case name -> manifests as (first job, job count) per file
CASES = {
    "no manifest": [],
    "10 jobs, 1 manifest": [(0, 10)],
    "200 jobs, 1 manifest": [(0, 200)],
    "200 jobs, 20 manifests": [(i * 10, 10) for i in range(20)],
}


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0 or r.stderr:
        raise SystemExit(f"{argv} failed ({r.returncode}): {r.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, after.ru_maxrss


def spread(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main() -> None:
    if not GENERATOR.exists():
        raise SystemExit(f"{GENERATOR} is missing: run scripts/bootstrap")
    scratch = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    rows = []
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        # The compiled cache off for these cases (each run compiles); cache_rows measures it.
        base = {"PATH": os.environ["PATH"], "JOBGEN_GENERATOR_CACHE": ""}
        floor = [run_once([sys.executable, "-c", "pass"], base) for _ in range(RUNS)]
        rows.append(f"| interpreter alone (`python -c pass`) | - | {spread([r[0] for r in floor])} | {spread([r[1] for r in floor])} | {max(r[2] for r in floor) / 1024:.0f} MiB |")
        print(rows[-1])
        isolated = [run_once([sys.executable, "-I", "-c", "pass"], base) for _ in range(RUNS)]
        rows.append(f"| interpreter alone, isolated (`python -I -c pass`) | - | {spread([r[0] for r in isolated])} | {spread([r[1] for r in isolated])} | {max(r[2] for r in isolated) / 1024:.0f} MiB |")
        print(rows[-1])
        medians = {}
        for name, files in CASES.items():
            src = Path(tmp, f"manifests-{len(rows)}")
            src.mkdir()
            for k, (first, count) in enumerate(files):
                (src / f"m{k:02d}.yaml").write_text(manifest(first, count))
            results, produced = [], 0
            for _ in range(RUNS):
                out = Path(tmp, "out")
                shutil.rmtree(out, ignore_errors=True)
                argv = [str(GENERATOR), str(out / "normal"), str(out / "early"), str(out / "late")]
                results.append(run_once(argv, {**base, "JOBGEN_MANIFEST_DIRS": str(src)}))
                produced = sum(1 for _ in (out / "normal").rglob("*")) if (out / "normal").exists() else 0
            medians[name] = statistics.median(r[1] for r in results)
            rows.append(f"| {name} | {produced} | {spread([r[0] for r in results])} | {spread([r[1] for r in results])} | {max(r[2] for r in results) / 1024:.0f} MiB |")
            print(rows[-1])
        cache_table = cache_rows(Path(tmp), base)
    header = [
        "# jobgen-generator benchmark",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} when it finished; output on {scratch or 'the default temporary folder'}.",
        f"Produced by `bench/bench_generator.py`: the `jobgen-generator` console script in a fresh process, "
        f"median (min-max) of {RUNS} runs, into empty folders as systemd gives it.",
        "Entries = files, folders and links written into the normal folder. Peak RSS is the largest child so far (ru_maxrss).",
        "",
        "| case | entries | wall time | CPU (user+sys) | peak RSS |",
        "|---|---|---|---|---|",
    ]
    ratio = [
        "",
        f"No manifest / `python -I -c pass` (CPU medians): {medians['no manifest'] / statistics.median(r[1] for r in isolated):.2f}x (aim: at most 2x).",
    ]
    OUT.write_text("\n".join(header + rows + ratio + cache_table) + "\n")


# The compiled cache (host/gencache.py): cold = no entry (compile, then store it), warm =
# the entry of the same inputs is there (what every boot and reload after the first gets).
CACHE_JOBS = (10, 200)


def cache_rows(tmp: Path, base: dict[str, str]) -> list[str]:
    """Cold and warm runs of one manifest of N jobs against systemd-cron's generator on the
    same N jobs as a cron.d file (bench.py: the Debian package unpacked, its input paths
    pointed at temporary folders, run by this interpreter), taken in turn."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench import crontab, systemd_cron

    cron_gen = systemd_cron(tmp)
    version = cron_gen.with_suffix(".version").read_text() if cron_gen else None
    rows = [
        "",
        "## The compiled cache: cold and warm against systemd-cron's generator",
        "",
        "Cold: no cache entry (the generator compiles, writes, then stores the entry). Warm: the entry of the same",
        "inputs is there (every boot and daemon-reload after the first): the recorded files are written on the",
        f"standard library alone. systemd-cron {version or '(not downloadable: not measured)'}'s generator on the same",
        "jobs as a cron.d file, run by the same interpreter. CPU (user+sys), median (min-max) of "
        f"{RUNS} runs each, the three taken in turn.",
        "",
        "| jobs | cold | warm | systemd-cron generator | cold / systemd-cron | warm / systemd-cron |",
        "|---|---|---|---|---|---|",
    ]
    for n in CACHE_JOBS:
        src = tmp / f"cache-manifests-{n}"
        src.mkdir()
        (src / "m00.yaml").write_text(manifest(0, n))
        var_cache = tmp / f"var-cache-{n}"  # as /var/cache: the run makes jobgen/generator
        var_cache.mkdir()
        env = {**base, "JOBGEN_MANIFEST_DIRS": str(src), "JOBGEN_GENERATOR_CACHE": str(var_cache / "jobgen" / "generator")}
        out = tmp / f"cache-out-{n}"
        argv = [str(GENERATOR), str(out / "normal"), str(out / "early"), str(out / "late")]
        cron = tmp / "cron"
        if cron_gen:
            (cron / "cron.d" / "jobs").write_text(crontab(n))
        cold, warm, ref = [], [], []
        for _ in range(RUNS):
            shutil.rmtree(var_cache / "jobgen", ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            cold.append(run_once(argv, env)[1])
            shutil.rmtree(out, ignore_errors=True)
            warm.append(run_once(argv, env)[1])
            if cron_gen:
                shutil.rmtree(out, ignore_errors=True)
                (out / "normal").mkdir(parents=True)
                ref.append(run_once([sys.executable, str(cron_gen), str(out / "normal"), str(out / "normal"), str(out / "normal")], base)[1])
        median = statistics.median
        versus = (f"{median(cold) / median(ref):.2f}x | {median(warm) / median(ref):.2f}x" if ref else "- | -")
        rows.append(f"| {n} | {spread(cold)} | {spread(warm)} | {spread(ref) if ref else 'not measured'} | {versus} |")
        print(rows[-1])
    return rows


if __name__ == "__main__":
    main()
