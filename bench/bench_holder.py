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
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # lockservers imports support.cli
sys.path.insert(0, str(REPO / "tests" / "cluster"))
sys.path.insert(0, str(REPO / "bench"))

import harness as h  # noqa: E402
from lockservers import SERVERS, holder_argv, holder_env  # noqa: E402

COMMAND = ["/bin/true"]
CLIENTS = {"redis": "redis", "mariadb": "pymysql", "postgres": "psycopg"}


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


def versions() -> list[str]:
    out = [f"Python {platform.python_version()}", f"{os.cpu_count()} CPUs",
           platform.platform()]
    for mod in ("redis", "pymysql", "psycopg"):
        try:
            client = __import__(mod)
            # PyMySQL's __version__ is the mysqlclient release it stands in for (Django checks
            # it); its own release is VERSION_STRING.
            out.append(f"{mod} {getattr(client, 'VERSION_STRING', None) or client.__version__}")
        except ImportError:
            out.append(f"{mod} missing")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="8 rounds, 2 lock-loss trials")
    ap.add_argument("--out", default=str(REPO / "bench" / "results-holder.md"))
    ap.add_argument("--overlap", type=int, default=5, metavar="T",
                    help="lock-loss trials per case (0: skip)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.overlap = 8, min(args.overlap, 2)
    # jobgen as users run it (the installed wheel, bytecode compiled), not the editable
    # checkout, whose bytecode a PYTHONDONTWRITEBYTECODE environment never keeps.
    venv = h.installed_jobgen()
    python = str(venv / "bin" / "python")
    holder = [python, "-m", "jobgen", "lock"]

    def lock_argv(*a: str) -> list[str]:
        return [*holder, *holder_argv(*a)[len(holder_argv()):]]

    env = holder_env()
    work = Path(tempfile.mkdtemp(prefix="jobgen-bench-"))
    os.chmod(work, 0o755)
    cases: list[tuple[str, list[str]]] = [
        ("bare command", COMMAND),
        ("flock(1) host lock", ["flock", "--nonblock", "--conflict-exit-code", "75",
                                str(work / "bench.lock"), *COMMAND]),
        ("`python -c pass` (interpreter start)", [python, "-c", "pass"]),
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
        cases.append((f"`python -c 'import {client}'` (interpreter + client import)",
                      [python, "-c", f"import {client}"]))
        cases.append((f"`python -c 'import jobgen.runtime.lock, {client}'` (imports only)",
                      [python, "-c", f"import jobgen.runtime.lock, {client}"]))
        cases.append((f"jobgen lock, {kind}",
                      lock_argv("--backend", server.url(), "--name", "bench", "--", *COMMAND)))

    stats = {label: h.Stat(label) for label, _ in cases}
    overlaps: list[tuple[str, str, list[float]]] = []
    facts = h.machine_facts(python)
    try:
        # Every case once before the rounds (page cache, the servers' first connection).
        for label, argv in cases:
            h.measure(argv, env=env)
        h.in_turn(args.runs, [(stats[label], argv, {"env": env}) for label, argv in cases])
        for stat in stats.values():
            print(stat.row(), flush=True)
        for server in servers:
            for how in ("session-killed", "restart") if args.overlap else ():
                got = [overlap_once(server, how, work, n) for n in range(args.overlap)]
                overlaps.append((server.kind, how, got))
                print(f"overlap {server.kind} {how}: worst {max(got):.3f}s", flush=True)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)

    bare = stats[cases[0][0]]
    lines = [
        "# `jobgen lock` overhead per run",
        "",
        f"Produced by `bench/run` (`bench/bench_holder.py --runs {args.runs}`), {time.strftime('%Y-%m-%d')}.",
        facts,
        "Clients: " + ", ".join(versions()) + ".",
        "",
        h.METHOD,
        "Each row runs `/bin/true` (through the lock, where there is one); servers on loopback, started by the",
        "benchmark (tests/cluster/lockservers.py); the holder is `python -m jobgen lock ...` of jobgen installed",
        f"from this checkout's wheel. {args.runs} rounds, every case once per round.",
        "",
    ]
    ratios = ["| lock overhead (CPU medians) | measured | target |", "|---|---|---|"]
    for server in servers:
        client = CLIENTS[server.kind]
        lock = stats[f"jobgen lock, {server.kind}"]
        floor = stats[f"`python -c 'import {client}'` (interpreter + client import)"]
        imports = stats[f"`python -c 'import jobgen.runtime.lock, {client}'` (imports only)"]
        ratios.append(f"| {server.kind}: `jobgen lock` − (interpreter + `import {client}`) | "
                      f"{(lock.cpu - floor.cpu) * 1000:+.0f} ms CPU ({(lock.wall - floor.wall) * 1000:+.0f} ms wall) | ≤ 20 ms |")
        ratios.append(f"| {server.kind}: `jobgen lock` − (`import jobgen.runtime.lock, {client}`) | "
                      f"{(lock.cpu - imports.cpu) * 1000:+.0f} ms CPU ({(lock.wall - imports.wall) * 1000:+.0f} ms wall) | |")
    lines += [*ratios, "", f"| how | {h.ROW_HEADER} CPU over bare |", "|---|---|---|---|---|"]
    for stat in stats.values():
        lines.append(f"{stat.row()} {(stat.cpu - bare.cpu) * 1000:+.1f} ms |")
    if skipped:
        lines += ["", "Skipped: " + "; ".join(skipped)]
    lines += [
        "",
        "Most of the holder's cost is starting Python and importing the backend's client",
        "library: compare each `jobgen lock` row with the import rows above it. The",
        "lock itself (connect, authenticate, acquire, start the command, release) is the",
        "difference. Against a timer's accuracy (AccuracySec= defaults to 1min,",
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
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
