"""Stage 4: a Plan -> file names and bytes, through the jinja2 templates in templates/
(precompiled.py: compiled when the wheel is built, run without importing jinja2).

The templates decide layout (header, section order, comments); escaping happens here,
in the single ``value`` filter, by the rules in escape.py. Output is deterministic:
files sorted by name, no timestamps or host names, LF line endings, one final newline.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jobgen import __version__
from jobgen.compiler import escape, header, precompiled
from jobgen.compiler.plan import Env, Exec, Plan, Raw, UnitFile
from jobgen.compiler.resources import compiled_dir, template_dir

# The filter's answers: (section, directive and the value's own fields) -> the text.
_ESCAPED: dict[tuple, str] = {}
_ESCAPED_MAX = 4096  # then emptied: a bound on memory, not on correctness


def _value(value: Exec | Env | Raw, section: str, directive: str) -> str:
    """The text after ``directive=``, escaped by that directive's rules (escape.py).

    Cached: the values are frozen, and most recur in every job of a manifest (the
    outcome reporter, the overrun check, hardening), so each is escaped once per
    process, not once per unit. The key is made of the value's fields, not the value:
    an lru_cache keyed on the dataclass called its __hash__ and __eq__ in Python for
    every line of every unit, 45% of the time rendering 1,000 jobs took."""
    kind = type(value)
    if kind is Raw:
        key: tuple = (section, directive, value.text, value.specifiers)
    elif kind is Exec:
        key = (section, directive, value.argv, value.prefix, Exec)
    elif kind is Env:
        key = (section, directive, value.name, value.value, Env)
    else:
        return _escaped(value, section, directive)
    text = _ESCAPED.get(key)
    if text is None:
        text = _escaped(value, section, directive)
        if len(_ESCAPED) >= _ESCAPED_MAX:
            _ESCAPED.clear()
        _ESCAPED[key] = text
    return text


def _escaped(value: Exec | Env | Raw, section: str, directive: str) -> str:
    if isinstance(value, Exec):
        escape.require_expansion(section, directive)
        return escape.exec_line(value.argv, value.prefix)
    if isinstance(value, Env):
        escape.require_expansion(section, directive)
        return escape.env_assignment(value.name, value.value)
    return escape.setting(section, directive, value.text, own_specifiers=value.specifiers)


@lru_cache(maxsize=1)
def _templates():
    """The templates by name: the modules the wheel carries, compiled from these very
    templates (precompiled.py), run without jinja2; else templates/ compiled by jinja2,
    once per process (jinja_templates.py)."""
    filters = {"value": _value}
    templates = precompiled.load(template_dir(), compiled_dir(), filters)
    if templates is None:
        from jobgen.compiler import jinja_templates

        templates = jinja_templates.environment(template_dir(), filters)
    return templates


@lru_cache(maxsize=None)
def _template(kind: str):
    return _templates().get_template(f"{kind}.j2")


def render_file(plan: Plan, unit: UnitFile, common: dict[str, str] | None = None) -> bytes:
    """One file's bytes. ``common``: what every file of the plan shares (``_common``),
    computed once by ``render`` for all of them."""
    template = _template(unit.kind)
    # What Template.render does, less a copy of jinja2's globals into every file's context
    # (shared=True: the templates use only the names passed here; any other is undefined,
    # and StrictUndefined makes that an error) and less its traceback rewriting: a quarter
    # of the time of 2,001 files.
    context = template.new_context(dict(unit=unit, **(common or _common(plan))), shared=True)
    text = "".join(template.root_render_func(context))
    return (text.rstrip("\n") + "\n").encode("utf-8")


def _common(plan: Plan) -> dict[str, str]:
    return {"header": header.line(Path(plan.manifest).name), "shared_header": header.SHARED,
            "target": plan.target.describe(), "version": __version__}


def render(plan: Plan) -> dict[str, bytes]:
    common = _common(plan)
    return {unit.filename: render_file(plan, unit, common) for unit in plan.files}
