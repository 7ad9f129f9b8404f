"""Where jobgen's own files are: the templates, and everything that decides its output.

Kept apart from render.py so that the render cache (cache.py) can name jobgen's code
without importing jinja2.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from functools import lru_cache
from pathlib import Path

from jobgen.contract.digest import sha256

_PACKAGE = Path(__file__).resolve().parents[1]


def template_dir() -> Path:
    # In a wheel the templates sit inside the package (pyproject force-include); an
    # editable install imports from src/, next to the repository's top-level templates/.
    packaged = _PACKAGE / "templates"
    if packaged.is_dir():
        return packaged
    return _PACKAGE.parents[1] / "templates"


def compiled_dir() -> Path:
    """templates/ compiled by the wheel's build (precompiled.py); absent in a checkout."""
    return _PACKAGE / "_templates"


# What else decides the output: the parser, the template engine, the version
# specifiers, and the interpreter. Each is named by where it is installed and the size and
# mtime of its __init__.py (found without importing it): an upgrade rewrites that file.
_DEPENDENCIES = ("yaml", "jinja2", "packaging")


def _dependency_marks() -> list[str]:
    marks = [sys.version]
    for name in _DEPENDENCIES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin is None:
            marks.append(f"{name}: not found")
            continue
        st = os.stat(origin)
        marks.append(f"{name}: {origin} {st.st_size} {st.st_mtime_ns}")
    return marks


def _marks(top: str, out: list[str]) -> None:
    """name, size, mtime and inode of every *.py and *.j2 file below ``top``, in name order."""
    for entry in sorted(os.scandir(top), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            if entry.name != "__pycache__":  # written by imports; the sources decide
                _marks(entry.path, out)
        elif entry.name.endswith((".py", ".j2")):
            st = entry.stat()
            out.append(f"{entry.path}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}")


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the name, size, mtime and inode of jobgen's Python sources and templates
    (as host/gencache.py marks them for the generator's cache), and the marks of what else
    decides its output (_DEPENDENCIES): changes with any edit or upgrade, also one that
    keeps the version number (a development checkout). Read with os.stat, not by reading
    the files: reading and hashing some 1 MB cost every render about 5 ms."""
    h = sha256()
    marks = _dependency_marks()
    _marks(str(_PACKAGE), marks)
    if not str(template_dir()).startswith(str(_PACKAGE) + os.sep):
        _marks(str(template_dir()), marks)  # an editable install: the repository's templates/
    for mark in marks:
        h.update(mark.encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()
