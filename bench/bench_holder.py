"""Benchmark: what `jobgen lock` adds to one run of a job, against the bare command and
against flock(1) (the host-scope lock). Not a test: it measures and reports, never asserts.

    .venv/bin/python bench/bench_holder.py [--runs N]

Starts its own redis-server, MariaDB and PostgreSQL on loopback (tests/cluster/lockservers.py),
runs `true` N times through each, and writes bench/results-holder.md (median, p90, and the
median overhead over the bare command). Backends whose server or client library is missing
are reported as skipped.

With --overlap T (default 5) it also measures, T times per case, how long a command goes on
after its lock was lost on the server (key deleted / session killed, server restart) while a
second holder takes the lock: the worst case per case is what docs/cluster-locks.md cites.
The cases and the measurement are the tests' own (tests/cluster/test_lock_holder.py).
With --overlap 0 the overlap section of the results file is kept as it was.
"""

from __future__ import annotations

import argparse
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "cluster"))

from lockservers import SERVERS, holder_argv, holder_env  # noqa: E402

COMMAND = ["/bin/true"]
# What a unit's ExecStart= runs: the console script, not `python -m jobgen` (runpy).
JOBGEN = Path(sys.executable).with_name("jobgen")
CLIENTS = {"redis": "redis", "mariadb": "pymysql", "postgres": "psycopg"}


def timed_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system, of the process and every child it waited for) seconds
    of one run. CPU is the steadier number on a loaded machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


# jobgen's own imports and option parsing, after the client library's, timed inside one
# process (CPU): the part of the holder's start-up that is jobgen's.
OWN_IMPORTS = """
import time, {client}
t = time.process_time()
import jobgen.runtime.lock as lock
lock.parse(["--backend", "{scheme}://h/0", "--name", "n", "--", "true"])
print(time.process_time() - t)
"""


def own_imports(client: str, scheme: str, runs: int, env: dict[str, str]) -> list[float]:
    code = OWN_IMPORTS.format(client=client, scheme=scheme)
    return [float(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                 capture_output=True, text=True).stdout) for _ in range(runs)]


def overlap_once(server, how: str, work: Path, n: int) -> float:
    """One loss: seconds the first command ran after the second holder's command started
    (0 when it had stopped before)."""
    from test_lock_holder import _lose, beating, last_beat  # the tests' cases, not copies

    env = holder_env()
    name = f"bench/overlap-{server.kind}-{how}-{n}"
    beats, second = work / f"beats-{name.replace('/', '-')}", work / f"second-{name.replace('/', '-')}"
    waiting = work / f"waiting-{name.replace('/', '-')}"
    argv = lambda *o, command: holder_argv("--backend", server.url(), "--name", name,  # noqa: E731
                                           "--connect-timeout", "2", *o, "--", *command)
    first = subprocess.Popen(argv("--grace", "1", command=["sh", "-c", beating(beats)]),
                             env=env, stderr=subprocess.DEVNULL)
    while not beats.exists():
        time.sleep(0.01)
    started = ["sh", "-c", f'date +%s%N > "{second}"']
    if how == "session-killed":
        with open(waiting, "w") as err:
            waiter = subprocess.Popen(argv("--wait", "60", command=started), env=env, stderr=err)
        while "waiting name=" not in waiting.read_text():
            time.sleep(0.01)
        _lose(server, name, how)
    else:
        _lose(server, name, how)
        waiter = subprocess.Popen(argv("--wait", "60", command=started), env=env,
                                  stderr=subprocess.DEVNULL)
    first.wait(timeout=120)
    waiter.wait(timeout=120)
    return max(0.0, (last_beat(beats) - int(second.read_text())) / 1e9)


def p90(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.9) - 1)]


def versions() -> list[str]:
    out = [f"Python {platform.python_version()}", f"{os.cpu_count()} CPUs",
           platform.platform()]
    for mod in ("redis", "pymysql", "psycopg"):
        try:
            out.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            out.append(f"{mod} missing")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--out", default=str(REPO / "bench" / "results-holder.md"))
    ap.add_argument("--overlap", type=int, default=5, metavar="T",
                    help="lock-loss trials per case (0: skip)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="jobgen-bench-"))
    os.chmod(work, 0o755)
    # An installed jobgen runs from bytecode (pip and dh_python compile on install): never
    # measure compiling its sources on every run.
    env = holder_env(PYTHONPYCACHEPREFIX=str(work / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cases: list[tuple[str, list[str]]] = [
        ("bare command", COMMAND),
        ("flock(1) host lock", ["flock", "--nonblock", "--conflict-exit-code", "75",
                                str(work / "bench.lock"), *COMMAND]),
        ("python3 -c pass (interpreter start, for scale)", [sys.executable, "-c", "pass"]),
    ]
    servers = []
    skipped = []
    for kind, cls in SERVERS.items():
        root = work / kind
        root.mkdir()
        os.chmod(root, 0o755)
        try:
            server = cls(root)
        except BaseException as e:  # pytest.skip raises a BaseException subclass
            skipped.append(f"{kind}: {e}")
            continue
        if not server.running:
            server.start()
        servers.append(server)
        client = CLIENTS[kind]
        cases.append((f"python3 -c 'import {client}' (the client library alone)",
                      [sys.executable, "-c", f"import {client}"]))
        cases.append((f"python3 -c 'import jobgen.runtime.lock, {client}' (imports only)",
                      [sys.executable, "-c", f"import jobgen.runtime.lock, {client}"]))
        cases.append((f"jobgen lock, {kind}",
                      [str(JOBGEN), "lock", "--backend", server.url(), "--name", "bench", "--",
                       *COMMAND]))

    rows = []
    own: list[tuple[str, float, float]] = []
    overlaps: list[tuple[str, str, list[float]]] = []
    try:
        for _, argv in cases:  # warm caches
            subprocess.run(argv, env=env, check=True, stderr=subprocess.DEVNULL)
        # Round-robin, not case after case: a load that changes meanwhile weighs on all alike.
        got: list[list[tuple[float, float]]] = [[] for _ in cases]
        for _ in range(args.runs):
            for i, (_, argv) in enumerate(cases):
                got[i].append(timed_once(argv, env))
        for (label, _), runs in zip(cases, got):
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            rows.append((label, statistics.median(walls), p90(walls), min(cpus),
                         statistics.median(cpus)))
            print(f"{label:60s} median {statistics.median(walls) * 1000:7.1f} ms, "
                  f"CPU min {min(cpus) * 1000:7.1f} ms", flush=True)
        for server in servers:
            client = CLIENTS[server.kind]
            cpus = own_imports(client, server.kind, args.runs, env)
            own.append((client, min(cpus), statistics.median(cpus)))
        for server in servers:
            for how in ("session-killed", "restart") if args.overlap else ():
                got = [overlap_once(server, how, work, n) for n in range(args.overlap)]
                overlaps.append((server.kind, how, got))
                print(f"overlap {server.kind} {how}: worst {max(got):.3f}s", flush=True)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    lines = [
        "# `jobgen lock` overhead per run",
        "",
        f"`bench/bench_holder.py --runs {args.runs}`, {time.strftime('%Y-%m-%d')}; "
        + ", ".join(versions()) + ".",
        "Each row runs `/bin/true` through the lock, servers on loopback; per run the wall",
        "time (fork+exec of the whole chain, lock taken and released) and the CPU time",
        "(user + system, the holder and what it waited for). The holder is started as a unit",
        "starts it, by the `jobgen` console script of the repository's virtualenv, from",
        "bytecode as installed. *Beyond the client*: the row minus the `python3 -c 'import",
        "CLIENT'` row of its backend (the interpreter and the client library's import), that",
        "is jobgen's own imports plus the lock's work (connect, acquire, the keeper's fork,",
        "starting and reaping the command, release).",
        "",
        f"Load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; on a",
        "loaded machine wall times are mostly waiting for a CPU: the CPU minimum is the",
        "steadiest figure.",
        "",
        "| how | wall median ms | wall p90 ms | CPU min ms | CPU median ms | beyond the client: CPU min ms (wall median) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    alone = None
    for label, med, p, cpu_min, cpu in rows:
        beyond = ""
        if "(the client library alone)" in label:
            alone = (med, cpu_min)
        elif alone is not None:
            beyond = f"{(cpu_min - alone[1]) * 1000:.1f} ({(med - alone[0]) * 1000:.1f})"
        lines.append(f"| {label} | {med * 1000:.1f} | {p * 1000:.1f} | {cpu_min * 1000:.1f} | "
                     f"{cpu * 1000:.1f} | {beyond} |")
    if own:
        lines += ["", "jobgen's own imports and option parsing, after the client library's,",
                  "timed inside the process (CPU ms; the rest of *beyond the client* is the",
                  "lock's work):", "", "| client imported first | CPU min ms | CPU median ms |",
                  "|---|---:|---:|"]
        lines += [f"| {c} | {lo * 1000:.1f} | {med * 1000:.1f} |" for c, lo, med in own]
    if skipped:
        lines += ["", "Skipped: " + "; ".join(skipped)]
    lines += [
        "",
        "Most of the holder's cost is starting Python and importing the backend's client",
        "library. redis-py cannot be imported in part: `redis/__init__.py` imports",
        "`redis.asyncio` (asyncio, ssl) before any submodule, so `import redis.client` costs",
        "what `import redis` does. Against a timer's accuracy (AccuracySec= defaults to 1min,",
        "systemd.timer(5)) this is noise, but it is paid on every run, on every node.",
        "",
    ]
    if overlaps:
        what = {"session-killed": {"redis": "key deleted", "mariadb": "KILL of the session",
                                   "postgres": "pg_terminate_backend"},
                "restart": {"redis": "restart without persistence", "mariadb": "server restart",
                            "postgres": "server restart"}}
        lines += [
            "## Lock lost on the server: how long the first command overlaps the second",
            "",
            f"{args.overlap} trials per case: the first holder runs a command that writes a",
            "timestamp every 20 ms (exits on SIGTERM); the lock is lost on the server; a second",
            "holder (already waiting when the server stays up, started right after a restart)",
            "takes it. Overlap = the first command's last timestamp minus the second command's",
            "start (0 if it had stopped before). `--connect-timeout 2`, default `--ttl`.",
            "",
            "| backend | loss | worst s | median s |",
            "|---|---|---:|---:|",
        ]
        for kind, how, got in overlaps:
            lines.append(f"| {kind} | {what[how][kind]} | {max(got):.3f} | "
                         f"{statistics.median(got):.3f} |")
        lines.append("")
    out = Path(args.out)
    if not overlaps and out.exists():  # --overlap 0: keep the last measured overlap section
        kept = out.read_text().partition("\n## Lock lost on the server")
        if kept[1]:
            lines.append(kept[1].lstrip("\n") + kept[2].rstrip("\n"))
            lines.append("")
    out.write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
