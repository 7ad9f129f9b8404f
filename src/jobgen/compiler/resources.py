"""Where jobgen's own files are: the templates, and everything that decides its output.

Kept apart from render.py so that the render cache (cache.py) can name jobgen's code
without importing jinja2.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]


def template_dir() -> Path:
    # In a wheel the templates sit inside the package (pyproject force-include); an
    # editable install imports from src/, next to the repository's top-level templates/.
    packaged = _PACKAGE / "templates"
    if packaged.is_dir():
        return packaged
    return _PACKAGE.parents[1] / "templates"


@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over jobgen's Python sources and templates, names and bytes: changes with
    any edit or upgrade, also one that keeps the version number (a development checkout)."""
    h = hashlib.sha256()
    files = [(f"py/{p.relative_to(_PACKAGE)}", p) for p in _PACKAGE.rglob("*.py")]
    files += [(f"templates/{p.name}", p) for p in template_dir().glob("*.j2")]
    for name, path in sorted(files):
        data = path.read_bytes()
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()
