#!/usr/bin/env python3
"""jobgen's benchmark: render cost against systemd-cron's generator, start-up, memory.

    .venv/bin/python bench/bench.py [--runs N] [--quick]     # writes bench/results.md

What it measures (every number a fresh process, as users run it; bench/harness.py says how):

1. `jobgen render` of generated manifests with 100, 1,000 and 10,000 jobs into an EMPTY
   folder with an empty render cache, and again into the folder it just wrote (nothing
   changed: the cache's case), and that again with --no-cache (compile and compare; not at
   10,000 jobs, to keep the run short); once with the output (and the cache) on a private
   tmpfs and once on the disk (10,000 jobs on the tmpfs only);
2. the same 1,000 jobs as a cron.d file through systemd-cron 1.15.19's generator (Debian 12,
   a Python script, run by jobgen's own interpreter) and, for scale, systemd-cron 2.x's C++
   generator (Debian 13, through its own loader and libraries), taken in turn with jobgen's
   render. Both read /etc/cron.d, compiled in: the run happens in a private mount namespace
   where an overlay over /etc holds the jobs (bench/fetch-references fetches the packages;
   nothing is installed);
3. start-up: `jobgen --version` and `jobgen check` on the examples, against
   `python -c "import typer"` and the interpreter alone;
4. peak memory (the child's own ru_maxrss) at every size.
A benchmark, not a test: nothing here is ever asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h  # noqa: E402

OUT = Path(__file__).with_name("results.md")
SIZES = (100, 1000, 10000)
# One manifest holds at most 1 MiB (README "Limits", some 8,000 jobs): larger sets are
# rendered as several manifests of PER_MANIFEST jobs in one `jobgen render`, as users split them.
PER_MANIFEST = 1000
COMPARED = 1000


def inner(args) -> None:
    venv = Path(args.venv)
    jobgen = str(venv / "bin" / "jobgen")
    python = str(venv / "bin" / "python")
    who = h.user()
    scratch = Path(tempfile.mkdtemp(prefix="jobgen-bench-"))
    h.mount_tmpfs(scratch, size="4g")
    disk = h.disk_scratch()
    stage = h.Stage(scratch / "stage")
    stage.reset([(0, COMPARED)], who)
    inputs = scratch / "manifests"
    inputs.mkdir()
    sizes = SIZES[:2] if args.quick else SIZES
    cron_py = h.systemd_cron_python(python)
    cron_cpp = h.systemd_cron_cpp()
    cpp_version = h.reference_versions().get("systemd-cron@trixie", "2.x")
    rows = ["| output on | what | " + h.ROW_HEADER, "|---|---|---|---|---|"]
    ratios = ["| ratio (medians) | measured | target |", "|---|---|---|"]
    fs_of = {}
    for fs_name, base, sync in (("tmpfs", scratch, False), ("disk", disk, True)):
        fs_of[fs_name] = h.fstype(base)
        firsts: dict[int, h.Stat] = {}
        # 10,000 jobs on the tmpfs only: on a loaded disk each run takes a minute, and the
        # ratio it answers (10,000 against 1,000 jobs) is the compiler's, not the disk's.
        for n in (s for s in sizes if fs_name == "tmpfs" or s < 10000):
            parts = []
            for first in range(0, n, PER_MANIFEST):
                m = inputs / f"jobs-{n}-{first // PER_MANIFEST:02d}.yaml"
                m.write_text(h.jobgen_manifest(first, min(PER_MANIFEST, n - first), who, target="252"))
                parts.append(str(m))
            out, cache = base / f"out-{n}", base / "cache"
            env = {**os.environ, "JOBGEN_CACHE_DIR": str(cache)}
            label = f"{n} jobs" + (f" ({len(parts)} manifests)" if len(parts) > 1 else "")
            runs = 3 if n >= 10000 else args.runs
            argv = [jobgen, "render", *parts, "-o", str(out), "-q"]
            first = h.Stat(f"render {label}, empty folder and cache")
            specs = [(first, argv, {"before": h.emptied(out, cache, sync=sync), "env": env, "ok": (0, 1)})]
            refs = []
            if n == COMPARED:
                cron_out = base / "cron-out"
                for name, gen in (("systemd-cron 1.15.19 generator (Python)", cron_py),
                                  (f"systemd-cron {cpp_version} generator (C++), for scale", cron_cpp)):
                    if gen:
                        refs.append(h.Stat(f"{name}, {n} jobs"))
                        specs.append((refs[-1], [*gen, str(cron_out), str(cron_out), str(cron_out)],
                                      {"before": h.emptied(cron_out, sync=sync)}))
            h.in_turn(runs, specs)
            firsts[n] = first
            again = h.Stat(f"render {label}, nothing changed")
            h.in_turn(runs, [(again, argv, {"env": env, "ok": (0, 1)})])
            stats = [first, again, *refs]
            if n < 10000:
                uncached = h.Stat(f"render {label}, nothing changed, --no-cache")
                h.in_turn(runs, [(uncached, [*argv, "--no-cache"], {"env": env, "ok": (0, 1)})])
                stats.append(uncached)
            for stat in stats:
                rows.append(f"| {fs_name} | " + stat.row()[2:])
                print(rows[-1], file=sys.stderr, flush=True)
            ratios.append(f"| {fs_name}: re-render {n} unchanged / first render, CPU (wall) | "
                          f"{h.ratio(again.cpu, first.cpu)} ({h.ratio(again.wall, first.wall)}) | ≤ 0.3× |")
            if refs and refs[0].label.startswith("systemd-cron 1.15"):
                ratios.append(f"| {fs_name}: render {n} jobs / systemd-cron 1.15.19, CPU (wall) | "
                              f"{h.ratio(first.cpu, refs[0].cpu)} ({h.ratio(first.wall, refs[0].wall)}) | ≤ 1.5× |")
            if len(refs) > 1:
                ratios.append(f"| {fs_name}: render {n} jobs / systemd-cron {cpp_version} (C++), CPU (wall), for scale | "
                              f"{h.ratio(first.cpu, refs[1].cpu)} ({h.ratio(first.wall, refs[1].wall)}) | |")
            shutil.rmtree(out, ignore_errors=True)
        if 10000 in firsts:
            ratios.append(f"| {fs_name}: render 10,000 / render 1,000, CPU (wall) | "
                          f"{h.ratio(firsts[10000].cpu, firsts[1000].cpu)} ({h.ratio(firsts[10000].wall, firsts[1000].wall)}) | ≤ 11× |")
            ratios.append(f"| {fs_name}: peak RSS at 10,000 jobs | {firsts[10000].rss_mib:.0f} MiB | < 200 MiB |")
    examples = [str(p) for p in sorted((h.REPO / "examples").glob("*.yaml"))]
    startup = [
        (h.Stat("`/bin/true` (the launcher's own share)"), ["/bin/true"], {}),
        (h.Stat("`python -c pass`"), [python, "-c", "pass"], {}),
        (h.Stat('`python -c "import typer"`'), [python, "-c", "import typer"], {}),
        # What any render pays before its first job: the runtime dependencies imported.
        (h.Stat('`python -c "import typer, jinja2, yaml"`'), [python, "-c", "import typer, jinja2, yaml"], {}),
        (h.Stat("`jobgen --version`"), [jobgen, "--version"], {}),
        (h.Stat("`jobgen check examples/*.yaml`"), [jobgen, "check", *examples], {"ok": (0, 1)}),
    ]
    h.in_turn(args.runs, startup)
    for stat, _, _ in startup:
        rows.append("| - | " + stat.row()[2:])
    ratios.append(f"| `jobgen --version` / `import typer`, CPU | {h.ratio(startup[4][0].cpu, startup[2][0].cpu)} | ≤ 1.3× |")
    stage.close()
    subprocess.run(["umount", str(scratch)], check=True)
    shutil.rmtree(disk, ignore_errors=True)
    text = [
        f"Output folders: tmpfs = a private tmpfs mounted in the namespace ({fs_of['tmpfs']}); disk = {disk} "
        f"({fs_of['disk']}), synced before every run there (the previous run's deletions written back, whichever "
        "tool made them). The render cache (JOBGEN_CACHE_DIR) is on the same file system as the output.",
        f"Rounds: {args.runs} (3 at 10,000 jobs). Jobs: one command, a daily time and user `{who}` (one that exists "
        "here, for every tool) each; jobgen's target is systemd 252; 10,000 jobs are 10 manifests of 1,000 in one "
        "`jobgen render` (one manifest holds at most 1 MiB), on the tmpfs only.",
        "",
        *ratios,
        "",
        *rows,
    ]
    Path(args.part).write_text("\n".join(text) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int)
    ap.add_argument("--quick", action="store_true", help="sizes 100 and 1000 only, 3 rounds")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--venv", help=argparse.SUPPRESS)
    ap.add_argument("--part", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.inner:
        inner(args)
        return 0
    venv, before, body = h.measured_in_namespace(__file__, args.runs, *(["--quick"] if args.quick else []))
    python = str(venv / "bin" / "python")
    versions = h.reference_line(lambda k: k.startswith("systemd-cron"))
    text = "\n".join([
        "# jobgen benchmark: render",
        "",
        f"At the start: {before}",
        f"At the end: {h.machine_facts(python)}",
        f"Produced by `bench/run{' --quick' if args.quick else ''}` (`bench/bench.py`). jobgen is the wheel of this "
        "checkout pip-installed into a fresh virtualenv (bytecode compiled, as users get it). "
        f"References: {versions}.",
        "",
        h.METHOD,
        body,
    ])
    OUT.write_text(text.rstrip() + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
