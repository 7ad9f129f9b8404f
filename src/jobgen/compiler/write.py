"""Stage 5, the only code that touches the output tree.

``compare`` reads what is there and says, per file, create / update / identical /
remove; ``apply`` carries the changes out, each file atomically (a temporary file in
the same folder, fsync, rename), so a reader or a crash never sees half a unit. With
``prune`` a file is removed only if its first line is jobgen's header naming one of
the manifests being rendered: files jobgen did not write, or wrote from another
manifest, are never touched.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from jobgen.compiler.render import HEADER_MARK

CREATE, UPDATE, IDENTICAL, REMOVE = "create", "update", "identical", "remove"
# Where jobgen writes inside the output folder; prune looks nowhere else.
_SUBDIRS = ("", "tmpfiles.d")


@dataclass(frozen=True)
class Change:
    path: str  # relative to the output folder
    action: str
    old: bytes | None
    new: bytes | None

    @property
    def changes_anything(self) -> bool:
        return self.action != IDENTICAL


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _owned_by(data: bytes, manifests: set[str]) -> bool:
    first = data.split(b"\n", 1)[0].decode("utf-8", "replace")
    if not first.startswith(HEADER_MARK):
        return False
    return first[len(HEADER_MARK):].split(". ", 1)[0] in manifests


def compare(outdir: Path, files: dict[str, bytes], prune_for: set[str] | None = None) -> list[Change]:
    changes = []
    for rel in sorted(files):
        old = _read(outdir / rel)
        action = CREATE if old is None else IDENTICAL if old == files[rel] else UPDATE
        changes.append(Change(rel, action, old, files[rel]))
    if prune_for:
        for sub in _SUBDIRS:
            folder = outdir / sub
            if not folder.is_dir():
                continue
            for entry in sorted(folder.iterdir()):
                rel = str(entry.relative_to(outdir))
                if rel in files or not entry.is_file() or entry.is_symlink():
                    continue
                data = entry.read_bytes()
                if _owned_by(data, prune_for):
                    changes.append(Change(rel, REMOVE, data, None))
    return sorted(changes, key=lambda c: c.path)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".jobgen-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        # Unit files are read by systemd (root) and by operators: 0644 like packaged units.
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def apply(outdir: Path, changes: list[Change]) -> None:
    for change in changes:
        target = outdir / change.path
        if change.action in (CREATE, UPDATE):
            _atomic_write(target, change.new or b"")
        elif change.action == REMOVE:
            target.unlink()
            _fsync_dir(target.parent)


def diff(change: Change) -> str:
    old = (change.old or b"").decode("utf-8", "replace").splitlines(keepends=True)
    new = (change.new or b"").decode("utf-8", "replace").splitlines(keepends=True)
    before = f"a/{change.path}" if change.old is not None else "/dev/null"
    after = f"b/{change.path}" if change.new is not None else "/dev/null"
    return "".join(difflib.unified_diff(old, new, before, after))
