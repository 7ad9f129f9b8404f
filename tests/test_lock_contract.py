"""One lock contract (src/jobgen/contract/locks.py): whatever `jobgen check` accepts as a
cluster lock name or backend URL, `jobgen lock` accepts too, and whatever one refuses the
other refuses, with the same words. Each case runs through both real commands.

Compile time: one manifest, one job per case; the case is refused if `jobgen check`
prints an error for its job. Run time: `jobgen lock --name NAME --backend URL -- true`;
a refused name exits 64 (usage), a refused URL 78 (configuration), before any server is
contacted. An accepted URL points at 127.0.0.1 port 1, where nothing listens: the holder
gets past every check and fails to connect (69).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from jobgen.contract import locks
from support.cli import Ran, jobgen

SECRET = "hunter2"

# (lock name, accepted?)
NAMES = [
    ("shop:nightly-billing", True),
    ("_billing", True),  # passed `check`, then `jobgen lock` exited 64 (two rules, issue 9)
    ("billing/monthly", True),
    ("team@host.example", True),
    ("a+b=c", True),  # `jobgen lock` took these, `check` did not
    ("0day", True),
    ("x" * 255, True),
    ("x" * 256, False),
    ("shop billing", False),
    ("-billing", False),
    (".hidden", False),
    ("/abs", False),
    ("bill#1", False),
    ("a%b", False),
    ("a$b", False),
    ("caf\u00e9", False),
]

# (backend URL, accepted?)  ${PW} ${PORT} ${HOST} are set in the holder's environment.
URLS = [
    ("redis://127.0.0.1:1/0", True),
    ("redis://:${PW}@127.0.0.1:1/0", True),
    ("redis://127.0.0.1:${PORT}/0", True),
    ("redis://${HOST}:1/0", True),  # the host variable is expanded as written, not lowercased
    ("redis://127.0.0.1:1", True),
    ("rediss://127.0.0.1:1/0?ssl_cert_reqs=none", True),
    ("mariadb://jobgen:${PW}@127.0.0.1:1/shop?charset=utf8mb4", True),
    ("mysql://jobgen@127.0.0.1:1", True),
    ("postgresql://jobgen:${PW}@127.0.0.1:1/shop?sslmode=disable", True),
    ("postgres://jobgen@127.0.0.1:1/shop?password=${PW}", True),  # a secret, by variable
    ("postgresql://jobgen@127.0.0.1:1/shop?passfile=/etc/jobgen/pgpass", True),  # a path
    ("foo://127.0.0.1/", False),
    ("redis://", False),
    ("redis://127.0.0.1:port/0", False),
    ("redis://127.0.0.1:70000/0", False),
    ("redis://127.0.0.1/zero", False),
    ("redis://:" + SECRET + "@127.0.0.1/0", False),
    ("redis://user:" + SECRET + "@127.0.0.1/0", False),
    ("postgresql://u@127.0.0.1/db?password=" + SECRET, False),
    ("postgresql://u@127.0.0.1/db?sslmode=require&sslpassword=" + SECRET, False),
    ("postgresql://u@127.0.0.1/db?PassWord=" + SECRET, False),
    ("mariadb://u@127.0.0.1/db?ssl_key_password=" + SECRET, False),
    ("redis://127.0.0.1/0?token=" + SECRET, False),
    ("mariadb://u@127.0.0.1/db?password=${PW}", False),  # not a PyMySQL parameter
    ("mariadb://127.0.0.1/db?bogus=1", False),
    ("postgresql://127.0.0.1/db?dbname=other", False),  # the URL's path names the database
    ("redis://[::1/0", False),
]

HOLDER_ENV = {"PW": "pw", "PORT": "1", "HOST": "127.0.0.1"}


def _check_errors(tmp_path: Path, cases: list[tuple[str, str]]) -> dict[str, list[str]]:
    """`jobgen check` on one manifest with a job per (name, url); errors by job index."""
    jobs = {
        f"j{i:02d}": {
            "command": ["/bin/true"],
            "schedule": "daily",
            "timeout": "1h",
            "lock": {"scope": "cluster", "name": name, "backend": url},
        }
        for i, (name, url) in enumerate(cases)
    }
    manifest = tmp_path / "contract.yaml"
    # JSON is YAML: every string stays exactly what it is.
    manifest.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"}, "jobs": jobs}))
    res = jobgen("check", str(manifest))
    assert "Traceback" not in res.stderr, res.stderr
    errors: dict[str, list[str]] = {job: [] for job in jobs}
    for line in res.stderr.splitlines():
        m = re.search(r": error: job '(j\d\d)': (.*)", line)
        if m:
            errors[m.group(1)].append(m.group(2))
    assert res.returncode == (2 if any(errors.values()) else 0), res.stderr
    return errors


def _lock(name: str, url: str) -> Ran:
    env = {**os.environ, **HOLDER_ENV}
    # --name=VALUE: a refused name starting with '-' must reach the name rule, not look
    # like an option
    return jobgen("lock", f"--backend={url}", f"--name={name}", "--connect-timeout", "5", "--", "/bin/true", env=env)


def test_names_check_and_lock_agree(tmp_path):
    unset = "redis://127.0.0.1:${JOBGEN_CONTRACT_UNSET}/0"  # a name that passes fails here: 78
    errors = _check_errors(tmp_path, [(name, "redis://127.0.0.1:1/0") for name, _ in NAMES])
    for i, (name, accepted) in enumerate(NAMES):
        compile_errors = errors[f"j{i:02d}"]
        res = _lock(name, unset)
        problem = locks.name_problem("cluster", name)
        if accepted:
            assert compile_errors == [], (name, compile_errors)
            assert res.returncode == 78, (name, res.stderr)
            assert problem is None
        else:
            # the same words on both sides
            assert compile_errors == [f"'lock.name': {problem}"], (name, compile_errors)
            assert res.returncode == 64, (name, res.stderr)
            assert f"argument --name: {problem}" in res.stderr


@pytest.mark.cluster  # the holder imports each backend's client library before connecting
def test_urls_check_and_lock_agree(tmp_path):
    errors = _check_errors(tmp_path, [("shop:contract", url) for url, _ in URLS])
    for i, (url, accepted) in enumerate(URLS):
        compile_errors = errors[f"j{i:02d}"]
        res = _lock("shop:contract", url)
        assert SECRET not in res.stderr and SECRET not in "".join(compile_errors)
        if accepted:
            assert compile_errors == [], (url, compile_errors)
            assert res.returncode == 69, (url, res.stderr)  # unreachable: every check passed
        else:
            problem = locks.url_problem(url)
            assert problem is not None
            assert compile_errors == [f"'lock.backend': {problem}"], (url, compile_errors)
            assert res.returncode == 78, (url, res.stderr)
            assert f"config-error name=shop:contract lock backend URL: {problem} exit=78" \
                in res.stderr, (url, res.stderr)


def test_conflict_exit_is_one_number_everywhere():
    """flock's --conflict-exit-code, SuccessExitStatus= and the holder's conflict exit."""
    from jobgen.compiler import plan
    from jobgen.runtime import lock

    assert plan.CONFLICT_EXIT == locks.CONFLICT_EXIT == lock.EXIT["conflict"][0] == 75


# --------------------------------------------------------------------------- server names
# What a cluster lock is called on its server: contract.locks.SERVER_NAMES, used by the
# backends to take the lock and by `jobgen plan` to show it. The values are pinned: a
# change would let an old and a new holder run the same job at once during an upgrade.

def test_every_scheme_has_its_servers_name():
    assert set(locks.SERVER_NAMES) == set(locks.SCHEMES)


@pytest.mark.parametrize("scheme, name, shown", [
    ("redis", "shop/billing", "redis key jobgen:shop/billing"),
    ("rediss", "shop/billing", "redis key jobgen:shop/billing"),
    ("mariadb", "shop:billing", "GET_LOCK('jobgen:shop:billing')"),
    ("mysql", "shop:billing", "GET_LOCK('jobgen:shop:billing')"),
    # past GET_LOCK's 64 characters: "jobgen#" + 57 hex digits of sha256(name)
    ("mariadb", "x" * 70, "GET_LOCK('jobgen#c71bd109227e23434ecf71fd0a344a209136c79ae5a0bda2b5ca442d6')"),
    ("postgresql", "shop:billing", "pg_advisory_lock(6774465880328942919)"),
    ("postgres", "shop:billing", "pg_advisory_lock(6774465880328942919)"),
])
def test_server_name_of_a_lock(scheme, name, shown):
    assert locks.SERVER_NAMES[scheme].show(name) == shown


def test_get_lock_names_fit_mysqls_limit_and_never_meet_a_plain_one():
    for n in range(1, 256):
        got = locks.get_lock_name("a" * n)
        assert len(got) <= 64
        assert got.startswith("jobgen:" if n + len("jobgen:") <= 64 else "jobgen#")
