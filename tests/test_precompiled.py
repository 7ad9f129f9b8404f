"""templates/ compiled ahead of time (compiler/precompiled.py, built into the wheel by
hatch_build.py): the compiled modules render the very bytes templates/ renders (every
golden file), and are never used unless they were compiled from these templates by this
jinja2. tests/test_packaging.py builds the real wheel and renders from it."""

from __future__ import annotations

import shutil
from pathlib import Path

import jinja2
import pytest

from jobgen.compiler import precompiled, render
from jobgen.compiler.resources import template_dir

from test_golden import CASES, GOLDEN, golden_tree, rendered


@pytest.fixture
def compiled(tmp_path: Path, monkeypatch) -> Path:
    """The templates compiled as the wheel's build compiles them, in a folder render uses."""
    out = tmp_path / precompiled.FOLDER
    precompiled.build(template_dir(), out)
    monkeypatch.setattr(render, "compiled_dir", lambda: out)
    render._environment.cache_clear()
    render._template.cache_clear()
    yield out
    render._environment.cache_clear()
    render._template.cache_clear()


def test_every_template_is_compiled_with_its_stamp(compiled: Path) -> None:
    assert sorted(p.name for p in template_dir().glob("*.j2")) == sorted(precompiled.build(template_dir(), compiled))
    assert (compiled / precompiled.STAMP).read_text().strip() == precompiled.stamp(template_dir(), jinja2.__version__)


def test_the_compiled_templates_render_every_golden_file_byte_for_byte(compiled: Path) -> None:
    assert isinstance(render._environment().loader, jinja2.ModuleLoader)
    for manifest, systemd in CASES:
        assert rendered(manifest, systemd) == golden_tree(GOLDEN / manifest.stem / systemd), f"{manifest.name} for {systemd}"


def test_an_edited_template_is_compiled_from_its_text_not_loaded_stale(tmp_path: Path, compiled: Path) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(template_dir(), templates)
    assert isinstance(precompiled.loader(templates, compiled), jinja2.ModuleLoader)
    unit = templates / "unit.j2"
    unit.write_text(unit.read_text().replace("# `jobgen render`.", "# `jobgen render`, edited."))
    assert precompiled.loader(templates, compiled) is None
    (templates / "extra.j2").write_text("x\n")  # a template added: not what was compiled either
    unit.write_text((template_dir() / "unit.j2").read_text())
    assert precompiled.loader(templates, compiled) is None


def test_modules_compiled_by_another_jinja2_are_not_used(compiled: Path, monkeypatch) -> None:
    monkeypatch.setattr(jinja2, "__version__", "3.1.0-other")
    assert precompiled.loader(template_dir(), compiled) is None
    render._environment.cache_clear()
    assert isinstance(render._environment().loader, jinja2.FileSystemLoader)


@pytest.mark.parametrize("stamp", [None, "", "0" * 64, "\xff"])
def test_a_missing_or_foreign_stamp_means_compiling(compiled: Path, stamp) -> None:
    if stamp is None:
        (compiled / precompiled.STAMP).unlink()
    else:
        (compiled / precompiled.STAMP).write_text(stamp, encoding="latin-1")
    assert precompiled.loader(template_dir(), compiled) is None


def test_a_checkout_has_no_compiled_templates_and_compiles_them() -> None:
    # An editable install or a source checkout: nothing in src/jobgen/_templates.
    render._environment.cache_clear()
    assert not render.compiled_dir().exists()
    assert isinstance(render._environment().loader, jinja2.FileSystemLoader)


def test_the_filters_compiled_against_are_the_ones_render_defines() -> None:
    assert set(precompiled.FILTER_NAMES) <= set(render._environment().filters)


def test_a_template_sees_only_what_render_passes_and_an_unknown_name_is_an_error(monkeypatch) -> None:
    # render_file gives a template a context of its own names only (not jinja2's globals):
    # a name it does not pass, `range` here, must fail loudly, never render as empty text.
    from jobgen.compiler.plan import UnitFile

    env = render._environment()
    monkeypatch.setattr(render, "_template", lambda kind: env.from_string("{{ header }} {{ unit.filename }} {{ range }}"))
    unit = UnitFile("a.service", "service")
    with pytest.raises(jinja2.UndefinedError, match="'range' is undefined"):
        render.render_file(None, unit, {"header": "# h"})
    monkeypatch.setattr(render, "_template", lambda kind: env.from_string("{{ header }} {{ unit.filename }}"))
    assert render.render_file(None, unit, {"header": "# h"}) == b"# h a.service\n"
