"""`systemctl daemon-reload` on booted systemd 252 (Debian 12) and 257 (Debian 13), with and
without jobgen's generator linked: what an administrator's reload (and every boot's
generator pass) pays for it. Part of bench/bench_generator.py's results.

Each release boots in a container as the end-to-end tests boot it (tests/e2e/container.py),
with jobgen installed from this checkout's wheel (/opt/jobgen, /usr/bin/jobgen-generator).
A round sets one state, then reloads twice and times each reload inside the container
(date +%s%N around `systemctl daemon-reload`, so nsenter's cost is outside): the first
reload after the state changed ("first": the generator finds new manifests, cold for any
cache it keeps) and the one right after it ("again": nothing changed, warm). The states
are taken in turn, the order rotated every round; medians of the rounds.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import harness as h

sys.path.insert(0, str(h.REPO / "tests" / "e2e"))

LINK = "/etc/systemd/system-generators/jobgen-generator"
STAGED = "/root/bench-manifests"
STATES = {
    "generator not linked": (False, None),
    "linked, no manifest": (True, None),
    "linked, 10 jobs": (True, 10),
    "linked, 200 jobs": (True, 200),
}
TIMED_RELOAD = 'a=$(date +%s%N); systemctl daemon-reload; b=$(date +%s%N); echo $(( (b - a) / 1000 ))'


def _set_state(c, linked: bool, jobs: int | None) -> None:
    script = ["rm -rf /etc/jobgen", f"rm -f {LINK}"]
    if linked:
        script.append(f'mkdir -p {LINK.rsplit("/", 1)[0]} && ln -s "$(command -v jobgen-generator)" {LINK}')
    if jobs:
        script.append(f"mkdir -p /etc/jobgen && cp {STAGED}/{jobs}.yaml /etc/jobgen/jobs.yaml")
    c.run("/bin/sh", "-c", " && ".join(script))


def _reload_ms(c) -> float:
    return int(c.run("/bin/sh", "-c", TIMED_RELOAD, timeout=300).stdout.strip()) / 1000


def run(repeats: int, venv: Path) -> str:
    del venv  # the containers get the wheel, built below (their Python is not this one)
    try:
        from container import RELEASES, Container, HarnessError, build_wheel, ensure_rootfs_all, missing_prerequisites, \
            reap_stale_containers, rootfs_python, wheelhouse
    except ImportError as e:
        return f"## daemon-reload on booted systemd\n\nNot measured: {e}\n"
    suites = list(RELEASES.values())
    if reason := missing_prerequisites(suites):
        return f"## daemon-reload on booted systemd\n\nNot measured: {reason}\n"
    reap_stale_containers()
    ensure_rootfs_all(suites)
    rows = ["## `systemctl daemon-reload` on booted systemd", "", __doc__.split("\n\n", 1)[1].strip(), "",
            f"{repeats} rounds per release. Manifests: the jobs of the generator rows above (a daily time, one "
            "command, user `daemon`), no target (the generator targets the systemd it runs under).", "",
            "| systemd | state | reload, first (ms, median, min–max) | reload again (ms) | vs not linked (again) |",
            "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="jobgen-bench-reload-") as tmp:
        wheel = build_wheel(h.REPO, Path(tmp))
        for release in sorted(RELEASES):
            c = Container(release)
            try:
                c.boot()
                c.install_jobgen(wheel, wheelhouse(h.REPO, rootfs_python(c.suite)))
                for n in (10, 200):
                    c.write_file(f"{STAGED}/{n}.yaml", h.jobgen_manifest(0, n, "daemon"))
                first: dict[str, list[float]] = {s: [] for s in STATES}
                again: dict[str, list[float]] = {s: [] for s in STATES}
                names = list(STATES)
                for r in range(repeats):
                    k = r % len(names)
                    for state in names[k:] + names[:k]:
                        _set_state(c, *STATES[state])
                        first[state].append(_reload_ms(c))
                        again[state].append(_reload_ms(c))
                _set_state(c, False, None)
                c.systemctl("daemon-reload")
                base = statistics.median(again["generator not linked"])
                for state in names:
                    f, a = first[state], again[state]
                    rows.append(f"| {release} | {state} | {statistics.median(f):.0f} ({min(f):.0f}–{max(f):.0f}) | "
                                f"{statistics.median(a):.0f} ({min(a):.0f}–{max(a):.0f}) | "
                                f"{'' if state == names[0] else f'+{statistics.median(a) - base:.0f} ms'} |")
                    print(rows[-1], file=sys.stderr, flush=True)
            except HarnessError as e:
                rows.append(f"| {release} | not measured: {str(e).splitlines()[0][:200]} | | | |")
            finally:
                c.halt()
    return "\n".join(rows) + "\n"
