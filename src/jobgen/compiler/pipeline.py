"""load -> validate -> plan -> render for one manifest: the pure core in one call.

jobgen.cli and the tests use this; nothing here prints, exits or writes.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobgen.compiler import limits, load, plan, render, validate
from jobgen.compiler.diagnostics import Diagnostic
from jobgen.compiler.target import Target


@dataclass(frozen=True)
class Result:
    plan: plan.Plan
    files: dict[str, bytes]
    diagnostics: tuple[Diagnostic, ...]  # warnings and notes; errors raise ManifestError


def build(path: str, target: Target | None = None, holder: str = plan.DEFAULT_HOLDER, text: str | None = None, data: bytes | None = None) -> Result:
    """``text`` or ``data`` (the file's bytes, load.read_file): the manifest already read."""
    if text is not None:
        tree = load.load_text(text, path)
    else:
        tree = load.load_bytes(load.read_file(path) if data is None else data, path)
    manifest, warnings = validate.validate(tree, path, target)
    the_plan = plan.plan(manifest, holder=holder, tmpfiles_name=limits.tmpfiles_name(path))
    return Result(the_plan, render.render(the_plan), tuple(sorted(set(warnings) | set(the_plan.notes))))
