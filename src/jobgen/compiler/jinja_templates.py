"""templates/ rendered through jinja2, compiled from their text once per process: how
render.py renders where the wheel's precompiled modules are absent or not these
templates' (a source checkout, an editable install, an edited template; precompiled.py).
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from jobgen.compiler import precompiled


class _Environment(jinja2.Environment):
    """Templates kept by name for the process: every service and timer extends unit.j2,
    and jinja2 looked that layout up again for each file rendered (a weak reference and
    its locked LRU cache, in Python). Nothing is reloaded here anyway (auto_reload off)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self._kept: dict[str, jinja2.Template] = {}

    def get_template(self, name, parent=None, globals=None):  # noqa: A002 - jinja2's signature
        if globals is not None or not isinstance(name, str):
            return super().get_template(name, parent, globals)
        if parent is not None:
            name = self.join_path(name, parent)
        template = self._kept.get(name)
        if template is None:
            template = self._kept[name] = super().get_template(name)
        return template


def environment(templates: Path, filters: dict) -> jinja2.Environment:
    env = _Environment(loader=jinja2.FileSystemLoader(str(templates)), **precompiled.options(jinja2))
    env.filters.update(filters)
    return env
