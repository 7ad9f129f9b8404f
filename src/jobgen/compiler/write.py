"""Stage 5, the only code that touches the output tree.

``compare`` reads what is there and says, per file, create / update / identical /
remove / masked; ``apply`` carries the changes out as one transaction:

1. every new file is written to a temporary file beside its final name, and so is the
   journal (``.jobgen-journal``: which temporary file becomes which file, which files go);
2. all of them are made durable at once (``_sync_all``: one syncfs(2) of the output
   folder's file system, or where there is none an fsync(2) of each, after all are
   written); then the journal is renamed into place and the output folder is fsynced:
   the commit point;
3. every temporary file is renamed onto its final name, pruned files are removed, each
   touched folder is fsynced once, and the journal is removed.

So N changed files cost one syncfs plus one fsync per touched folder, not one fsync per
file: on ext4 each fsync of a file just created waits for a journal commit, and 2,000 of
them one after another were a third of a 1,000-job render (bench/results.md). An
identical file costs nothing.

A failure before the commit point removes the temporary files (the folder is as it
was); a failure after it restores the files already replaced from the bytes read by
``compare``. A render killed before the commit point leaves only temporary files, which
the next render removes; one killed after it leaves the journal, and the next render
completes it before doing anything else (``render --check`` reports it). Identical
files are not touched at all. Renders of one folder are serialised by ``flock(2)`` on
``.jobgen.lock`` in it (``locked``); the lock file exists only while a render runs.

Nothing is read or written through a symbolic link: a unit symlinked to /dev/null is the
administrator's mask and is left alone (``masked``), any other symlink at a generated
path is refused, and a folder that leads out of the output folder is refused.

Ownership, for ``--prune``: a file is jobgen's from manifest M when its first line is
exactly the header jobgen writes for M (header.py). A hand-edited file that keeps
that line is still taken as jobgen's (the line says "Do not edit"); to keep an edited
copy, change or remove the line.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from jobgen.compiler import header
from jobgen.compiler.cache import digest

CREATE, UPDATE, IDENTICAL, REMOVE, MASKED = "create", "update", "identical", "remove", "masked"
FLAT_FOLDERS = ("", "tmpfiles.d")  # where the flat layout writes; prune looks nowhere else
LOCK_FILE = ".jobgen.lock"
JOURNAL = ".jobgen-journal"
# A temporary file's name: TMP_PREFIX, TMP_TOKEN_HEX random hex digits (one token per
# process) and a hex counter. Short and fixed, and not derived from the final name, so it
# never limits a name (compiler/limits.py computes from these).
TMP_PREFIX = ".jobgen-tmp."
TMP_TOKEN_HEX = 8
TMP_COUNTER_HEX = 16  # a 64-bit count of files: more than one process ever writes
TMP_NAME_MAX = len(TMP_PREFIX) + TMP_TOKEN_HEX + TMP_COUNTER_HEX
FILE_MODE = 0o644  # unit files are read by systemd and operators, like packaged units
DIR_MODE = 0o755  # folders jobgen creates: deliberate, not the umask's
READ_CHUNK = 1 << 16  # a unit file is one read(2), and the read that finds its end
MASK_TARGET = "/dev/null"  # systemctl mask: systemd.unit(5) "masked"


class OutputError(OSError):
    """One I/O failure on the output tree, as the one line the CLI prints. An OSError, so
    callers that handle I/O failures as such (the generator) keep doing so."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path, self.reason = str(path), reason
        super().__init__(f"cannot write {self.path}: {self.reason}")

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


class Change(NamedTuple):
    path: str  # relative to the output folder
    action: str
    old: bytes | None
    new: bytes | None
    old_mode: int | None = None  # to restore an updated or removed file on rollback

    @property
    def changes_anything(self) -> bool:
        return self.action in (CREATE, UPDATE, REMOVE)


class Recovery:
    """What a render found left by an earlier one that did not finish. (Change is a named
    tuple and this a plain class, not dataclasses: a dataclass executes its generated
    methods at every start of every command.)"""

    __slots__ = ("completed", "stale", "pending")

    def __init__(self, completed: int = 0, stale: int = 0, pending: bool = False):
        self.completed = completed  # files an interrupted render had committed; this run finished them
        self.stale = stale  # temporary files of a render that died before its commit point
        self.pending = pending  # a dry run saw a committed, unfinished render (next render completes it)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Recovery):
            return NotImplemented
        return (self.completed, self.stale, self.pending) == (other.completed, other.stale, other.pending)

    __hash__ = None  # mutable, as the dataclass was

    def __repr__(self) -> str:
        return f"Recovery(completed={self.completed}, stale={self.stale}, pending={self.pending})"


# --- reading, never through a symbolic link ------------------------------------------


def _real_inside(outdir: Path, folder: Path) -> bool:
    root = os.path.realpath(outdir)
    real = os.path.realpath(folder)
    return real == root or real.startswith(root.rstrip("/") + "/")


def check_folder(outdir: Path, sub: str, what: str = "output folder") -> None:
    """Refuse ``outdir/sub`` when a link on the way (a folder in it, or the folder itself)
    leads out of ``outdir``, naming the first such link; a folder not made yet counts
    (it would be made through the link). Links are resolved as this host sees them, so
    an absolute link is refused even where it would point inside ``outdir`` seen as a
    root: jobgen never writes outside. `jobgen apply --root` checks with this too."""
    folder = outdir
    for part in Path(sub).parts:
        folder = folder / part
        if not os.path.lexists(folder):
            return
        if not _real_inside(outdir, folder):
            raise OutputError(folder, f"it leads out of the {what} (to {os.path.realpath(folder)}); jobgen neither reads nor writes through it")
        if os.path.islink(folder) and not os.path.exists(folder):
            # A link to itself (ELOOP) or to nothing: the folder could be neither read nor
            # made through it; said once here, not once per file in it.
            raise OutputError(folder, f"it is a symbolic link (to {os.readlink(folder)}) that leads to no folder")
    if os.path.lexists(folder) and not folder.is_dir():
        raise OutputError(folder, os.strerror(errno.ENOTDIR))


def _read_nofollow(path: Path | str) -> bytes:
    # os.read on the descriptor, not a buffered file object around it: an unchanged
    # re-render of 1,000 jobs reads 2,000 files, and the wrapper cost more than the reads.
    # O_NONBLOCK: a FIFO planted where a file belongs (the journal) must not hang the
    # render in open(2); it reads as empty or fails, and is reported.
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, READ_CHUNK):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _existing(outdir: Path, rel: str, new: bytes | None) -> Change:
    path = os.path.join(outdir, rel)  # a str, not a Path: this runs once per file
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Change(rel, CREATE, None, new)
    except OSError as exc:
        raise OutputError(path, _reason(exc)) from None
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        if target == MASK_TARGET:
            return Change(rel, MASKED, None, new)
        raise OutputError(path, f"it is a symbolic link (to {target}); jobgen writes only regular files and never through a link")
    if not stat.S_ISREG(st.st_mode):
        raise OutputError(path, "it is not a regular file")
    try:
        old = _read_nofollow(path)
    except OSError as exc:
        raise OutputError(path, _reason(exc)) from None
    return Change(rel, IDENTICAL if old == new else UPDATE, old, new, stat.S_IMODE(st.st_mode))


def compare(outdir: Path, files: dict[str, bytes], prune_for: set[str] | None = None, folders: tuple[str, ...] = FLAT_FOLDERS) -> list[Change]:
    """What applying ``files`` would do. ``folders`` are where prune looks (the layout's)."""
    if os.path.lexists(outdir) and not outdir.is_dir():
        raise OutputError(outdir, os.strerror(errno.ENOTDIR))
    _check_folders(outdir, files, prune_for, folders)
    present = _present(outdir, files)
    changes = [_existing(outdir, rel, files[rel]) if present is None or rel in present else Change(rel, CREATE, None, files[rel])
               for rel in sorted(files)]
    if prune_for:
        changes += _prunable(outdir, files, prune_for, folders)
    return sorted(changes, key=lambda c: c.path)


def _present(outdir: Path, rels) -> set[str] | None:
    """The names (relative to ``outdir``) in the folders ``rels`` go into, one listing per
    folder, so that a file not there is a create without an lstat(2) of its own (a first
    render of 1,000 jobs asked 2,000 times for files that were not there). A name that is
    there is looked at by ``_existing`` as before. None when a folder cannot be listed
    although it exists (not a folder, no read permission): then every file is looked at
    one by one, which reports what is wrong with its path. What is there can change after
    the listing as it could after an lstat: a concurrent render waits on the lock, and
    apply never writes through what it finds (O_EXCL temporary files, rename(2))."""
    found: set[str] = set()
    for parent in {rel.rpartition("/")[0] for rel in rels}:
        try:
            names = os.listdir(os.path.join(outdir, parent) if parent else outdir)
        except FileNotFoundError:
            continue  # the folder is not there: nothing in it is either
        except OSError:
            return None
        found.update(f"{parent}/{name}" if parent else name for name in names)
    return found


def _check_folders(outdir: Path, rels, prune_for: set[str] | None, folders: tuple[str, ...]) -> None:
    for sub in sorted({str(Path(rel).parent) if "/" in rel else "" for rel in rels} | set(folders if prune_for else ())):
        check_folder(outdir, sub)


def unchanged(outdir: Path, digests: dict[str, tuple[int, str]], prune_for: set[str] | None = None, folders: tuple[str, ...] = FLAT_FOLDERS) -> list[Change] | None:
    """What ``compare`` would say if the folder holds exactly the files ``digests``
    describes (path -> cache.digest of the bytes): every one identical or masked, nothing
    to prune. The same reads as ``compare``; None as soon as anything differs or is out of
    the ordinary, and then ``compare`` with the compiled files says what, and any error."""
    try:
        if not outdir.is_dir():
            return None
        _check_folders(outdir, digests, prune_for, folders)
        changes = []
        for rel in sorted(digests):
            found = _existing(outdir, rel, None)
            if found.action == MASKED:
                changes.append(found)
            elif found.old is not None and digest(found.old) == digests[rel]:
                changes.append(Change(rel, IDENTICAL, found.old, found.old, found.old_mode))
            else:
                return None
        if prune_for and _prunable(outdir, digests, prune_for, folders):
            return None
    except OSError:  # OutputError too: compare reports it
        return None
    return changes


def _prunable(outdir: Path, files: dict[str, bytes] | dict[str, tuple[int, str]], manifests: set[str], folders: tuple[str, ...]) -> list[Change]:
    found = []
    for sub in folders:
        folder = outdir / sub
        if not folder.is_dir():
            continue
        try:  # a folder jobgen may not list is one line, as one it may not write
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            raise OutputError(folder, _reason(exc)) from None
        for entry in entries:
            rel = f"{sub}/{entry.name}" if sub else entry.name
            if rel in files or entry.name.startswith(".") or not entry.is_file(follow_symlinks=False):
                continue
            try:
                data = _read_nofollow(Path(entry.path))
            except OSError as exc:
                raise OutputError(entry.path, _reason(exc)) from None
            if header.owner(data, manifests):
                found.append(Change(rel, REMOVE, data, None, stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)))
    return found


# --- the lock, recovery of an earlier render ------------------------------------------


def _make_dirs(folder: Path, made: list[Path]) -> None:
    """mkdir -p with DIR_MODE whatever the umask; records what it created (parents first)."""
    try:
        if stat.S_ISDIR(os.stat(folder).st_mode):
            return
    except FileNotFoundError:
        pass
    except OSError as exc:  # ENAMETOOLONG, ENOTDIR, EACCES, ELOOP...
        raise OutputError(folder, _reason(exc)) from None
    _make_dirs(folder.parent, made)
    try:
        os.mkdir(folder, DIR_MODE)
    except FileExistsError:
        if not folder.is_dir():
            raise OutputError(folder, os.strerror(errno.ENOTDIR)) from None
        return
    except OSError as exc:
        raise OutputError(folder, _reason(exc)) from None
    os.chmod(folder, DIR_MODE)
    made.append(folder)


@contextlib.contextmanager
def locked(outdir: Path, folders: tuple[str, ...] = FLAT_FOLDERS, *, dry: bool, on_wait: Callable[[], None] = lambda: None) -> Iterator[Recovery]:
    """Hold the output folder's lock; yields what was found left by an earlier render.

    A render takes it exclusively (creating the folder, DIR_MODE); a dry run takes it
    shared if a render holds it, and otherwise changes nothing. The holder removes the
    lock file before releasing it; a waiter that then finds its file unlinked retries.
    """
    lock_path = outdir / LOCK_FILE
    if dry:
        with contextlib.ExitStack() as stack:
            try:
                # O_NONBLOCK: a FIFO in the lock file's place must not hang a dry run in open(2).
                fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                fd = None  # no render running (or no folder yet)
            if fd is not None:
                stack.callback(os.close, fd)
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield _recover(outdir, folders, dry=True)
        return
    made: list[Path] = []
    _make_dirs(outdir, made)
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            _discard([], made)
            if exc.errno == errno.ELOOP and os.path.islink(lock_path):  # planted: name it, never follow it
                raise OutputError(lock_path, f"it is a symbolic link (to {os.readlink(lock_path)}); jobgen writes only regular files and never through a link") from None
            if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise OutputError(outdir, _reason(exc)) from None
            # A folder this user cannot write: nothing can change in it, so a render that
            # finds every file identical succeeds, and one that would write fails in apply
            # naming the first file it cannot write.
            yield _recover(outdir, folders, dry=True)
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.stat(lock_path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file we waited on: take the new one
    try:
        yield _recover(outdir, folders, dry=False)
    except BaseException:
        _unlock(lock_path, fd)
        _discard([], made)  # a folder this render created goes again (if still empty)
        raise
    _unlock(lock_path, fd)


def _unlock(lock_path: Path, fd: int) -> None:
    with contextlib.suppress(OSError):
        os.unlink(lock_path)
    os.close(fd)


def _read_journal(outdir: Path) -> dict | None:
    """The journal of an interrupted render, checked: it names only paths inside the
    output folder (never `..`, never through a link out of it) and temporary files by
    jobgen's prefix, so a planted journal cannot move or remove anything else."""
    try:
        doc = json.loads(_read_nofollow(outdir / JOURNAL))
        paths = [p for pair in doc["renames"] for p in pair] + list(doc["removes"])
        if not all(isinstance(p, str) and _plain_relative(p) and _real_inside(outdir, (outdir / p).parent) for p in paths):
            raise ValueError("a path in it is not inside the output folder")
        if not all(Path(tmp).name.startswith(TMP_PREFIX) for tmp, _ in doc["renames"]):
            raise ValueError("a temporary file in it is not jobgen's")
        return doc
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise OutputError(outdir / JOURNAL, f"not a journal jobgen can complete ({exc}); check the folder, then remove it") from None


def _plain_relative(rel: str) -> bool:
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts and "." not in parts


def _temps(folder: Path) -> list[Path]:
    try:
        with os.scandir(folder) as entries:
            return [Path(e.path) for e in entries if e.name.startswith(TMP_PREFIX) and e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _recover(outdir: Path, folders: tuple[str, ...], *, dry: bool) -> Recovery:
    journal = _read_journal(outdir) if outdir.is_dir() else None
    renames = journal["renames"] if journal else []
    removes = journal["removes"] if journal else []
    dirs = {outdir} | {outdir / sub for sub in folders} | {(outdir / final).parent for _, final in renames}
    if dry:
        committed = {os.path.normpath(outdir / tmp) for tmp, _ in renames}
        stale = [t for d in dirs for t in _temps(d) if os.path.normpath(t) not in committed]
        return Recovery(pending=journal is not None, stale=len(stale))
    rec = Recovery()
    try:
        for tmp, final in renames:  # roll forward: the journal is the commit point
            if os.path.lexists(outdir / tmp):
                os.replace(outdir / tmp, outdir / final)
                rec.completed += 1
        for rel in removes:
            if os.path.isfile(outdir / rel) and not os.path.islink(outdir / rel):
                os.unlink(outdir / rel)
                rec.completed += 1
        if journal is not None:
            for folder in sorted(d for d in dirs if d.is_dir()):
                _fsync_dir(folder)
        if journal is not None:
            os.unlink(outdir / JOURNAL)
        for folder in sorted(dirs):  # what is left is from a render killed before its commit
            for tmp in _temps(folder):
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
                    rec.stale += 1
    except OSError as exc:
        raise OutputError(exc.filename or outdir, f"cannot complete an interrupted render: {_reason(exc)}") from None
    return rec


# --- writing --------------------------------------------------------------------------


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(2) (Linux 2.6.39, glibc 2.14), or None where the C library lacks it.
    Python's os module has sync() but no syncfs(); ctypes is imported only to write."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        func = libc.syncfs
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_int]
    return func


def _sync_all(outdir: Path, temps: list[str]) -> None:
    """Make every temporary file durable before the commit point, in one call.

    syncfs(2) writes out the whole file system the output folder is on: the new files'
    data and their directory entries. It returns an error since Linux 5.8 when writeback
    failed (earlier kernels report nothing), so its result is checked, and on any error
    each file is fsynced after all, which reports the failure with the file's name."""
    func = _syncfs()
    if func is not None:
        fd = os.open(outdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if func(fd) == 0:
                return
        finally:
            os.close(fd)
    for tmp in temps:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for folder in sorted({os.path.dirname(t) for t in temps}):
        _fsync_dir(folder)


# Temporary names: one random part per process and a counter, so 2,000 files cost one
# getrandom(2), not 2,000 (O_EXCL still refuses a name that exists). os.urandom, not
# secrets: the name needs no more, and secrets would load hmac and OpenSSL at every boot
# (jobgen-generator writes through here).
_TMP_NAMES = (f"{TMP_PREFIX}{token}{n:x}" for token in [os.urandom(TMP_TOKEN_HEX // 2).hex()] for n in itertools.count())


def _umask() -> int:
    # os.umask can only be read by setting it; set back at once (jobgen is one thread).
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write_temp(folder: str | Path, data: bytes, mode: int = FILE_MODE, *, sync: bool = True, umask: int | None = None) -> str:
    """A new temporary file beside its final name; fsynced unless the caller syncs a whole
    batch itself (``_sync_all``). Its mode is ``mode`` exactly, whatever the umask: it is
    created with it, and changed only when the umask (``umask``, read once per batch by
    the caller, or now) took bits away."""
    tmp = os.path.join(folder, next(_TMP_NAMES))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if mode & (_umask() if umask is None else umask):
            os.fchmod(fd, mode)
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def apply(outdir: Path, changes: list[Change]) -> None:
    """Carry out ``changes`` (from ``compare``, under ``locked``) as one transaction.
    Paths are str here, not Path: this runs once per file (2,000 for 1,000 jobs)."""
    writes = [c for c in changes if c.action in (CREATE, UPDATE)]
    removes = [c for c in changes if c.action == REMOVE]
    if not writes and not removes:
        return  # identical: no write, no fsync
    root = str(outdir)
    made: list[Path] = []
    temps: list[tuple[str, Change]] = []
    current = root
    umask = _umask()
    journal = os.path.join(root, JOURNAL)
    try:
        # Each folder is made once, not once per file: 2,000 files into one folder are
        # 2,000 creates, not 2,000 stat calls on its parents too.
        folders: dict[str, str] = {}
        renames = []
        prefix = os.path.join(root, "")  # root and one "/": os.path.join(root, rel) for each file, without the call
        for c in writes:
            current = prefix + c.path
            parent = c.path.rpartition("/")[0]
            if parent not in folders:
                folders[parent] = os.path.dirname(current)
                _make_dirs(Path(folders[parent]), made)
            tmp = _write_temp(folders[parent], c.new or b"", sync=False, umask=umask)
            temps.append((tmp, c))
            name = tmp.rpartition("/")[2]
            renames.append([f"{parent}/{name}" if parent else name, c.path])
        current = journal
        doc = {"renames": renames, "removes": [c.path for c in removes]}
        journal_tmp = _write_temp(root, json.dumps(doc).encode(), 0o600, sync=False)
        temps.append((journal_tmp, Change(JOURNAL, CREATE, None, None)))
        current = root
        _sync_all(outdir, [t for t, _ in temps])
        touched = {root} | set(folders.values()) | {os.path.dirname(prefix + c.path) for c in removes} | {str(d.parent) for d in made}
        current = journal
        os.replace(journal_tmp, journal)
        # Commit point. Only the output folder is fsynced here: if the machine stops now and
        # a temporary file's name in another folder is lost, completing the journal skips it
        # and the same render that completes it rewrites that file from the manifest.
        _fsync_dir(root)
    except OutputError:
        _discard(temps, made)
        raise
    except OSError as exc:
        _discard(temps, made)
        raise OutputError(exc.filename if isinstance(exc, FileExistsError) else current, _reason(exc)) from None
    done: list[Change] = []
    try:
        for tmp, c in temps[:-1]:
            current = prefix + c.path
            os.replace(tmp, current)
            done.append(c)
        for c in removes:
            current = prefix + c.path
            os.unlink(current)
            done.append(c)
        for folder in sorted(touched):
            current = folder
            _fsync_dir(folder)
    except OSError as exc:
        _roll_back(outdir, done, [t for t, c in temps[:-1] if c not in done])
        raise OutputError(current, _reason(exc)) from None
    os.unlink(journal)


def _discard(temps: list[tuple[str, Change]], made: list[Path]) -> None:
    for tmp, _ in temps:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _roll_back(outdir: Path, done: list[Change], left: list[str]) -> None:
    """Put back what a failed commit changed, from the bytes ``compare`` read. If that
    fails too, the journal and the remaining temporary files stay, and the next render
    completes the commit instead."""
    try:
        for c in reversed(done):
            path = outdir / c.path
            if c.old is None:
                os.unlink(path)
            else:
                os.replace(_write_temp(path.parent, c.old, c.old_mode or FILE_MODE), path)
    except OSError:
        return
    for tmp in left:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    with contextlib.suppress(OSError):
        os.unlink(outdir / JOURNAL)


def diff(change: Change) -> str:
    old = (change.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (change.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    before = f"a/{change.path}" if change.old is not None else "/dev/null"
    after = f"b/{change.path}" if change.new is not None else "/dev/null"
    import difflib  # --diff only

    return "".join(difflib.unified_diff(old, new, before, after))
