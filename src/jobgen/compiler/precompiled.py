"""templates/ compiled to Python ahead of time, when the wheel is built (hatch_build.py).

jinja2 compiles a template's text to a Python module before its first render; a render
of 1,000 jobs paid that (some 7 ms for unit.j2, service.j2 and timer.j2) in every
process. The wheel carries the compiled modules in jobgen/_templates/ beside the
templates, with a stamp: the sha256 of the templates' names and bytes and the jinja2
version that compiled them. render.py loads them (jinja2.ModuleLoader) only when the
stamp matches the templates it would otherwise compile and the jinja2 it runs with;
anything else (a source checkout, an editable install, a wheel built without jinja2, an
edited template, another jinja2) compiles templates/ as before. templates/ stays the one
source: the modules are made from it, never edited, and never used without matching it.

Imports nothing of jobgen and jinja2 only inside functions: the build hook loads this
file by its path, before jobgen is installed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

FOLDER = "_templates"  # jobgen/_templates/ in the wheel
STAMP = "SOURCES"  # in FOLDER: what the modules were compiled from (stamp())
# The filters templates/ uses (render.py defines them): compiling checks the names only.
FILTER_NAMES = ("value",)


def options(jinja2) -> dict:
    """The Environment options render.py renders with; the compiled code depends on them."""
    return {
        "autoescape": False,  # unit files are not HTML; escape.py does systemd's escaping
        "undefined": jinja2.StrictUndefined,
        "keep_trailing_newline": True,
        # Templates are read and compiled once per process: with auto_reload jinja2 would
        # stat each template (and the layout it extends) again for every file rendered.
        "auto_reload": False,
    }


def stamp(templates: Path, jinja2_version: str) -> str:
    """sha256 over the jinja2 version and every template's name and bytes."""
    h = hashlib.sha256(f"jinja2 {jinja2_version}\0".encode())
    for path in sorted(templates.glob("*.j2")):
        data = path.read_bytes()
        h.update(f"{path.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def build(templates: Path, out: Path) -> list[str]:
    """Compile every template in ``templates`` into ``out`` with its stamp; the names compiled."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), **options(jinja2))
    env.filters.update(dict.fromkeys(FILTER_NAMES, lambda value, *args: value))
    out.mkdir(parents=True, exist_ok=True)
    names = env.list_templates(extensions=["j2"])
    for name in names:
        # raw, defer_init: as Environment.compile_templates writes them for ModuleLoader
        code = env.compile(env.loader.get_source(env, name)[0], name, name, raw=True, defer_init=True)
        (out / jinja2.ModuleLoader.get_module_filename(name)).write_text(code, encoding="utf-8")
    (out / STAMP).write_text(stamp(templates, jinja2.__version__) + "\n", encoding="ascii")
    return names


def loader(templates: Path, compiled: Path):
    """A jinja2.ModuleLoader of ``compiled`` if its stamp is that of ``templates`` and of
    this jinja2, else None (compile the templates)."""
    import jinja2

    try:
        recorded = (compiled / STAMP).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if recorded != stamp(templates, jinja2.__version__):
        return None
    return jinja2.ModuleLoader(str(compiled))
