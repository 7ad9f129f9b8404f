"""Redis key layout of `jobgen lock` on a real redis-server: no lock name is another lock's
bookkeeping, a failed acquisition writes nothing, and the fencing counter of releases before
this layout carries on (contract.locks.redis_keys)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lockservers import holder_argv, holder_env

from jobgen.contract import locks

pytestmark = pytest.mark.cluster

TIMEOUT = 60


def run(server, name: str, command: list[str]) -> subprocess.CompletedProcess:
    argv = holder_argv("--backend", server.url(), "--name", name, "--connect-timeout", "2",
                       "--", *command)
    return subprocess.run(argv, env=holder_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)


def token_to(out: Path) -> list[str]:
    return ["sh", "-c", f'echo "$JOBGEN_LOCK_TOKEN" >> "{out}"']


def tokens(out: Path) -> list[int]:
    return [int(t) for t in out.read_text().split()]


@pytest.mark.parametrize("first, second", [("a", "a:fence"), ("a:fence", "a")])
def test_a_lock_after_another_lock_with_a_fence_like_name_runs(redis_server, lock_name, tmp_path,
                                                              first, second):
    """Lock `x` then lock `x:fence` (and the other way round): both run (exit 0)."""
    out = tmp_path / "tokens"
    first, second = f"{lock_name}/{first}", f"{lock_name}/{second}"
    assert run(redis_server, first, token_to(out)).returncode == 0
    result = run(redis_server, second, token_to(out))
    assert result.returncode == 0, result.stderr
    assert tokens(out) == [1, 1]  # each lock counts its own acquisitions


@pytest.mark.parametrize("held, other", [("b:fence", "b"), ("b", "b:fence")])
def test_a_held_lock_does_not_block_a_lock_named_like_its_counter(redis_server, lock_name,
                                                                tmp_path, held, other):
    """While `b:fence` is held, `b` runs (and the other way round)."""
    held, other = f"{lock_name}/{held}", f"{lock_name}/{other}"
    release, ran = tmp_path / "release", tmp_path / "ran"
    holding = subprocess.Popen(
        holder_argv("--backend", redis_server.url(), "--name", held, "--", "sh", "-c",
                    f'touch "{tmp_path / "holding"}"; while [ ! -e "{release}" ]; do sleep 0.02; done'),
        env=holder_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline_wait(lambda: (tmp_path / "holding").exists())
        result = run(redis_server, other, ["touch", str(ran)])
        assert result.returncode == 0, result.stderr
        assert ran.exists()
    finally:
        release.touch()
        assert holding.wait(timeout=TIMEOUT) == 0, holding.stderr.read()


def test_a_counter_that_is_no_counter_fails_and_leaves_no_lease(redis_server, lock_name, tmp_path):
    """Someone else wrote the fencing key: one clear line, 69, the command never runs and
    no lease is left behind for the next holder to wait out."""
    keys = locks.redis_keys(lock_name)
    r = redis_server.client()
    r.set(keys.fence, "not-a-number")
    ran = tmp_path / "ran"
    result = run(redis_server, lock_name, ["touch", str(ran)])
    assert result.returncode == 69, result.stderr
    assert f"server-error name={lock_name}" in result.stderr
    assert "holds no counter" in result.stderr
    assert not ran.exists()
    assert r.exists(keys.lease) == 0
    r.delete(keys.fence)
    assert run(redis_server, lock_name, ["touch", str(ran)]).returncode == 0


def test_the_counter_of_an_older_release_carries_on(redis_server, lock_name, tmp_path):
    """An older release counted at `jobgen:NAME:fence`: the first token after the upgrade
    is above it, so a store fencing on it keeps accepting the new holders."""
    keys = locks.redis_keys(lock_name)
    r = redis_server.client()
    r.set(keys.legacy_fence, "41")
    out = tmp_path / "tokens"
    assert run(redis_server, lock_name, token_to(out)).returncode == 0
    assert run(redis_server, lock_name, token_to(out)).returncode == 0
    assert tokens(out) == [42, 43]
    assert r.get(keys.legacy_fence) == "41"  # read, never written


def test_an_older_releases_lease_is_a_conflict(redis_server, lock_name, tmp_path):
    """An older release's holder has the lease (`SET jobgen:NAME token NX PX`, the same key):
    the new holder does not run beside it."""
    r = redis_server.client()
    r.set(locks.redis_keys(lock_name).lease, "0123456789abcdef0123456789abcdef", px=60000)
    ran = tmp_path / "ran"
    result = run(redis_server, lock_name, ["touch", str(ran)])
    assert result.returncode == 75, result.stderr
    assert not ran.exists()


def deadline_wait(predicate, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_lease_key_that_is_no_lease_is_an_error_not_a_conflict(redis_server, lock_name, tmp_path):
    """The lease key holds a list (another tool's key, a queue's list): not a lock anybody
    holds, so not a conflict (75, counted as a skip) but one clear line and 69."""
    r = redis_server.client()
    r.rpush(locks.redis_keys(lock_name).lease, "x")
    ran = tmp_path / "ran"
    result = run(redis_server, lock_name, ["touch", str(ran)])
    assert result.returncode == 69, result.stderr
    assert "holds a list, not a lease" in result.stderr
    assert not ran.exists()
