"""The cluster-scope queue: the same promises as spool.py, kept in the job's lock server.

A request enqueued on any host lands in one queue on the server the job's cluster lock
already uses, and the drainer runs under that lock (`jobgen lock ... -- jobgen drain`), so
the fleet drains it one request at a time, in order. The stores below only keep requests;
exclusion is the lock's job. What a dead drainer left running goes back to the head of the
queue when the next drainer takes the lock (``recover``): that is within the lock's TTL
for Redis (the lease must expire) and at once for the SQL backends (the session lock dies
with the connection). README "overlap: queue" states these bounds.

  Redis       jobgen:#queue:<name>:{seq,pending,running,failed} and one hash per request
              (contract.queue.redis_queue_keys); enqueue (count, number, append) is one
              Lua script, atomic on the server.
  PostgreSQL  table jobgen_queue; enqueuers serialise on their queue's row in
  MariaDB     jobgen_queue_head (SELECT ... FOR UPDATE) so max_pending holds across hosts;
              take uses SELECT ... FOR UPDATE SKIP LOCKED (PostgreSQL 9.5, MariaDB 10.6).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass

from jobgen.contract import outcomes
from jobgen.contract.queue import COALESCE, REJECT, redis_queue_keys
from jobgen.runtime.backends import Options, Target
from jobgen.runtime.queue.spool import FAILED, PENDING, RUNNING, STATES, Enqueued, NoSuchRequest, QueueFull, Request


@dataclass
class Limits:
    max_pending: int = 100
    on_full: str = REJECT
    max_attempts: int = 3


def _new_id(seq: int) -> str:
    return f"{seq:020d}-{secrets.token_hex(4)}"


# --------------------------------------------------------------------------- Redis

# ARGV[7], ARGV[8]: the outcome words coalesced and enqueued (contract/outcomes.py), passed
# in so the script never spells them; the on_full word it compares with is written into the
# text from contract/queue.py (a Lua string: the contract's words need no escaping).
_ENQUEUE = """
local pending = redis.call('llen', KEYS[1])
if pending >= tonumber(ARGV[1]) then
  if ARGV[2] == '@COALESCE@' then
    local ids = redis.call('lrange', KEYS[1], 0, -1)
    for i = #ids, 1, -1 do
      if redis.call('hget', KEYS[4] .. ids[i], 'args') == ARGV[3] then return {ARGV[7], ids[i], pending} end
    end
  end
  return {'full', '', pending}
end
if redis.call('exists', KEYS[2]) == 0 then  -- a counter left under the old keys seeds it
  local old = redis.call('type', KEYS[3]).ok == 'string' and redis.call('get', KEYS[3])
  if old and string.match(old, '^%d+$') and #old < 19 then redis.call('set', KEYS[2], old) end
end
local seq = redis.call('incr', KEYS[2])
local id = string.format('%020d', seq) .. '-' .. ARGV[4]
redis.call('hset', KEYS[4] .. id, 'args', ARGV[3], 'enqueued_usec', ARGV[5], 'attempts', 0, 'by', ARGV[6])
redis.call('rpush', KEYS[1], id)
return {ARGV[8], id, pending + 1}
""".replace("@COALESCE@", COALESCE)


# Requests left under the keys of releases before `jobgen:#queue:` (contract.queue), moved
# by the first drain after the upgrade, under the job's lock: each old list goes before the
# new one (those requests were enqueued first), with its request hashes; the counter keeps
# the larger value. Only lists, hashes and a decimal counter are taken: a key of the old
# layout that holds anything else is a lock's lease (a lock named `queue:NAME:seq`), left
# alone. KEYS: new pending, running, failed, seq, req prefix, then the same old ones.
_MIGRATE = """
local moved = 0
for i = 1, 3 do
  local old, new = KEYS[5 + i], KEYS[i]
  if redis.call('type', old).ok == 'list' then
    local ids = redis.call('lrange', old, 0, -1)
    for j = #ids, 1, -1 do
      if redis.call('type', KEYS[10] .. ids[j]).ok == 'hash' then
        redis.call('rename', KEYS[10] .. ids[j], KEYS[5] .. ids[j])
      end
      redis.call('lpush', new, ids[j])
      moved = moved + 1
    end
    redis.call('del', old)
  end
end
if redis.call('type', KEYS[9]).ok == 'string' then
  local old = redis.call('get', KEYS[9])
  if string.match(old, '^%d+$') and #old < 19 then
    if tonumber(old) > tonumber(redis.call('get', KEYS[4]) or '0') then redis.call('set', KEYS[4], old) end
    redis.call('del', KEYS[9])
  end
end
return moved
"""


class RedisQueue:
    def __init__(self, client, name: str, limits: Limits):
        self.r, self.limits = client, limits
        self.keys = redis_queue_keys(name)
        self.legacy = redis_queue_keys(name, legacy=True)
        self._enqueue = self.r.register_script(_ENQUEUE)
        self._migrate = self.r.register_script(_MIGRATE)

    @property
    def max_attempts(self) -> int:
        return self.limits.max_attempts

    def enqueue(self, args: tuple[str, ...] = (), by: str = "") -> Enqueued:
        outcome, rid, pending = self._enqueue(
            keys=[self.keys[PENDING], self.keys["seq"], self.legacy["seq"], self.keys["req"]],
            args=[self.limits.max_pending, self.limits.on_full, json.dumps(list(args)), secrets.token_hex(4), time.time_ns() // 1000, by,
                  outcomes.COALESCED, outcomes.ENQUEUED],
        )
        outcome, rid = _text(outcome), _text(rid)
        if outcome == "full":
            raise QueueFull(f"{pending} requests pending (max_pending {self.limits.max_pending})")
        return Enqueued(self.find(rid), outcome, int(pending))

    def _request(self, rid: str, state: str) -> Request:
        h = {_text(k): _text(v) for k, v in self.r.hgetall(self.keys["req"] + rid).items()}
        last = h.get("last_status")
        return Request(rid, tuple(json.loads(h.get("args", "[]"))), int(h.get("enqueued_usec", 0)), int(h.get("attempts", 0)),
                       int(last) if last not in (None, "") else None, state, h.get("by", ""))

    def list(self, state: str) -> list[Request]:
        return [self._request(_text(i), state) for i in self.r.lrange(self.keys[state], 0, -1)]

    def find(self, rid: str) -> Request:
        for state in STATES:
            if self.r.lpos(self.keys[state], rid) is not None:
                return self._request(rid, state)
        raise NoSuchRequest(rid)

    # The drainer holds the job's lock for the rest: no other writer moves these lists.
    def recover(self) -> list[Request]:
        order = (PENDING, RUNNING, FAILED, "seq", "req")
        self._migrate(keys=[self.keys[k] for k in order] + [self.legacy[k] for k in order])
        out = []
        for req in reversed(self.list(RUNNING)):  # back to the head, oldest first
            dest = FAILED if req.attempts >= self.limits.max_attempts else PENDING
            pipe = self.r.pipeline(transaction=True)
            pipe.lrem(self.keys[RUNNING], 1, req.id)
            if dest == PENDING:
                pipe.lpush(self.keys[dest], req.id)
            else:
                pipe.rpush(self.keys[dest], req.id)
            pipe.execute()
            out.append(self._request(req.id, dest))
        return list(reversed(out))

    def take(self) -> Request | None:
        rid = self.r.lindex(self.keys[PENDING], 0)
        if rid is None:
            return None
        rid = _text(rid)
        pipe = self.r.pipeline(transaction=True)
        pipe.hincrby(self.keys["req"] + rid, "attempts", 1)  # counted before the run starts
        pipe.lmove(self.keys[PENDING], self.keys[RUNNING], "LEFT", "RIGHT")
        pipe.execute()
        return self._request(rid, RUNNING)

    def finish(self, req: Request, status: int) -> str:
        pipe = self.r.pipeline(transaction=True)
        pipe.lrem(self.keys[RUNNING], 1, req.id)
        if status == 0:
            pipe.delete(self.keys["req"] + req.id)
            outcome = outcomes.DONE
        else:
            pipe.hset(self.keys["req"] + req.id, "last_status", status)
            if req.attempts >= self.limits.max_attempts:
                pipe.rpush(self.keys[FAILED], req.id)
                outcome = outcomes.FAILED
            else:
                pipe.lpush(self.keys[PENDING], req.id)  # stays first in line
                outcome = outcomes.RETRY
        pipe.execute()
        return outcome

    def put_back(self, req: Request) -> Request:
        """An orderly stop interrupted the request: first in line again, with the attempt
        ``take`` counted given back (the stop was not the request's failure)."""
        pipe = self.r.pipeline(transaction=True)
        pipe.lrem(self.keys[RUNNING], 1, req.id)
        pipe.hset(self.keys["req"] + req.id, "attempts", max(0, req.attempts - 1))
        pipe.lpush(self.keys[PENDING], req.id)
        pipe.execute()
        return self._request(req.id, PENDING)

    def retry(self, rid: str) -> Request:
        if self.r.lrem(self.keys[FAILED], 1, rid) != 1:
            raise NoSuchRequest(f"{rid} is not failed")
        self.r.hset(self.keys["req"] + rid, "attempts", 0)
        self.r.lpush(self.keys[PENDING], rid)
        return self._request(rid, PENDING)

    def drop(self, rid: str) -> Request:
        for state in (PENDING, FAILED):
            req = self._request(rid, state)
            if self.r.lrem(self.keys[state], 1, rid) == 1:
                self.r.delete(self.keys["req"] + rid)
                return req
        raise NoSuchRequest(f"{rid} is not pending or failed")


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# --------------------------------------------------------------------------- SQL

# (PostgreSQL, MariaDB) spellings of the same schema; everything else is portable SQL.
_SCHEMA = {
    "postgres": (
        "CREATE TABLE IF NOT EXISTS jobgen_queue_head (queue VARCHAR(255) PRIMARY KEY)",
        "CREATE TABLE IF NOT EXISTS jobgen_queue (id BIGSERIAL PRIMARY KEY, queue VARCHAR(255) NOT NULL, "
        "rid VARCHAR(64) NOT NULL UNIQUE, args TEXT NOT NULL, enqueued_usec BIGINT NOT NULL, attempts INT NOT NULL DEFAULT 0, "
        "last_status INT, state VARCHAR(8) NOT NULL, by_whom VARCHAR(64) NOT NULL DEFAULT '')",
        "CREATE INDEX IF NOT EXISTS jobgen_queue_order ON jobgen_queue (queue, state, id)",
    ),
    "mysql": (
        "CREATE TABLE IF NOT EXISTS jobgen_queue_head (queue VARCHAR(255) PRIMARY KEY) ENGINE=InnoDB",
        "CREATE TABLE IF NOT EXISTS jobgen_queue (id BIGINT AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(255) NOT NULL, "
        "rid VARCHAR(64) NOT NULL UNIQUE, args TEXT NOT NULL, enqueued_usec BIGINT NOT NULL, attempts INT NOT NULL DEFAULT 0, "
        "last_status INT, state VARCHAR(8) NOT NULL, by_whom VARCHAR(64) NOT NULL DEFAULT '', "
        "INDEX jobgen_queue_order (queue, state, id)) ENGINE=InnoDB",
    ),
}
_ENSURE_HEAD = {
    "postgres": "INSERT INTO jobgen_queue_head (queue) VALUES (%s) ON CONFLICT DO NOTHING",
    "mysql": "INSERT IGNORE INTO jobgen_queue_head (queue) VALUES (%s)",
}
_COLUMNS = "rid, args, enqueued_usec, attempts, last_status, state, by_whom"


class SqlQueue:
    """``conn`` is a DB-API connection (psycopg or PyMySQL) in autocommit=False use."""

    def __init__(self, conn, dialect: str, name: str, limits: Limits):
        self.conn, self.dialect, self.name, self.limits = conn, dialect, name, limits
        with self.conn.cursor() as cur:
            for stmt in _SCHEMA[dialect]:
                cur.execute(stmt)
            cur.execute(_ENSURE_HEAD[dialect], (name,))
        self.conn.commit()

    @property
    def max_attempts(self) -> int:
        return self.limits.max_attempts

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    @staticmethod
    def _req(row) -> Request:
        rid, args, enq, attempts, last, state, by = row
        return Request(rid, tuple(json.loads(args)), int(enq), int(attempts), last, state, by)

    def enqueue(self, args: tuple[str, ...] = (), by: str = "") -> Enqueued:
        blob = json.dumps(list(args))
        try:
            # Enqueuers of one queue, on any host, take turns on its head row: the count and
            # the insert below are one decision.
            self._rows("SELECT queue FROM jobgen_queue_head WHERE queue = %s FOR UPDATE", (self.name,))
            pending = self._rows(f"SELECT {_COLUMNS} FROM jobgen_queue WHERE queue = %s AND state = %s ORDER BY id", (self.name, PENDING))
            if len(pending) >= self.limits.max_pending:
                same = [r for r in pending if r[1] == blob]
                if self.limits.on_full == COALESCE and same:
                    self.conn.commit()
                    return Enqueued(self._req(same[-1]), outcomes.COALESCED, len(pending))
                raise QueueFull(f"{len(pending)} requests pending (max_pending {self.limits.max_pending})")
            # The row's id is the arrival order; the request id shows it, plus random bits
            # (ids stay unique even where a server reuses a drained table's numbers).
            temp = "new-" + secrets.token_hex(16)
            with self.conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO jobgen_queue (queue, rid, args, enqueued_usec, attempts, state, by_whom) VALUES (%s, %s, %s, %s, 0, %s, %s)",
                    (self.name, temp, blob, time.time_ns() // 1000, PENDING, by),
                )
                cur.execute("SELECT id FROM jobgen_queue WHERE rid = %s", (temp,))
                rid = _new_id(int(cur.fetchone()[0]))
                cur.execute("UPDATE jobgen_queue SET rid = %s WHERE rid = %s", (rid, temp))
            self.conn.commit()
            return Enqueued(self.find(rid), outcomes.ENQUEUED, len(pending) + 1)
        except BaseException:
            self.conn.rollback()
            raise

    def list(self, state: str) -> list[Request]:
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobgen_queue WHERE queue = %s AND state = %s ORDER BY id", (self.name, state))
        self.conn.commit()
        return [self._req(r) for r in rows]

    def find(self, rid: str) -> Request:
        rows = self._rows(f"SELECT {_COLUMNS} FROM jobgen_queue WHERE queue = %s AND rid = %s", (self.name, rid))
        self.conn.commit()
        if not rows:
            raise NoSuchRequest(rid)
        return self._req(rows[0])

    def _set(self, rid: str, state: str, **cols) -> None:
        sets = ", ".join(f"{k} = %s" for k in ("state", *cols))
        with self.conn.cursor() as cur:
            cur.execute(f"UPDATE jobgen_queue SET {sets} WHERE queue = %s AND rid = %s", (state, *cols.values(), self.name, rid))
        self.conn.commit()

    def recover(self) -> list[Request]:
        out = []
        for req in self.list(RUNNING):
            dest = FAILED if req.attempts >= self.limits.max_attempts else PENDING
            self._set(req.id, dest)
            out.append(self.find(req.id))
        return out

    def take(self) -> Request | None:
        try:
            rows = self._rows(
                f"SELECT {_COLUMNS} FROM jobgen_queue WHERE queue = %s AND state = %s ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED",
                (self.name, PENDING),
            )
            if not rows:
                self.conn.commit()
                return None
            req = self._req(rows[0])
            with self.conn.cursor() as cur:  # the attempt is counted before the run starts
                cur.execute("UPDATE jobgen_queue SET state = %s, attempts = attempts + 1 WHERE rid = %s", (RUNNING, req.id))
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            raise
        return self.find(req.id)

    def finish(self, req: Request, status: int) -> str:
        if status == 0:
            with self.conn.cursor() as cur:
                cur.execute("DELETE FROM jobgen_queue WHERE queue = %s AND rid = %s", (self.name, req.id))
            self.conn.commit()
            return outcomes.DONE
        dest = FAILED if req.attempts >= self.limits.max_attempts else PENDING
        self._set(req.id, dest, last_status=status)  # a retried request keeps its id: still first
        return outcomes.FAILED if dest == FAILED else outcomes.RETRY

    def put_back(self, req: Request) -> Request:
        """As RedisQueue.put_back: pending again (first: the queue is ordered by id), the
        attempt given back."""
        self._set(req.id, PENDING, attempts=max(0, req.attempts - 1))
        return self.find(req.id)

    def retry(self, rid: str) -> Request:
        if self.find(rid).state != FAILED:
            raise NoSuchRequest(f"{rid} is not failed")
        self._set(rid, PENDING, attempts=0)
        return self.find(rid)

    def drop(self, rid: str) -> Request:
        req = self.find(rid)
        if req.state == RUNNING:
            raise NoSuchRequest(f"{rid} is running; stop the drainer first")
        with self.conn.cursor() as cur:
            cur.execute("DELETE FROM jobgen_queue WHERE queue = %s AND rid = %s", (self.name, rid))
        self.conn.commit()
        return req


# --------------------------------------------------------------------------- opening


def open_queue(target: Target, name: str, limits: Limits, opts: Options):
    """A queue on the lock server named by ``target`` (a parsed backend URL)."""
    from jobgen.runtime import backends

    module = backends.load(target.scheme)
    if target.scheme.startswith("redis"):
        return _Translated(RedisQueue(module._client(target, opts), name, limits), module._call)
    conn = module._connect(target, opts)
    if target.scheme.startswith("postgres"):
        conn.autocommit = False  # psycopg: a property
        return _Translated(SqlQueue(conn, "postgres", name, limits), module._call)
    conn.autocommit(False)  # PyMySQL: a method
    return _Translated(SqlQueue(conn, "mysql", name, limits), module._call)


class _Translated:
    """A queue whose every call goes through the backend's own reading of client errors
    (backends.*._call, as the holder's calls do): a server that is unreachable or refuses
    the credentials is the holder's outcome and exit code (69, 77), never a traceback."""

    def __init__(self, queue, call) -> None:
        self._queue, self._call = queue, call

    def __getattr__(self, name: str):
        attr = getattr(self._queue, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._call(lambda: attr(*args, **kwargs))
