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
        base = {"PATH": os.environ["PATH"]}
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
    OUT.write_text("\n".join(header + rows + ratio) + "\n")


if __name__ == "__main__":
    main()
