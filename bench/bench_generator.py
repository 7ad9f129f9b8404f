#!/usr/bin/env python3
"""Benchmark: what `jobgen-generator` costs at every boot and `systemctl daemon-reload`,
against other generators that turn files into units.

    .venv/bin/python bench/bench_generator.py [--quick] [--runs N] [--no-reload]
    # writes bench/results-generator.md

1. The generators alone (bench/harness.py says how every number is taken), in a private
   mount namespace: each reads its own compiled-in input folders, filled through overlays
   (/etc/jobgen for jobgen, /etc/cron.d for systemd-cron, /etc/containers/systemd for
   Quadlet) and writes into three empty folders (normal, early, late) as systemd gives
   them, once on a private tmpfs (what /run/systemd/generator is) and once on the disk.
   - jobgen-generator, installed from this checkout's wheel, run twice in a row: "cold"
     right after every state it could keep was reset (the overlays over /etc, /var and /run
     mounted afresh, HOME, XDG_CACHE_HOME and JOBGEN_CACHE_DIR empty), then "warm" (what a
     cache kept by the first run gives the second; without one, just a second run);
   - systemd-cron 1.15.19's generator (Debian 12), a Python script, run by the same
     interpreter as jobgen;
   - for scale: systemd-cron 2.x's C++ generator and Podman 5.4's quadlet (Debian 13),
     through Debian 13's own loader and libraries (bench/fetch-references);
   - `python -c pass` and `python -I -c pass` on that interpreter, the floor of the
     no-manifest case.
   Cases: no input at all, 10 jobs, 200 jobs in one file, 200 jobs in 20 files. The same
   jobs for every tool: a daily time, one command, one user that exists here.
2. `systemctl daemon-reload` on booted systemd 252 (Debian 12) and 257 (Debian 13), with and
   without jobgen's generator linked (bench/bench_reload.py).
A benchmark, not a test: nothing is asserted.
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

OUT = Path(__file__).with_name("results-generator.md")

# case -> files as (first job, job count)
CASES = {
    "no input": [],
    "10 jobs, 1 file": [(0, 10)],
    "200 jobs, 1 file": [(0, 200)],
    "200 jobs, 20 files": [(i * 10, 10) for i in range(20)],
}

def generator_dirs(out: Path, sync: bool):
    """`before`: normal, early and late folders, empty, as systemd hands them over."""

    def clear() -> None:
        shutil.rmtree(out, ignore_errors=True)
        for sub in ("normal", "early", "late"):
            (out / sub).mkdir(parents=True)
        if sync:
            os.sync()

    return clear


def entries(out: Path) -> int:
    return sum(1 for _ in (out / "normal").rglob("*"))


def inner(args) -> None:
    """Part 1, run inside the private mount namespace; writes its markdown to args.part."""
    venv = Path(args.venv)
    python = str(venv / "bin" / "python")
    who = h.user()
    scratch = Path(tempfile.mkdtemp(prefix="jobgen-bench-gen-"))
    h.mount_tmpfs(scratch)
    tmpfs_out = scratch / "out"
    disk_out = h.disk_scratch() / "out"
    home = scratch / "home"
    stage = h.Stage(scratch)
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "JOBGEN_CACHE_DIR": str(home / "jobgen-cache")}

    def snapshot() -> set[str]:
        """Every entry in the overlays' upper layers and in HOME: what a run left outside its
        output folders (a cache, if the generator keeps one)."""
        found = {f"$HOME/{p.relative_to(home)}" for p in home.rglob("*")}
        for sub in ("etc", "var", "run"):
            up = scratch / "overlay" / sub / "upper"
            found |= {f"/{sub}/{p.relative_to(up)}" for p in up.rglob("*")}
        return found

    kept: dict[str, list[str]] = {}

    def reset_all(files):
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir()
        stage.reset(files, who)

    tools: list[tuple[str, list[str] | None]] = [
        ("systemd-cron 1.15.19 (Python)", h.systemd_cron_python(python)),
        (f"systemd-cron {h.reference_versions().get('systemd-cron@trixie', '2.x')} (C++), for scale", h.systemd_cron_cpp()),
        (f"Podman quadlet {h.reference_versions().get('podman@trixie', '5.4')}, for scale", h.quadlet()),
    ]
    missing = [name for name, argv in tools if argv is None]
    tools = [(name, argv) for name, argv in tools if argv is not None]
    rows: list[str] = []
    ratios: list[str] = []
    floor: dict[str, h.Stat] = {}
    runs = args.runs
    for fs_name, out, sync in (("tmpfs", tmpfs_out, False), ("disk", disk_out, True)):
        rows += ["", f"### Output on {fs_name} ({h.fstype(out.parent)})", "",
                 f"| case | tool | units and files written | {h.ROW_HEADER}", "|---|---|---|---|---|---|"]
        for case, files in CASES.items():
            if fs_name == "disk" and case == "200 jobs, 20 files":
                continue  # the split costs the same on either file system; the tmpfs shows it
            cold = h.Stat("jobgen-generator, cold")
            warm = h.Stat("jobgen-generator, warm (second run)")
            refs = [h.Stat(name) for name, _ in tools]
            extra = []
            if case == "no input" and fs_name == "tmpfs":
                extra = [(h.Stat("`/bin/true` (the launcher's own share)"), ["/bin/true"]),
                         (h.Stat("`python -c pass`"), [python, "-c", "pass"]),
                         (h.Stat("`python -I -c pass`"), [python, "-I", "-c", "pass"])]
            counts: dict[str, int] = {}
            gen_argv = lambda argv: [*argv, str(out / "normal"), str(out / "early"), str(out / "late")]  # noqa: E731

            def jobgen_pair():
                reset_all(files)
                argv = gen_argv([str(venv / "bin" / "jobgen-generator")])
                before = snapshot()
                cold.samples.append(h.measure(argv, env=env, before=generator_dirs(out, sync)))
                kept[case] = sorted(snapshot() - before)
                warm.samples.append(h.measure(argv, env=env, before=generator_dirs(out, sync)))
                counts[cold.label] = counts[warm.label] = entries(out)

            def one(stat, argv):
                def run():
                    stat.samples.append(h.measure(argv, env=env, before=generator_dirs(out, sync)))
                    counts[stat.label] = entries(out) if (out / "normal").exists() else 0
                return run

            steps = [jobgen_pair, *(one(s, gen_argv(argv)) for s, (_, argv) in zip(refs, tools)),
                     *(one(s, argv) for s, argv in extra)]
            reset_all(files)
            for r in range(runs):
                k = r % len(steps)
                for step in steps[k:] + steps[:k]:
                    step()
            for stat in (cold, warm, *refs, *(s for s, _ in extra)):
                shown = "-" if stat in [s for s, _ in extra] else str(counts.get(stat.label, 0))
                rows.append(stat.row().replace(f"| {stat.label} |", f"| {case} | {stat.label} | {shown} |", 1))
            print(f"{fs_name} {case}: cold {h.ms(cold.cpu)} ms, warm {h.ms(warm.cpu)} ms CPU", file=sys.stderr, flush=True)
            for s, _ in extra:
                floor[s.label] = s
            py = refs[0] if tools and tools[0][0].startswith("systemd-cron 1.15") else None
            if case == "no input" and floor:
                for label, f in floor.items():
                    if "python" not in label:
                        continue
                    ratios.append(f"| {fs_name}: no manifest (cold) / {label}, CPU | {ratio_cell(cold.cpu, f.cpu)} | ≤ 2× |")
            elif py and case in ("10 jobs, 1 file", "200 jobs, 1 file"):
                n = case.split()[0]
                for label, stat, target in (("warm", warm, 1.0), ("cold", cold, 3.0)):
                    ratios.append(f"| {fs_name}: {n} jobs, {label} / systemd-cron 1.15.19, CPU | "
                                  f"{ratio_cell(stat.cpu, py.cpu)} | ≤ {target:.0f}× |")
                    ratios.append(f"| {fs_name}: {n} jobs, {label} / systemd-cron 1.15.19, wall | "
                                  f"{ratio_cell(stat.wall, py.wall)} | |")
    stage.close()
    disk_fs = h.fstype(disk_out.parent)
    left = sorted({p for paths in kept.values() for p in paths})
    kept_line = ("What jobgen's cold run left outside its output folders (a cache, if it keeps one; found by "
                 "comparing the overlays' upper layers and HOME before and after it): "
                 + (", ".join(f"`{p}`" for p in left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
                    if left else "nothing, so its warm run is simply a second run") + ".")
    subprocess.run(["umount", str(scratch)], check=True)
    shutil.rmtree(disk_out.parent, ignore_errors=True)
    text = [
        "## The generators alone",
        "",
        f"Output folders: a private tmpfs mounted in the namespace (tmpfs), "
        f"and {disk_out.parent} on the disk ({disk_fs}), synced before every run there (the previous run's deletions "
        "written back, whichever tool made them).",
        f"{runs} rounds; in each, after a reset, the tools in turn (the order rotated each round): "
        "jobgen's cold run and its warm run right after it, then each other generator once.",
        kept_line,
        *(["Not measured (bench/fetch-references did not provide them): " + ", ".join(missing) + "."] if missing else []),
        "",
        "| ratio (medians) | measured | target |",
        "|---|---|---|",
        *ratios,
        *rows,
    ]
    Path(args.part).write_text("\n".join(text) + "\n")


def ratio_cell(a: float, b: float) -> str:
    return h.ratio(a, b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int)
    ap.add_argument("--quick", action="store_true", help="3 rounds, 3 reloads per case")
    ap.add_argument("--no-reload", action="store_true", help="skip the booted systemd part")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--venv", help=argparse.SUPPRESS)
    ap.add_argument("--part", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.runs is None:
        args.runs = 3 if args.quick else 5
    if args.inner:
        inner(args)
        return 0
    venv, facts_before, generators = h.measured_in_namespace(__file__, args.runs)
    python = str(venv / "bin" / "python")
    reload_text = ""
    if not args.no_reload:
        import bench_reload

        reload_text = bench_reload.run(repeats=3 if args.quick else 5, venv=venv)
    versions = h.reference_line(lambda k: not k.startswith("lib"))
    text = "\n".join([
        "# jobgen-generator benchmark",
        "",
        f"At the start: {facts_before}",
        f"At the end: {h.machine_facts(python)}",
        f"Produced by `bench/run` (`bench/bench_generator.py{' --quick' if args.quick else ''}`). References: {versions}.",
        "",
        h.METHOD,
        generators.replace("\n\n\n", "\n\n"),
        reload_text,
    ])
    OUT.write_text(text.rstrip() + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
