"""templates/ compiled ahead of time (compiler/precompiled.py, built into the wheel by
hatch_build.py) and run without jinja2: the compiled modules render the very bytes
templates/ renders through jinja2 (every golden file), are never used unless they were
compiled from these templates, and the build refuses a module that calls anything the
jinja2-free runtime lacks. tests/test_packaging.py builds the real wheel and renders from
it with jinja2 made unimportable."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import jinja2
import pytest

from jobgen.compiler import jinja_templates, precompiled, render
from jobgen.compiler.resources import template_dir

from test_golden import CASES, GOLDEN, golden_tree, rendered


def _forget() -> None:
    render._templates.cache_clear()
    render._template.cache_clear()


@pytest.fixture
def compiled(tmp_path: Path, monkeypatch) -> Path:
    """The templates compiled as the wheel's build compiles them, in a folder render uses."""
    out = tmp_path / precompiled.FOLDER
    precompiled.build(template_dir(), out)
    monkeypatch.setattr(render, "compiled_dir", lambda: out)
    _forget()
    yield out
    _forget()


def test_every_template_is_compiled_with_its_stamp(compiled: Path) -> None:
    names = precompiled.build(template_dir(), compiled)
    assert sorted(p.name for p in template_dir().glob("*.j2")) == sorted(names)
    assert sorted(p.name for p in compiled.glob("tmpl_*.py")) == sorted(precompiled.module_filename(n) for n in names)
    assert (compiled / precompiled.STAMP).read_text() == f"{precompiled.stamp(template_dir())}\njinja2 {jinja2.__version__}\n"


def test_a_module_is_named_as_jinja2_names_it() -> None:
    for name in ("unit.j2", "service.j2", "x/ü.j2"):
        assert precompiled.module_filename(name) == jinja2.ModuleLoader.get_module_filename(name)


def test_the_compiled_templates_render_every_golden_file_byte_for_byte(compiled: Path) -> None:
    assert isinstance(render._templates(), precompiled.Templates)
    for manifest, systemd in CASES:
        assert rendered(manifest, systemd) == golden_tree(GOLDEN / manifest.stem / systemd), f"{manifest.name} for {systemd}"


def test_the_import_line_becomes_a_comment_and_the_line_numbers_stay(compiled: Path) -> None:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir())), **precompiled.options(jinja2))
    env.filters["value"] = lambda value, *args: value
    source = env.compile(env.loader.get_source(env, "unit.j2")[0], "unit.j2", "unit.j2", raw=True, defer_init=True)
    written = (compiled / precompiled.module_filename("unit.j2")).read_text()
    assert written.splitlines()[0] == f"# {source.splitlines()[0]}  (names provided by jobgen.compiler.precompiled)"
    assert written.splitlines()[1:] == source.splitlines()[1:]


def test_an_edited_template_is_rendered_from_its_text_not_loaded_stale(tmp_path: Path, compiled: Path) -> None:
    templates = tmp_path / "templates"
    shutil.copytree(template_dir(), templates)
    assert isinstance(precompiled.load(templates, compiled, {}), precompiled.Templates)
    unit = templates / "unit.j2"
    unit.write_text(unit.read_text().replace("# `jobgen render`.", "# `jobgen render`, edited."))
    assert precompiled.load(templates, compiled, {}) is None
    (templates / "extra.j2").write_text("x\n")  # a template added: not what was compiled either
    unit.write_text((template_dir() / "unit.j2").read_text())
    assert precompiled.load(templates, compiled, {}) is None


def test_another_jinja2_at_run_time_changes_nothing(compiled: Path, monkeypatch) -> None:
    # The modules run without jinja2: which jinja2 is installed beside them does not matter.
    monkeypatch.setattr(jinja2, "__version__", "3.1.0-other")
    assert isinstance(precompiled.load(template_dir(), compiled, {}), precompiled.Templates)


@pytest.mark.parametrize("stamp", [None, "", "0" * 64, "\xff"])
def test_a_missing_or_foreign_stamp_means_jinja2_from_templates(compiled: Path, stamp) -> None:
    if stamp is None:
        (compiled / precompiled.STAMP).unlink()
    else:
        (compiled / precompiled.STAMP).write_text(stamp, encoding="latin-1")
    assert precompiled.load(template_dir(), compiled, {}) is None
    _forget()
    assert isinstance(render._templates(), jinja2.Environment)


def test_a_checkout_has_no_compiled_templates_and_renders_through_jinja2() -> None:
    # An editable install or a source checkout: nothing in src/jobgen/_templates.
    _forget()
    assert not render.compiled_dir().exists()
    assert isinstance(render._templates(), jinja2.Environment)


def test_the_filters_compiled_against_are_the_ones_render_defines(compiled: Path) -> None:
    assert set(precompiled.FILTER_NAMES) == set(render._templates().filters)


# What the build refuses: jinja2 output that calls what precompiled.Templates does not have.
# Each is a template feature jobgen's templates do not use; a jinja2 that compiled them
# differently would be refused the same way, and the wheel would render through jinja2.
# (The line is that of jinja2's output, which changes between jinja2 releases.)
@pytest.mark.parametrize(
    ("template", "refused"),
    [
        ("{% for x in xs %}{{ loop.index }}{% endfor %}", "uses jinja2.runtime.LoopContext"),
        ("{% macro m() %}x{% endmacro %}{{ m() }}", "uses context.vars"),
        ("{% include 'other.j2' %}", "uses context.get_all"),
        ("{% set ns = namespace(a=1) %}{{ ns.a }}", "uses context.call"),
        ("{{ 'a' ~ x }}", "uses jinja2.runtime.str_join"),
        ("{{ x['z'] }}", "uses environment.getitem"),
        ("{{ x | upper }}", "uses the filter 'upper', which render.py does not define"),
    ],
)
def test_the_build_refuses_modules_that_call_what_the_runtime_lacks(tmp_path: Path, template: str, refused: str) -> None:
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "t.j2").write_text(template)
    (templates / "other.j2").write_text("o")
    out = tmp_path / "out"
    with pytest.raises(precompiled.Unsupported, match=f"^t.j2: line [0-9]+ {re.escape(refused)}$"):
        precompiled.build(templates, out)
    assert not out.exists()  # nothing written: the wheel then renders through jinja2


def test_a_module_that_does_not_start_with_the_runtime_import_is_refused() -> None:
    with pytest.raises(precompiled.Unsupported, match=r"^t.j2: the compiled module does not start with 'from jinja2.runtime import '$"):
        precompiled.check("import os\ndef root(context): yield ''\n", "t.j2")
    with pytest.raises(precompiled.Unsupported, match=r"^t.j2: line 2 imports$"):
        precompiled.check("from jinja2.runtime import missing\nimport os\n", "t.j2")
    with pytest.raises(precompiled.Unsupported, match=r"^t.j2: line 2 uses context.call$"):
        precompiled.check("from jinja2.runtime import missing\ncontext.call(missing)\n", "t.j2")


def test_a_template_sees_only_what_render_passes_and_an_unknown_name_is_an_error(compiled: Path, monkeypatch) -> None:
    # render_file gives a template a context of its own names only (not jinja2's globals):
    # a name it does not pass must fail loudly, never render as empty text. Both ways.
    from jobgen.compiler.plan import UnitFile

    unit = UnitFile("a.service", "service")
    with_header = {"header": "# h", "target": "t"}
    assert render.render_file(None, unit, with_header).startswith(b"# h\n# `jobgen render`. Target: t.\n# ")
    with pytest.raises(precompiled.UndefinedError, match="^'header' is undefined$"):
        render.render_file(None, unit, {"target": "t"})
    env = jinja_templates.environment(template_dir(), {"value": render._value})
    with monkeypatch.context() as m:
        m.setattr(render, "_template", lambda kind: env.from_string("{{ header }} {{ unit.filename }} {{ range }}"))
        with pytest.raises(jinja2.UndefinedError, match="'range' is undefined"):
            render.render_file(None, unit, {"header": "# h"})
        m.setattr(render, "_template", lambda kind: env.from_string("{{ header }} {{ unit.filename }}"))
        assert render.render_file(None, unit, {"header": "# h"}) == b"# h a.service\n"
