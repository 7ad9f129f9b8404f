"""The wheel's build hook: templates/ compiled to Python into jobgen/_templates/
(src/jobgen/compiler/precompiled.py says why, and when render.py uses them).

Without jinja2 in the build environment (a distribution's build that does not install
it), or with a jinja2 whose compiled code calls more than precompiled.py provides, the
wheel has no compiled templates and jobgen renders through jinja2 from templates/; an
editable install has none either.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

ROOT = Path(__file__).resolve().parent


def _precompiled():
    # By its path: jobgen itself is not importable while its wheel is being built.
    spec = importlib.util.spec_from_file_location("_jobgen_precompiled", ROOT / "src" / "jobgen" / "compiler" / "precompiled.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CustomBuildHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if importlib.util.find_spec("jinja2") is None:
            print("jobgen: jinja2 is not installed here: the wheel carries no precompiled templates", file=sys.stderr)
            return
        precompiled = _precompiled()
        self._out = tempfile.TemporaryDirectory(prefix="jobgen-templates-")
        out = Path(self._out.name)
        try:
            precompiled.build(ROOT / "templates", out)
        except precompiled.Unsupported as exc:  # this jinja2 compiles to something jobgen cannot run alone
            print(f"jobgen: the wheel carries no precompiled templates: {exc}", file=sys.stderr)
            self._out.cleanup()
            self._out = None
            return
        build_data.setdefault("force_include", {})[str(out)] = f"jobgen/{precompiled.FOLDER}"

    def finalize(self, version: str, build_data: dict, artifact_path: str) -> None:
        if getattr(self, "_out", None) is not None:
            self._out.cleanup()
