"""Redis lease: SET NX PX with an owner token, renewal while the command runs,
compare-and-delete release. Client: redis-py (extra `jobgen[redis]`), imported here only.

Keys (contract.locks.redis_keys): `jobgen:<name>` holds the owner token (128 random bits,
hex) with a PX expiry; `jobgen:#fence:<name>` is INCRemented on every acquisition and its
value handed to the command as JOBGEN_LOCK_TOKEN, so a downstream store can refuse writes
from an older holder. '#' is in no lock name, so no name's lease is another's counter.
"""

from __future__ import annotations

import random
import secrets
import time

from jobgen.contract import locks
from jobgen.runtime.tree import boottime
from jobgen.runtime.backends import (AuthFailed, ConfigError, Options, ServerError, Target, Unreachable,
                             Watcher, describe)

# Acquire and fence in one atomic step: a fencing token exists iff the SET succeeded.
# Everything that can fail is checked before the SET (a script error does not undo the
# writes before it, so a late failure would leave a lease nobody holds); a lease key that
# is a list or hash (another tool's, or a jobgen queue's) is an error, not a conflict
# that would skip every run in silence. A counter left
# by releases before the `#` layout (KEYS[3], a decimal string: a lease token there has
# 32 hex digits) seeds the new one, so tokens keep increasing across the upgrade.
ACQUIRE = """
local t = redis.call('type', KEYS[1]).ok
if t ~= 'none' and t ~= 'string' then
  return redis.error_reply('the lease key ' .. KEYS[1] .. ' holds a ' .. t .. ', not a lease')
end
local f = redis.call('get', KEYS[2])
if f and not (string.match(f, '^%d+$') and #f < 19) then
  return redis.error_reply('the fencing counter ' .. KEYS[2] .. ' holds no counter')
end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
if redis.call('type', KEYS[3]).ok == 'string' then
  local old = redis.call('get', KEYS[3])
  if string.match(old, '^%d+$') and #old < 19 and tonumber(old) > tonumber(f or '0') then
    redis.call('set', KEYS[2], old)
  end
end
return redis.call('incr', KEYS[2])
"""
# Extend only our own lease: after expiry another holder's token is there and must stay.
RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
# Delete only our own lease (the classic trap: a late DEL removes the next holder's lock).
RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""

# Renewal doubles as loss detection: a key deleted, expired or lost in a restart without
# persistence is noticed at the next renewal. Every ttl/3, but at least once a second, so
# a lost lease stops the command within about a second whatever --ttl is (one small EVAL
# per second per running job). docs/cluster-locks.md has the measured bounds.
RENEW_MAX_INTERVAL = 1.0


def renew_interval(ttl: float) -> float:
    return min(ttl / 3, RENEW_MAX_INTERVAL)


# The holder's keeper (tree.Lifeline) SIGKILLs the command this long before the lease of
# the last successful renewal runs out, when no later one succeeded (a stopped or hung
# holder): time for the keeper to wake and the kill to land. The lease is counted from
# the moment the renewal was sent, on CLOCK_BOOTTIME (the server set it later, if at all).
def kill_margin(ttl: float) -> float:
    return min(ttl / 4, 0.5)


# Polling while --wait runs: start fast, back off, add jitter so 50 waiters do not march.
POLL_FIRST, POLL_MAX = 0.05, 0.5


def _client(target: Target, opts: Options):
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # The query holds only redis-py's TLS options (contract.locks.SCHEMES checked it).
    db = target.path or "0"
    if not db.isdigit():
        raise ConfigError(f"redis database {db!r} is not a number")
    return redis.Redis(
        host=target.host,
        port=target.port or 6379,
        db=int(db),
        username=target.username or None,
        password=target.password or None,
        ssl=target.scheme == "rediss",
        socket_connect_timeout=opts.connect_timeout,
        socket_timeout=opts.connect_timeout,
        # No silent retries: each call is bounded by the timeouts above, once.
        retry=Retry(NoBackoff(), 0),
        **target.query,
    )


def _call(fn):
    """Run one Redis call, turning client exceptions into the holder's outcomes."""
    import redis.exceptions as rx

    try:
        return fn()
    except rx.AuthenticationError as e:  # a subclass of ConnectionError: test it first
        raise AuthFailed(f"redis refused the credentials ({describe(e)})") from None
    except rx.ResponseError as e:
        if str(e).startswith(("NOAUTH", "WRONGPASS", "NOPERM")):
            raise AuthFailed(f"redis refused the credentials ({describe(e)})") from None
        raise ServerError(describe(e)) from None  # e.g. READONLY: we reached a replica
    except (rx.ConnectionError, rx.TimeoutError, OSError) as e:
        raise Unreachable(describe(e)) from None
    except rx.RedisError as e:
        raise ServerError(describe(e)) from None


def acquire(target: Target, name: str, opts: Options) -> "Held | None":
    client = _client(target, opts)
    keys = locks.redis_keys(name)
    owner = secrets.token_hex(16)
    ttl_ms = max(1, int(opts.ttl * 1000))
    deadline = time.monotonic() + opts.wait
    pause = POLL_FIRST
    while True:
        sent = boottime()
        try:
            fence = _call(lambda: client.eval(ACQUIRE, 3, keys.lease, keys.fence,
                                              keys.legacy_fence, owner, ttl_ms))
        except BaseException:
            client.close()
            raise
        if fence:
            return Held(client, keys.lease, owner, int(fence), ttl_ms, opts, sent)
        now = time.monotonic()
        if now >= deadline:
            client.close()
            return None
        time.sleep(min(pause * random.uniform(0.5, 1.0), deadline - now))
        pause = min(pause * 2, POLL_MAX)


class Held:
    def __init__(self, client, key: str, owner: str, fence: int, ttl_ms: int,
                 opts: Options, sent: float) -> None:
        self._client = client
        # boottime() by which the command must be gone unless a renewal succeeds;
        # on_deadline(deadline) is told each new one (the holder passes it to its keeper).
        self.deadline: float | None = self._deadline(sent, ttl_ms)
        self.on_deadline = None
        self._key = key
        self._owner = owner
        self._ttl_ms = ttl_ms
        self._opts = opts
        self.token: str | None = str(fence)
        self._watcher: Watcher | None = None

    @staticmethod
    def _deadline(sent: float, ttl_ms: int) -> float:
        ttl = ttl_ms / 1000
        return sent + ttl - kill_margin(ttl)

    def _renew(self) -> tuple[str, str] | None:
        sent = boottime()
        ok = _call(lambda: self._client.eval(RENEW, 1, self._key, self._owner, self._ttl_ms))
        if not ok:
            return ("lease-lost", f"key {self._key} no longer holds our token")
        self.deadline = self._deadline(sent, self._ttl_ms)
        if self.on_deadline is not None:
            self.on_deadline(self.deadline)
        return None

    def watch(self, lost) -> None:
        """Renew every renew_interval(ttl). One failed renewal (error or timeout) is a lost
        lease: the command is stopped while the last renewal still covers it."""

        self._watcher = Watcher(self._renew, renew_interval(self._ttl_ms / 1000),
                                self._opts.connect_timeout,
                                "jobgen-lease", failure_event="lease-lost")
        self._watcher.start(lost)

    def release(self) -> bool:
        if self._watcher is not None:
            self._watcher.stop()
        # redis-py's pool gives a stuck renewal its own connection: release never waits on it.
        return bool(_call(lambda: self._client.eval(RELEASE, 1, self._key, self._owner)))

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # closing a broken connection has nothing left to report
            pass
