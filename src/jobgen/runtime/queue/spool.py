"""The host-scope queue: one spool folder per job, requests as files, drained in order.

    SPOOL/            created by systemd-tmpfiles, owned by the job's user, 0700
      tmp/            a request is written here first (fsync), then renamed:
      pending/        waiting, named so that names sort by arrival
      running/        the request the drainer is running now (at most one)
      failed/         requests that used up max_attempts: kept, never dropped silently
      seq             the last sequence number handed out
      .enqueue.lock   flock(2) held while a request is numbered and counted

Promises (README "overlap: queue"):
- A request that `enqueue` reported is on disk: file and folder are fsync'd before the rename
  and after it, so a crash or power loss after `enqueued` keeps it.
- Arrival order: numbers come from ``seq`` under the enqueue lock, so concurrent enqueuers on
  the host never share a number and a name's order is the order the requests were accepted.
- A request leaves ``running/`` only after its command finished: removed on success, moved
  back to ``pending/`` (same name, so it stays first) on failure, or to ``failed/`` once it
  has been started ``max_attempts`` times. A drainer killed mid-run leaves it in
  ``running/``; the next drainer puts it back first (``recover``). That is at-least-once:
  a run killed after its side effect and before the removal is repeated, so commands should
  use JOBGEN_REQUEST_ID as an idempotency key.

Only one drainer may work on a spool at a time: the caller holds the job's lock (flock for
host scope) around ``recover``/``take``/``finish``; this module does not take it itself.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator


PENDING, RUNNING, FAILED = "pending", "running", "failed"
STATES = (PENDING, RUNNING, FAILED)
_SUFFIX = ".json"
# A name is "<seq, 20 digits>-<8 hex>": the digits sort by arrival, the hex keeps two
# spools' ids apart in logs.
_SEQ_WIDTH = 20


class QueueFull(Exception):
    """max_pending requests are waiting and on_full is 'reject' (or the arguments differ)."""


class NoSuchRequest(Exception):
    pass


@dataclass(frozen=True)
class Request:
    id: str
    args: tuple[str, ...] = ()
    enqueued_usec: int = 0
    attempts: int = 0  # how many times a drainer started it
    last_status: int | None = None  # exit status of the last failed attempt
    state: str = PENDING
    by: str = ""  # what enqueued it: timer, systemctl, jobgen run, jobgen enqueue

    def to_bytes(self) -> bytes:
        doc = asdict(self)
        doc.pop("state")
        doc["args"] = list(self.args)
        return (json.dumps(doc, sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes, state: str) -> "Request":
        doc = json.loads(data)
        return cls(
            id=str(doc["id"]),
            args=tuple(str(a) for a in doc.get("args", ())),
            enqueued_usec=int(doc.get("enqueued_usec", 0)),
            attempts=int(doc.get("attempts", 0)),
            last_status=doc.get("last_status"),
            state=state,
            by=str(doc.get("by", "")),
        )


@dataclass(frozen=True)
class Enqueued:
    request: Request
    outcome: str  # "enqueued" or "coalesced" (into an equal pending request)
    pending: int  # pending requests after this call


@dataclass
class Spool:
    root: Path
    max_pending: int = 100
    on_full: str = "reject"
    max_attempts: int = 3
    lock_timeout: float = 30.0  # how long enqueue waits for another enqueuer, seconds
    _clock: object = field(default=time.time_ns, repr=False)

    # ------------------------------------------------------------------ layout

    def folder(self, state: str) -> Path:
        return self.root / state

    def create(self) -> None:
        """Make the folders (tmpfiles.d makes SPOOL itself with its owner and mode)."""
        for sub in ("tmp", *STATES):
            (self.root / sub).mkdir(mode=0o700, exist_ok=True)

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, args: tuple[str, ...] = (), by: str = "") -> Enqueued:
        """Record one request durably, or raise QueueFull. Safe from many processes at once."""
        self.create()
        with self._enqueue_lock():
            pending = self.list(PENDING)
            if len(pending) >= self.max_pending:
                same = [r for r in pending if r.args == tuple(args)]
                if self.on_full == "coalesce" and same:
                    return Enqueued(same[-1], "coalesced", len(pending))
                raise QueueFull(f"{len(pending)} requests pending (max_pending {self.max_pending})")
            seq = self._next_seq()
            req = Request(
                id=f"{seq:0{_SEQ_WIDTH}d}-{secrets.token_hex(4)}",
                args=tuple(args),
                enqueued_usec=self._clock() // 1000,
                by=by,
            )
            self._write_new(PENDING, req)
            return Enqueued(req, "enqueued", len(pending) + 1)

    @contextlib.contextmanager
    def _enqueue_lock(self) -> Iterator[None]:
        fd = os.open(self.root / ".enqueue.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            deadline = time.monotonic() + self.lock_timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"another enqueuer held {self.root}/.enqueue.lock for {self.lock_timeout:g}s")
                    time.sleep(0.005)  # a lock held for one fsync'd write; not a test wait
            yield
        finally:
            os.close(fd)

    def _next_seq(self) -> int:
        path = self.root / "seq"
        try:
            last = int(path.read_text().strip() or 0)
        except FileNotFoundError:
            last = 0
        except ValueError:
            # A damaged counter must not lose order: continue after the highest name on disk.
            last = max((int(r.id.split("-")[0]) for s in STATES for r in self.list(s)), default=0)
        seq = last + 1
        _atomic_write(self.root, path, f"{seq}\n".encode())
        return seq

    def _write_new(self, state: str, req: Request) -> None:
        tmp = self.root / "tmp" / f"{req.id}{_SUFFIX}"
        _write_synced(tmp, req.to_bytes())
        os.rename(tmp, self.folder(state) / tmp.name)
        _fsync_dir(self.folder(state))

    # ------------------------------------------------------------------ reading

    def list(self, state: str) -> list[Request]:
        folder = self.folder(state)
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(_SUFFIX))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            with contextlib.suppress(FileNotFoundError):  # drained between listdir and read
                out.append(Request.from_bytes((folder / name).read_bytes(), state))
        return out

    def find(self, request_id: str) -> Request:
        for state in STATES:
            path = self.folder(state) / f"{request_id}{_SUFFIX}"
            if path.exists():
                return Request.from_bytes(path.read_bytes(), state)
        raise NoSuchRequest(request_id)

    # ------------------------------------------------------------------ draining (lock held)

    def recover(self) -> list[Request]:
        """Put back what a killed drainer left in running/; give up on used-up ones."""
        moved = []
        for req in self.list(RUNNING):
            dest = FAILED if req.attempts >= self.max_attempts else PENDING
            self._move(req, RUNNING, dest)
            moved.append(Request.from_bytes(self._path(dest, req).read_bytes(), dest))
        return moved

    def take(self) -> Request | None:
        """The oldest pending request, moved to running/ with its attempt counted first."""
        pending = self.list(PENDING)
        if not pending:
            return None
        req = pending[0]
        started = Request(req.id, req.args, req.enqueued_usec, req.attempts + 1, req.last_status, RUNNING, req.by)
        # Count the attempt durably before the command can start: a SIGKILL mid-run still
        # used one attempt, so a request that kills its drainer cannot loop forever.
        _atomic_write(self.folder(PENDING), self._path(PENDING, req), started.to_bytes())
        self._move(req, PENDING, RUNNING)
        return started

    def finish(self, req: Request, status: int) -> str:
        """After the command ended: 'done', 'retry' (back to pending) or 'failed'."""
        if status == 0:
            self._path(RUNNING, req).unlink()
            _fsync_dir(self.folder(RUNNING))
            return "done"
        dest = FAILED if req.attempts >= self.max_attempts else PENDING
        ended = Request(req.id, req.args, req.enqueued_usec, req.attempts, status, RUNNING, req.by)
        _atomic_write(self.folder(RUNNING), self._path(RUNNING, req), ended.to_bytes())
        self._move(req, RUNNING, dest)
        return "failed" if dest == FAILED else "retry"

    # ------------------------------------------------------------------ operator actions

    def retry(self, request_id: str) -> Request:
        """A failed request back to pending, with its attempts reset."""
        req = self.find(request_id)
        if req.state != FAILED:
            raise NoSuchRequest(f"{request_id} is {req.state}, not failed")
        fresh = Request(req.id, req.args, req.enqueued_usec, 0, req.last_status, FAILED, req.by)
        _atomic_write(self.folder(FAILED), self._path(FAILED, req), fresh.to_bytes())
        self._move(req, FAILED, PENDING)
        return self.find(request_id)

    def drop(self, request_id: str) -> Request:
        """Remove a pending or failed request (a running one belongs to its drainer)."""
        req = self.find(request_id)
        if req.state == RUNNING:
            raise NoSuchRequest(f"{request_id} is running; stop the drainer first")
        self._path(req.state, req).unlink()
        _fsync_dir(self.folder(req.state))
        return req

    # ------------------------------------------------------------------ helpers

    def _path(self, state: str, req: Request) -> Path:
        return self.folder(state) / f"{req.id}{_SUFFIX}"

    def _move(self, req: Request, src: str, dest: str) -> None:
        os.rename(self._path(src, req), self._path(dest, req))
        _fsync_dir(self.folder(dest))
        _fsync_dir(self.folder(src))


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(folder: Path, path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        _write_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a directory; the rename stands
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)
