"""The host-scope queue: one spool folder per job, requests as files, drained in order.

    SPOOL/            created by systemd-tmpfiles, owned by the job's user, 0700
      tmp/            a request is written here first (fsync), then renamed:
      pending/        waiting, named so that names sort by arrival
      running/        the request the drainer is running now (at most one)
      failed/         requests that used up max_attempts: kept, never dropped silently
      malformed/      files found in the spool that are not a complete request: set aside
      seq             the last sequence number handed out
      .enqueue.lock   flock(2) held while a request is numbered and counted

Promises (README "overlap: queue"):
- A request that `enqueue` reported is on disk: it is written whole under tmp/ (a short write
  or ENOSPC is an error, the half file is removed), fsync'd, renamed into pending/ and the
  folder fsync'd, so a crash or power loss after `enqueued` keeps it; a write error means
  "not enqueued" (OSError to the caller), never a partial request.
- No spool content stops the queue: a file in pending/, running/ or failed/ that is not a
  request jobgen wrote completely (truncated, not JSON, the wrong shape or types, a word
  no command line can hold, a number out of range, a name that is not its own id, not a
  regular file, a symlink, another owner than the spool's, bigger than MAX_REQUEST_BYTES)
  is moved to malformed/ unread-as-work, reported once (``report``), and the requests
  around it go on.
- Arrival order: numbers come from ``seq`` under the enqueue lock, and never at or below a
  request's name on disk, so concurrent enqueuers on the host never share a number and a
  name's order is the order the requests were accepted.
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
import re
import secrets
import stat
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from jobgen.contract import outcomes
from jobgen.contract.queue import COALESCE, FAILED, REJECT, MAX_REQUEST_BYTES, PENDING, RUNNING, SET_ASIDE, SPOOL_FOLDERS, TMP

STATES = (PENDING, RUNNING, FAILED)
_SUFFIX = ".json"
# A name is "<seq, 20 digits>-<8 hex>": the digits sort by arrival, the hex keeps two
# spools' ids apart in logs.
_SEQ_WIDTH = 20
REQUEST_ID = re.compile(rf"[0-9]{{{_SEQ_WIDTH}}}-[0-9a-f]{{8}}")
# The fields of a request file and the types each must have (bool is not an int here).
_FIELDS: dict[str, tuple[type, ...]] = {
    "id": (str,), "args": (list,), "enqueued_usec": (int,), "attempts": (int,),
    "last_status": (int, type(None)), "by": (str,),
}
# The numbers a request may hold (a range each): what jobgen writes, no more. A planted
# number of thousands of digits read fine, then could not be written back (Python's int to
# text limit, 4,300 digits) and failed every drain; a status is an exit status.
_NUMBERS = {"attempts": range(0, 1 << 63), "enqueued_usec": range(0, 1 << 63), "last_status": range(0, 256)}


class QueueFull(Exception):
    """max_pending requests are waiting and on_full is 'reject' (or the arguments differ)."""


class NoSuchRequest(Exception):
    pass


class TooBig(Exception):
    """The request's arguments would make a file past MAX_REQUEST_BYTES: not recorded."""


class Malformed(Exception):
    """A spool file that is not a request jobgen wrote completely; the message says why."""


@dataclass(frozen=True)
class SetAside:
    """A file moved out of the way (to malformed/), for one journal/stderr line."""

    name: str  # the file's name where it was found
    state: str  # the folder it was found in
    reason: str
    moved_to: str  # its path now ('' when it could not be moved: it is skipped where it is)


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
    def from_bytes(cls, data: bytes, state: str, name: str) -> "Request":
        """The request in file ``name``, or Malformed saying what is wrong with it. The id
        is the file's name: a file whose content names another id is refused, or it would
        be listed twice and its attempts counted on a name that is never read back."""
        try:
            doc = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise Malformed("not UTF-8 text") from None
        except (ValueError, RecursionError):
            raise Malformed(f"not JSON ({len(data)} bytes; a request cut short, or not one)") from None
        if not isinstance(doc, dict):
            raise Malformed(f"JSON {type(doc).__name__}, not an object")
        for key, types in _FIELDS.items():
            if key not in doc:
                raise Malformed(f"no '{key}'")
            if not isinstance(doc[key], types) or isinstance(doc[key], bool):
                raise Malformed(f"'{key}' is {type(doc[key]).__name__}, not {' or '.join(t.__name__ for t in types)}")
        if unknown := sorted(set(doc) - set(_FIELDS)):
            raise Malformed(f"{str(unknown[0])[:40]!r} is not a field of a request")
        if not all(isinstance(a, str) for a in doc["args"]):
            raise Malformed("'args' holds something other than strings")
        for key, words in (("args", doc["args"]), ("by", [doc["by"]])):
            if problem := next(filter(None, map(_not_a_word, words)), None):
                raise Malformed(f"'{key}' holds {problem}, which no command line can")
        for key, allowed in _NUMBERS.items():
            if doc[key] is not None and doc[key] not in allowed:
                raise Malformed(f"'{key}' is out of range ({allowed.start} to {allowed.stop - 1})")
        if f"{doc['id']}{_SUFFIX}" != name:
            raise Malformed(f"its id {str(doc['id'])[:40]!r} is not its file name")
        return cls(doc["id"], tuple(doc["args"]), doc["enqueued_usec"], doc["attempts"], doc["last_status"], state, doc["by"])


def _not_a_word(text: str) -> str | None:
    """Why ``text`` cannot be one word of a command line, or None. exec(2) takes each word
    as NUL-terminated bytes, made as subprocess makes them (os.fsencode): a planted NUL or a
    lone surrogate (a character that is no byte) failed every drain with a traceback."""
    try:
        data = os.fsencode(text)
    except UnicodeEncodeError:
        return "a lone surrogate (a character that is no byte)"
    return "a NUL character" if b"\0" in data else None


@dataclass(frozen=True)
class Enqueued:
    request: Request
    outcome: str  # "enqueued" or "coalesced" (into an equal pending request)
    pending: int  # pending requests after this call


@dataclass
class Spool:
    root: Path
    max_pending: int = 100
    on_full: str = REJECT
    max_attempts: int = 3
    lock_timeout: float = 30.0  # how long enqueue waits for another enqueuer, seconds
    _clock: object = field(default=time.time_ns, repr=False)
    # Told once about each file this process moved to malformed/ (the command logs it).
    report: Callable[[SetAside], None] = field(default=lambda _: None, repr=False)

    # ------------------------------------------------------------------ layout

    def folder(self, state: str) -> Path:
        return self.root / state

    def require(self) -> None:
        """The spool folder itself must be there: systemd-tmpfiles makes it when the job is
        applied, and listing or draining a folder that is not there would answer "nothing
        queued", which nobody can know. Raises OSError naming the folder."""
        if not stat.S_ISDIR(os.stat(self.root).st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(self.root))

    def create(self) -> None:
        """Make the folders (tmpfiles.d makes SPOOL itself with its owner and mode)."""
        for sub in SPOOL_FOLDERS:
            self._make_folder(self.root / sub)

    def _make_folder(self, path: Path) -> None:
        """A sub-folder, handed to the spool's owner when root makes it (as a request file
        is, _owner): a root-owned 0700 pending/ or malformed/ in a user's spool would stop
        that user's drainer and listing for good ('cannot use the queue: Permission denied')."""
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            return
        owner = self._owner()
        if owner is not None:
            os.chown(path, *owner, follow_symlinks=False)

    # ------------------------------------------------------------------ enqueue

    def enqueue(self, args: tuple[str, ...] = (), by: str = "") -> Enqueued:
        """Record one request durably, or raise QueueFull / TooBig / OSError (not recorded).
        Safe from many processes at once."""
        self.create()
        with self._enqueue_lock():
            pending = self.list(PENDING)
            if len(pending) >= self.max_pending:
                same = [r for r in pending if r.args == tuple(args)]
                if self.on_full == COALESCE and same:
                    return Enqueued(same[-1], outcomes.COALESCED, len(pending))
                raise QueueFull(f"{len(pending)} requests pending (max_pending {self.max_pending})")
            probe = Request(id="0" * _SEQ_WIDTH + "-00000000", args=tuple(args), by=by)
            if len(probe.to_bytes()) > MAX_REQUEST_BYTES - 64:
                raise TooBig(f"the arguments make a request of {len(probe.to_bytes())} bytes; at most {MAX_REQUEST_BYTES - 64}")
            seq = self._next_seq(pending)
            req = Request(
                id=f"{seq:0{_SEQ_WIDTH}d}-{secrets.token_hex(4)}",
                args=tuple(args),
                enqueued_usec=self._clock() // 1000,
                by=by,
            )
            self._write_new(PENDING, req)
            return Enqueued(req, outcomes.ENQUEUED, len(pending) + 1)

    @contextlib.contextmanager
    def _enqueue_lock(self) -> Iterator[None]:
        fd = os.open(self.root / ".enqueue.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            # Root's first enqueue makes it: the spool owner's enqueuers must open it too.
            owner = self._owner()
            if owner is not None and os.fstat(fd).st_uid != owner[0]:
                os.fchown(fd, *owner)
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

    def _next_seq(self, pending: list[Request]) -> int:
        path = self.root / "seq"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                last = int(os.read(fd, 64).decode("ascii").strip() or 0)
            finally:
                os.close(fd)
            # A number the id's digits cannot hold would make a request whose name is not
            # a request id: reported enqueued, then set aside and never run.
            if not 0 <= last < 10**_SEQ_WIDTH - 1:
                raise ValueError(last)
        except (ValueError, UnicodeDecodeError, OSError):
            # Missing, or damaged (text, a symlink, a folder): order comes from the names.
            last = 0
        # Never at or below a request on disk, whatever the counter says: one emptied, or
        # put back from an older copy, numbered new requests before waiting ones (they
        # would have run first). ``pending`` is what enqueue has just read of pending/.
        seq = max(last, *(int(r.id[:_SEQ_WIDTH]) for r in pending), *map(self._highest_in, (RUNNING, FAILED))) + 1
        if seq >= 10**_SEQ_WIDTH:  # only a planted name gets here: refuse, never misname
            raise OSError(errno.EOVERFLOW, f"no request number left after {seq - 1}", str(path))
        self._atomic_write(path, f"{seq}\n".encode())
        return seq

    def _highest_in(self, state: str) -> int:
        """The number of the highest request in ``state``. Only the names that decide it are
        read, from the highest down: a file with a request's name that is not a request (a
        planted failed/99999999999999999999-deadbeef.json) is set aside as anywhere else,
        never the number every later enqueue is refused for."""
        try:
            names = os.listdir(self.folder(state))
        except FileNotFoundError:
            return 0
        for name in sorted(filter(_is_request_name, names), reverse=True):
            try:
                return int(self._read(state, name).id[:_SEQ_WIDTH])
            except FileNotFoundError:  # drained, dropped or set aside by another process meanwhile
                continue
            except Malformed as bad:
                self._set_aside(state, name, str(bad))
        return 0

    def _write_new(self, state: str, req: Request) -> None:
        tmp = self.root / TMP / f"{req.id}{_SUFFIX}"
        try:
            _write_synced(tmp, req.to_bytes(), self._owner())
            os.rename(tmp, self.folder(state) / tmp.name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(self.folder(state))

    def _owner(self) -> tuple[int, int] | None:
        """The spool's owner, when root writes a file in someone else's spool: the file is
        handed to them, or their drainer could not read it (and would set it aside)."""
        if os.geteuid() != 0:
            return None
        st = os.stat(self.root)
        return (st.st_uid, st.st_gid) if st.st_uid != 0 else None

    # ------------------------------------------------------------------ reading

    def list(self, state: str) -> list[Request]:
        """The requests in ``state`` in arrival order; whatever else is there is set aside."""
        folder = self.folder(state)
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            try:
                out.append(self._read(state, name))
            except FileNotFoundError:  # drained, dropped or set aside by another process meanwhile
                continue
            except Malformed as bad:
                self._set_aside(state, name, str(bad))
        return out

    def _read(self, state: str, name: str) -> Request:
        return self._inspect(self.folder(state) / name, name, state)

    def _inspect(self, path: Path, name: str, state: str) -> Request:
        """The request in ``path`` (named ``name``), or Malformed; nothing is followed,
        opened beyond a regular file, or read past MAX_REQUEST_BYTES."""
        if not _is_request_name(name):
            raise Malformed("its name is not a request id (SEQ-HEX.json)")
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            raise Malformed("a symbolic link")
        if not stat.S_ISREG(st.st_mode):
            raise Malformed("not a regular file")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except PermissionError:
            raise Malformed("not readable by this user") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Malformed("a symbolic link") from None
            raise
        try:
            st = os.fstat(fd)  # the file opened, not a name swapped in after lstat
            if not stat.S_ISREG(st.st_mode):
                raise Malformed("not a regular file")
            owner = os.stat(self.root).st_uid
            if st.st_uid != owner:
                raise Malformed(f"owned by uid {st.st_uid}, not by the spool's owner (uid {owner})")
            if st.st_size > MAX_REQUEST_BYTES:
                raise Malformed(f"{st.st_size} bytes, more than a request can be ({MAX_REQUEST_BYTES})")
            data = _read_at_most(fd, MAX_REQUEST_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_REQUEST_BYTES:
            raise Malformed(f"more than {MAX_REQUEST_BYTES} bytes")
        return Request.from_bytes(data, state, name)

    def _set_aside(self, state: str, name: str, reason: str) -> None:
        """Move a file that is not a request out of the queue's way, keeping it for the
        operator; told to ``report`` only by the process whose rename moved it."""
        aside = self.root / SET_ASIDE
        self._make_folder(aside)
        dest = aside / name
        n = 0
        while os.path.lexists(dest):  # keep earlier ones: a name may come back
            n += 1
            dest = aside / f"{name}~{n}"
        try:
            os.rename(self.folder(state) / name, dest)
        except FileNotFoundError:
            return  # another process moved it first and reports it
        except OSError as exc:
            # Not ours to move (a folder of another owner: rename(2) needs to write its
            # '..'): leave it, skip it, and say so; the requests around it still run.
            self.report(SetAside(name, state, f"{reason}; cannot move it: {exc.strerror}", ""))
            return
        _fsync_dir(aside)
        _fsync_dir(self.folder(state))
        self.report(SetAside(name, state, reason, str(dest)))

    def malformed(self) -> list[tuple[str, str]]:
        """(file name, why) of everything in malformed/, for `jobgen queue`."""
        aside = self.root / SET_ASIDE
        try:
            names = sorted(os.listdir(aside))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            original = name.rsplit("~", 1)[0] if re.search(r"~[0-9]+$", name) else name
            try:
                self._inspect(aside / name, original, SET_ASIDE)
                why = "a valid request now (move it back to pending/ to run it)"
            except Malformed as bad:
                why = str(bad)
            except OSError as exc:
                why = exc.strerror or str(exc)
            out.append((name, why))
        return out

    def find(self, request_id: str) -> Request:
        if not REQUEST_ID.fullmatch(request_id):
            raise NoSuchRequest(request_id)
        for state in STATES:
            try:
                return self._read(state, f"{request_id}{_SUFFIX}")
            except FileNotFoundError:
                continue
            except Malformed as bad:
                self._set_aside(state, f"{request_id}{_SUFFIX}", str(bad))
        raise NoSuchRequest(request_id)

    # ------------------------------------------------------------------ draining (lock held)

    def recover(self) -> list[Request]:
        """Put back what a killed drainer left in running/; give up on used-up ones."""
        moved = []
        for req in self.list(RUNNING):
            dest = FAILED if req.attempts >= self.max_attempts else PENDING
            self._move(req, RUNNING, dest)
            moved.append(_with(req, state=dest))
        return moved

    def take(self) -> Request | None:
        """The oldest pending request, moved to running/ with its attempt counted first."""
        pending = self.list(PENDING)
        if not pending:
            return None
        req = pending[0]
        started = _with(req, attempts=req.attempts + 1, state=RUNNING)
        # Count the attempt durably before the command can start: a SIGKILL mid-run still
        # used one attempt, so a request that kills its drainer cannot loop forever.
        self._atomic_write(self._path(PENDING, req), started.to_bytes())
        self._move(req, PENDING, RUNNING)
        return started

    def finish(self, req: Request, status: int) -> str:
        """After the command ended: 'done', 'retry' (back to pending) or 'failed'."""
        if status == 0:
            self._path(RUNNING, req).unlink()
            _fsync_dir(self.folder(RUNNING))
            return outcomes.DONE
        dest = FAILED if req.attempts >= self.max_attempts else PENDING
        self._atomic_write(self._path(RUNNING, req), _with(req, last_status=status).to_bytes())
        self._move(req, RUNNING, dest)
        return outcomes.FAILED if dest == FAILED else outcomes.RETRY

    def put_back(self, req: Request) -> Request:
        """An orderly stop interrupted the request: back to pending, first in line, with
        the attempt ``take`` counted given back (the stop was not the request's failure)."""
        back = _with(req, attempts=max(0, req.attempts - 1), state=PENDING)
        self._atomic_write(self._path(RUNNING, req), back.to_bytes())
        self._move(req, RUNNING, PENDING)
        return back

    # ------------------------------------------------------------------ operator actions

    def retry(self, request_id: str) -> Request:
        """A failed request back to pending, with its attempts reset."""
        req = self.find(request_id)
        if req.state != FAILED:
            raise NoSuchRequest(f"{request_id} is {req.state}, not failed")
        self._atomic_write(self._path(FAILED, req), _with(req, attempts=0).to_bytes())
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

    def _atomic_write(self, path: Path, data: bytes) -> None:
        """Replace ``path`` with ``data`` whole or not at all. The temporary file is made in
        tmp/, never beside ``path``: nothing but complete requests ever shows in pending/
        (the .path unit's DirectoryNotEmpty= would start a drainer for a leftover)."""
        tmp = self.root / TMP / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            _write_synced(tmp, data, self._owner())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        _fsync_dir(path.parent)


def _is_request_name(name: str) -> bool:
    return name.endswith(_SUFFIX) and REQUEST_ID.fullmatch(name[: -len(_SUFFIX)]) is not None


def _with(req: Request, **changes) -> Request:
    doc = asdict(req) | changes
    doc["args"] = tuple(doc["args"])
    return Request(**doc)


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit and (chunk := os.read(fd, min(1 << 16, limit - size))):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _write_synced(path: Path, data: bytes, owner: tuple[int, int] | None = None) -> None:
    """All of ``data`` in a new file, on disk, or an OSError: os.write may write less than
    asked (a nearly full file system writes what fits), so loop until all is written; the
    next write then fails with ENOSPC instead of leaving a short file behind."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        if exc.filename is None:  # write(2)/fsync(2) errors name no file: say which
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a directory; the rename stands
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)
