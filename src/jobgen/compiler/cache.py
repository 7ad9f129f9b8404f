"""The render cache: what the last render into a folder produced, so that a render
with nothing changed does not compile again. The only code that touches the cache
folder; the output tree stays write.py's.

An entry is kept per output folder (named by the sha256 of its real path) and holds:

* ``key``: sha256 over everything the compile reads: jobgen's own code and templates
  (resources.code_digest, so an upgrade or an edit of a checkout is a miss), the
  manifests' paths as given and their bytes, the target, --holder, --layout,
  --package, --prune and --strict;
* per generated file its size and sha256, and what the render said besides the files
  (its warnings and notes, the target of each manifest, the layout's warning).

A render whose key matches still reads every generated file and compares it with the
entry (write.unchanged): the entry stands in for the compile, never for looking at the
folder. Anything else (no entry, another key, a file edited, removed or added for
--prune, an interrupted render) compiles as if there were no cache.

The cache is data only (JSON, checked field by field, never evaluated) and is trusted
only if this user owns it and nobody else can write it, as ssh treats its files; any
problem with it is a miss, never an error. It lives in $JOBGEN_CACHE_DIR, else
$XDG_CACHE_HOME/jobgen, else ~/.cache/jobgen (the XDG base directory specification),
under render/; `jobgen render --no-cache` neither reads nor writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from jobgen.compiler.diagnostics import ERROR, NOTE, WARNING, Diagnostic, Pos

FORMAT = 1  # of an entry; another format is a miss
KEEP = 64  # entries kept, the most recently used: one per output folder rendered into
_SEVERITIES = (ERROR, WARNING, NOTE)


@dataclass(frozen=True)
class Entry:
    key: str
    files: dict[str, tuple[int, str]]  # path in the output folder -> (size, sha256 hex)
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
    return len(data), hashlib.sha256(data).hexdigest()


def key(code: str, manifests: list[tuple[str, bytes]], options: dict[str, object]) -> str:
    doc = {
        "format": FORMAT,
        "code": code,
        "options": options,
        "manifests": [[path, hashlib.sha256(data).hexdigest()] for path, data in manifests],
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def _entry_path(where: Path, output: Path) -> Path:
    return where / (hashlib.sha256(os.fsencode(os.path.realpath(output))).hexdigest()[:32] + ".json")


def _trusted(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def lookup(output: Path, wanted: str) -> Entry | None:
    """The entry for ``output`` if its key is ``wanted`` and it can be trusted, else None."""
    where = folder()
    if where is None:
        return None
    try:
        if not _trusted(os.stat(where)):
            return None
        path = _entry_path(where, output)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not _trusted(os.fstat(fh.fileno())):
                return None
            doc = json.loads(fh.read())
        entry = _parse(doc)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if entry is None or entry.key != wanted:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # most recently used: kept by the trimming in store
    return entry


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
    where = folder()
    if where is None:
        return
    doc = {
        "format": FORMAT,
        "key": entry.key,
        "files": {rel: list(value) for rel, value in sorted(entry.files.items())},
        "diagnostics": [d.as_json() for d in entry.diagnostics],
        "targets": list(entry.targets),
        "warning": entry.warning,
    }
    tmp = where / f".tmp.{secrets.token_hex(6)}"
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(os.stat(where)):
            return
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(json.dumps(doc, sort_keys=True).encode())
        os.replace(tmp, _entry_path(where, output))
        _trim(where)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _trim(where: Path) -> None:
    with os.scandir(where) as it:
        entries = [(e.stat(follow_symlinks=False).st_mtime_ns, e.path) for e in it if e.name.endswith(".json")]
    for _, path in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(path)
