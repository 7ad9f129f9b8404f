"""load -> validate -> plan -> render for one manifest: the pure core in one call.

jobgen render, jobgen apply, jobgen-generator and the tests use this; nothing here
prints, exits or writes. Manifests compiled together follow compiler/merge.py's rules.
"""

from __future__ import annotations

from typing import NamedTuple

from jobgen.compiler import load, plan, render, validate
from jobgen.compiler.diagnostics import Diagnostic
from jobgen.compiler.model import Manifest
from jobgen.compiler.target import Target


class Result(NamedTuple):  # a named tuple: no generated dataclass methods to execute at start
    plan: plan.Plan
    files: dict[str, bytes]
    diagnostics: tuple[Diagnostic, ...]  # warnings and notes; errors raise ManifestError
    manifest: Manifest | None = None  # the typed manifest the plan was made from


def build(path: str, target: Target | None = None, holder: str = plan.DEFAULT_HOLDER, text: str | None = None,
          data: bytes | None = None, *, running: Target | None = None) -> Result:
    """``text`` or ``data`` (the file's bytes, load.read_file): the manifest already read.
    ``running``: the systemd that will read the units (jobgen-generator), the target
    unless ``target`` or the manifest names one."""
    if text is not None:
        tree = load.load_text(text, path)
    else:
        tree = load.load_bytes(load.read_file(path) if data is None else data, path)
    manifest, warnings = validate.validate(tree, path, target)
    if manifest.target is None and running is not None:
        manifest = manifest._replace(target=running)
    the_plan = plan.plan(manifest, holder=holder)
    return Result(the_plan, render.render(the_plan), tuple(sorted(set(warnings) | set(the_plan.notes))), manifest)

