"""A lock server's password never reaches a line the holder or the queue commands print.

On the real redis-server of the suite (it requires PASSWORD): the URL that put the
password in the user name (`redis://${VAR}@host`, which printed it on the failed login) is
refused before connecting, and a refused login prints the URL with its secrets redacted.
`jobgen check` refuses the same URL with a positioned line:
tests/errors/backend-variable-in-user-name.yaml.
"""

from __future__ import annotations

import subprocess

import pytest

from lockservers import PASSWORD, PASSWORD_VAR, RedisServer, holder_argv, holder_env
from support.cli import jobgen

pytestmark = pytest.mark.cluster

WRONG = "not-the-pass/w0rd"


def _lock(url: str, name: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*holder_argv("--backend", url, "--name", name, "--job", "sync", "--"), "/bin/true"],
                          capture_output=True, text=True, timeout=60, env=holder_env(**env))


def test_a_variable_in_the_user_name_is_refused_before_connecting(redis_server: RedisServer, lock_name):
    url = f"redis://${{{PASSWORD_VAR}}}@127.0.0.1:{redis_server.port}/0"
    r = _lock(url, lock_name)
    assert r.returncode == 78
    assert PASSWORD not in r.stdout + r.stderr
    assert (f"config-error name={lock_name} lock backend URL: '${{{PASSWORD_VAR}}}' is in the user name, "
            "which is shown in logs; a password goes after ':'") in r.stderr


@pytest.mark.parametrize("user", ["", "default"])
def test_a_refused_login_prints_no_secret(redis_server: RedisServer, lock_name, user):
    url = redis_server.url().replace(":${", f"{user}:${{")
    r = _lock(url, lock_name, **{PASSWORD_VAR: WRONG})
    assert r.returncode == 77, r.stderr
    shown = f"redis://{user}@127.0.0.1:{redis_server.port}/0" if user else f"redis://127.0.0.1:{redis_server.port}/0"
    assert f"auth-failed name={lock_name} backend={shown} redis refused the credentials" in r.stderr
    assert WRONG not in r.stdout + r.stderr and PASSWORD not in r.stdout + r.stderr


def test_the_queue_commands_refuse_a_variable_in_the_user_name(redis_server: RedisServer, lock_name):
    url = f"redis://${{{PASSWORD_VAR}}}@127.0.0.1:{redis_server.port}/0"
    r = jobgen("enqueue", "--backend", url, "--name", lock_name, "--job", "sync", env=holder_env())
    assert r.returncode == 78
    assert r.stderr.startswith(f"jobgen enqueue: config-error: lock backend URL: '${{{PASSWORD_VAR}}}' is in the user name")
    assert PASSWORD not in r.stdout + r.stderr
    assert redis_server.client().keys("*" + lock_name + "*") == []  # nothing recorded


@pytest.mark.parametrize("verb", ["enqueue", "queue"])
def test_the_queue_commands_answer_a_refused_login_with_the_holders_outcome(redis_server: RedisServer, lock_name, verb):
    url = redis_server.url().replace(":${", "default:${")
    r = jobgen(verb, "--backend", url, "--name", lock_name, "--job", "sync", env=holder_env(**{PASSWORD_VAR: WRONG}))
    assert (r.returncode, r.stdout) == (77, "")
    assert r.stderr.startswith(f"jobgen {verb}: auth-failed: redis refused the credentials"), r.stderr
    assert "Traceback" not in r.stderr and WRONG not in r.stderr and PASSWORD not in r.stderr


def test_a_client_message_that_quotes_a_secret_is_redacted():
    """Defense in depth: whatever a client library writes into its exception, the
    secrets the URL expanded are replaced before the text is printed."""
    from jobgen.runtime import backends

    target = backends.parse_url(f"redis://:${{{PASSWORD_VAR}}}@127.0.0.1:1/0?ssl_cert_reqs=none", {PASSWORD_VAR: WRONG})
    assert target.password == WRONG
    assert str(backends.AuthFailed(f"server said: bad password {WRONG!r}")) == "server said: bad password '***'"
    assert backends.describe(RuntimeError(f"AUTH {WRONG} failed")) == "RuntimeError: AUTH *** failed"
    assert WRONG not in target.display() and WRONG not in repr(target)
