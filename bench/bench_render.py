#!/usr/bin/env python3
"""Benchmark: how long `jobgen render` takes, and how much memory, as manifests grow.

    .venv/bin/python bench/bench_render.py            # writes bench/results-render.md

Each size is a synthetic manifest of N jobs (host locks, every third one waiting) and
N/10 workers. Rendering runs in a fresh process (`jobgen render ... --check`, so nothing
is written and start-up is included, as a pipeline sees it); the median of 5 runs
of wall time and the peak RSS (ru_maxrss of the child) are reported. A benchmark, not a
test: numbers depend on the machine and are never asserted.
"""

import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = (1, 10, 100, 1000)
RUNS = 5
OUT = Path(__file__).with_name("results-render.md")


def manifest(n: int) -> str:
    lines = ["jobgen: 1", "target: {systemd: '>=252'}", "defaults: {user: app}", "jobs:"]
    for i in range(n):
        lines += [f"  job-{i:05d}:", f"    command: [/usr/bin/php, artisan, 'task:{i}', '--x=%s$y']", "    schedule: '*:0/5'", "    timeout: 4min"]
        if i % 3 == 0:
            lines += ["    overlap: wait", "    wait_timeout: 1min"]
    lines.append("workers:")
    for i in range(max(1, n // 10)):
        lines += [f"  worker-{i:04d}:", "    command: [/usr/bin/php, artisan, 'queue:work']", "    stop_timeout: 30s", "    instances: 2"]
    return "\n".join(lines) + "\n"


def measure(path: Path, outdir: Path) -> tuple[float, int]:
    argv = [sys.executable, "-m", "jobgen", "render", str(path), "-o", str(outdir), "--check"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before)


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in SIZES:
            path = Path(tmp) / f"m{n}.yaml"
            path.write_text(manifest(n))
            results = [measure(path, Path(tmp) / "out") for _ in range(RUNS)]
            wall = statistics.median(r[0] for r in results)
            peak_mib = max(r[1] for r in results) / 1024
            files = 2 * n + 2 * max(1, n // 10) + 1
            rows.append(f"| {n} | {files} | {wall * 1000:.0f} ms | {peak_mib:.0f} MiB |")
            print(rows[-1])
    header = [
        "# jobgen render benchmark",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}.",
        "Produced by `bench/bench_render.py`; `jobgen render --check` in a fresh process, median of 5.",
        "Peak RSS is the largest child so far (ru_maxrss), so it never decreases down the table.",
        "",
        "| jobs | files | wall time | peak RSS |",
        "|---|---|---|---|",
    ]
    OUT.write_text("\n".join(header + rows) + "\n")


if __name__ == "__main__":
    main()
