"""The render cache: what the last render into a folder produced, so that a render
with nothing changed does not compile again. The only code that touches the cache
folder; the output tree stays write.py's.

An entry is kept per output folder (named by the sha256 of its real path) and holds:

* ``key``: sha256 over everything the compile reads: jobgen's own code and templates
  (resources.code_digest: their names, sizes, mtimes and inodes, so an upgrade or an
  edit of a checkout is a miss), the manifests' paths as given and their bytes, the
  target, --holder, --layout, --package, --prune and --strict;
* per generated file its size and BLAKE2b digest, and what the render said besides the files
  (its warnings and notes, the target of each manifest, the layout's warning).

Beside the entries, the folder holds the records of render lines typer parsed before
(``recall_read``, ``recall_write``; cli/recall.py says what they hold), read and written
by the same rules.

A render whose key matches still reads every generated file and compares it with the
entry (write.unchanged): the entry stands in for the compile, never for looking at the
folder. Anything else (no entry, another key, a file edited, removed or added for
--prune, an interrupted render) compiles as if there were no cache.

The cache is data only (JSON, checked field by field, never evaluated) and is trusted
only if this user owns it and nobody else can write it, as ssh treats its files. The
folder is reached from / without following a symbolic link, and used only if it and
every folder above it belong to this user or root and nobody else can write them (a
root-owned sticky folder such as /tmp excepted); entries are read, written and trimmed
through its file descriptor, so a cache folder another user controls (a HOME kept by
`sudo -E`) can neither feed entries to root nor make root delete files elsewhere
(``problem`` says why, for render's note). Any problem with it is a miss, never an error. It lives in $JOBGEN_CACHE_DIR, else
$XDG_CACHE_HOME/jobgen, else ~/.cache/jobgen (the XDG base directory specification),
under render/; `jobgen render --no-cache` neither reads nor writes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import NamedTuple
from pathlib import Path

from jobgen.compiler import trust
from jobgen.compiler.trust import Untrusted
from jobgen.compiler.diagnostics import ERROR, NOTE, WARNING, Diagnostic, Pos
from jobgen.contract.digest import blake2b, sha256

FORMAT = 2  # of an entry; another format is a miss (1: sha256 of each file)
KEEP = 64  # entries kept, the most recently used: one per output folder rendered into
_SEVERITIES = (ERROR, WARNING, NOTE)


# A named tuple: a frozen dataclass executes six generated methods when it is defined,
# at every start of every render.
class Entry(NamedTuple):
    key: str
    files: dict[str, tuple[int, str]]  # path in the output folder -> digest(): (size, BLAKE2b-256 hex)
    diagnostics: tuple[Diagnostic, ...]
    targets: tuple[str, ...]  # Target.describe() of each manifest, in the order given
    warning: str | None  # layout.unread_tmpfiles


def folder() -> Path | None:
    base = os.environ.get("JOBGEN_CACHE_DIR")
    if base:
        return Path(base) / "render"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the specification: a relative path is ignored
        return Path(xdg) / "jobgen" / "render"
    home = os.environ.get("HOME")
    return Path(home) / ".cache" / "jobgen" / "render" if home and os.path.isabs(home) else None


def digest(data: bytes) -> tuple[int, str]:
    """A generated file as an entry records it: its size and its BLAKE2b-256 digest."""
    return len(data), blake2b(data, digest_size=32).hexdigest()


def key(code: str, manifests: list[tuple[str, bytes]], options: dict[str, object]) -> str:
    doc = {
        "format": FORMAT,
        "code": code,
        "options": options,
        "manifests": [[path, sha256(data).hexdigest()] for path, data in manifests],
    }
    return sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _entry_name(output: Path) -> str:
    return sha256(os.fsencode(os.path.realpath(output))).hexdigest()[:32] + ".json"


def _trusted(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_folder(where: Path, create: bool) -> int:
    """The cache folder's descriptor, by the rule both caches share (compiler/trust.py)."""
    return trust.open_folder(str(where), create)


def problem() -> str | None:
    """Why the cache folder will not be used, or None (fine, or not there yet: a render
    makes it). For the one note `jobgen render` prints instead of using it."""
    where = folder()
    if where is None:
        return None
    try:
        os.close(_open_folder(where, create=False))
    except Untrusted as exc:
        return str(exc)
    except OSError:
        return None  # missing or unreadable: a miss, and store says nothing either
    return None


def lookup(output: Path, wanted: str) -> Entry | None:
    """The entry for ``output`` if its key is ``wanted`` and it can be trusted, else None."""
    doc = _read(_entry_name(output))
    try:
        entry = None if doc is None else _parse(doc)
    except (ValueError, TypeError, KeyError, AttributeError):  # any entry not as store writes it
        return None
    return entry if entry is not None and entry.key == wanted else None


def _read(name: str) -> object | None:
    """The JSON document in the cache folder's file ``name``, if the folder and the file
    can be trusted (``_trusted``), marked as the most recently used (kept by the trimming);
    None if there is none, or it cannot be read or trusted."""
    where = folder()
    if where is None:
        return None
    try:
        dir_fd = _open_folder(where, create=False)
    except (OSError, Untrusted):
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        with os.fdopen(fd, "rb") as fh:
            if not _trusted(os.fstat(fh.fileno())):
                return None
            doc = json.loads(fh.read())
            with contextlib.suppress(OSError):
                os.utime(fh.fileno())
        return doc
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
        return None
    finally:
        os.close(dir_fd)


# A command line's recorded parse (cli/recall.py), named by its key: data only, trusted as
# an entry is, kept KEEP of them the same way.
_RECALL = ".argv"


def recall_read(key_: str) -> dict | None:
    """The record named ``key_`` (a hex digest), if there is one that can be trusted."""
    doc = _read(key_ + _RECALL)
    return doc if isinstance(doc, dict) else None


def recall_write(key_: str, doc: dict) -> None:
    """Write the record ``key_`` (atomically), then keep the KEEP most recently used.
    Failing to is not an error."""
    _write(key_ + _RECALL, json.dumps(doc, sort_keys=True).encode("utf-8", "surrogateescape"), _RECALL)


def _parse(doc: object) -> Entry | None:
    """An entry from JSON, or None if any field is not what store writes."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("key"), str):
        return None
    files: dict[str, tuple[int, str]] = {}
    for rel, value in doc["files"].items():
        size, sha = value
        if not (isinstance(rel, str) and isinstance(size, int) and isinstance(sha, str)):
            return None
        files[rel] = (size, sha)
    diags = []
    for d in doc["diagnostics"]:
        fields = (d["file"], d["line"], d["col"], d["severity"], d["message"])
        if not (isinstance(d["file"], str) and isinstance(d["line"], int) and isinstance(d["col"], int)
                and d["severity"] in _SEVERITIES and isinstance(d["message"], str)):
            return None
        diags.append(Diagnostic(Pos(*fields[:3]), fields[3], fields[4]))
    targets = doc["targets"]
    warning = doc["warning"]
    if not (isinstance(targets, list) and all(isinstance(t, str) for t in targets)) or not (warning is None or isinstance(warning, str)):
        return None
    return Entry(doc["key"], files, tuple(diags), tuple(targets), warning)


def store(output: Path, entry: Entry) -> None:
    """Write ``entry`` for ``output`` (atomically: a reader sees the old entry or the new),
    then keep only the KEEP most recently used entries. Failing to is not an error."""
    doc = {
        "format": FORMAT,
        "key": entry.key,
        "files": {rel: list(value) for rel, value in sorted(entry.files.items())},
        "diagnostics": [d.as_json() for d in entry.diagnostics],
        "targets": list(entry.targets),
        "warning": entry.warning,
    }
    _write(_entry_name(output), json.dumps(doc, sort_keys=True).encode(), ".json")


def _write(name: str, data: bytes, suffix: str) -> None:
    """``data`` as the file ``name`` of the cache folder (atomically: a reader sees the old
    file or the new), then the trimming of the files named ``*suffix``."""
    where = folder()
    if where is None:
        return
    try:
        dir_fd = _open_folder(where, create=True)
    except (OSError, Untrusted):
        return
    tmp = f".tmp.{os.urandom(6).hex()}"  # getrandom(2), as secrets would
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        _trim(dir_fd, suffix)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def _trim(dir_fd: int, suffix: str = ".json") -> None:
    """Remove all but the KEEP most recently used entries (or recall records: ``suffix``):
    only regular files named like one, and only in the folder ``dir_fd`` is (unlinkat:
    never through a link)."""
    with os.scandir(dir_fd) as it:
        entries = [(e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in it if e.name.endswith(suffix) and e.is_file(follow_symlinks=False)]
    for _, name in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
