"""load -> validate -> plan -> render for one manifest: the pure core in one call.

jobgen.cli and the tests use this; nothing here prints, exits or writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jobgen.compiler import load, plan, render, validate
from jobgen.compiler.diagnostics import Diagnostic
from jobgen.compiler.target import Target


@dataclass(frozen=True)
class Result:
    plan: plan.Plan
    files: dict[str, bytes]
    diagnostics: tuple[Diagnostic, ...]  # warnings and notes; errors raise ManifestError


def build(path: str, target: Target | None = None, holder: str = plan.DEFAULT_HOLDER, text: str | None = None) -> Result:
    tree = load.load_text(text, path) if text is not None else load.load_file(path)
    manifest, warnings = validate.validate(tree, path, target)
    stem = Path(path).stem
    the_plan = plan.plan(manifest, holder=holder, tmpfiles_name=f"jobgen-{stem}.conf")
    return Result(the_plan, render.render(the_plan), tuple(sorted(set(warnings) | set(the_plan.notes))))
