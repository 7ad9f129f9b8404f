"""templates/ compiled to Python ahead of time, when the wheel is built (hatch_build.py),
and run without importing jinja2.

jinja2 compiles a template's text to a Python module before its first render, and
`import jinja2` (its lexer, parser, compiler, bytecode cache with pickle and tempfile)
is paid by every process that renders. Rendering the modules here instead, through the
handful of names they call (Templates, _Context), took a generator run that compiles a
10-job manifest at boot from 429 to 317 million instructions (callgrind), a quarter.
The wheel carries the modules jinja2 compiles from templates/, in jobgen/_templates/.

What makes that safe:
- templates/ stays the one source: the modules are jinja2's own output for these very
  templates, never edited by hand, and used only while the stamp (sha256 of the
  templates' names and bytes) matches templates/ as installed; an edited or added
  template, a source checkout, an editable install, or a wheel built without jinja2
  renders through jinja2 from templates/ (jinja_templates.py).
- The build accepts a module only if everything it calls is here (check()): one
  ``from jinja2.runtime import`` line, which the build turns into a comment, then only
  SUPPORTED of those names, only ENVIRONMENT attributes of ``environment``, only
  CONTEXT attributes of ``context`` and only the filters render.py defines
  (FILTER_NAMES). A jinja2 that compiles differently, or a template that uses a loop
  variable, a macro or an include, makes the build write no modules, never modules that
  could fail at run time. tests/test_precompiled.py renders every golden file both
  ways, byte for byte.
- jinja2's semantics for the names kept: StrictUndefined (an undefined name is an
  error, here when it is looked up, there when it is printed: the templates only print,
  iterate or take attributes of what they look up), Environment.getattr's attribute-then-
  item lookup, Context.resolve_or_missing and the block lists `{% extends %}` fills.

Imports jinja2 only inside build(), and of jobgen only the digests, when it is
installed: the build hook loads this file by its path, before jobgen is installed, and
the generator imports it on its boot path.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

try:  # installed: the interpreter's own digests (contract/digest.py says why)
    from jobgen.contract.digest import sha1, sha256
except ImportError:  # loaded by its path by the wheel's build hook, before jobgen is installed
    from hashlib import sha1, sha256

FOLDER = "_templates"  # jobgen/_templates/ in the wheel
STAMP = "SOURCES"  # in FOLDER: what the modules were compiled from (stamp()), and by which jinja2
# The filters templates/ uses (render.py defines them): compiling checks the names only.
FILTER_NAMES = ("value",)

# What a compiled module's first line imports that it may use, and what it is here.
_RUNTIME_IMPORT = "from jinja2.runtime import "
SUPPORTED = ("missing", "Undefined", "internalcode", "TemplateRuntimeError")
# The attributes compiled code may take of `environment` (Templates) and `context` (_Context).
ENVIRONMENT = ("undefined", "concat", "getattr", "filters", "get_template")
CONTEXT = ("resolve_or_missing", "blocks")


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


def stamp(templates: Path) -> str:
    """sha256 over every template's name and bytes."""
    h = sha256(b"jobgen templates\0")
    for path in sorted(templates.glob("*.j2")):
        data = path.read_bytes()
        h.update(f"{path.name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def module_filename(name: str) -> str:
    """The file a template is compiled into: jinja2.ModuleLoader.get_module_filename's name."""
    return "tmpl_" + sha1(name.encode("utf-8")).hexdigest() + ".py"


class Unsupported(Exception):
    """A compiled template calls something Templates does not provide."""


def check(code: str, name: str) -> str:
    """The module jinja2 compiled for template ``name``, its import line made a comment,
    if everything it uses is provided here; else Unsupported, saying what."""
    import ast

    first, newline, rest = code.partition("\n")
    if not first.startswith(_RUNTIME_IMPORT):
        raise Unsupported(f"{name}: the compiled module does not start with {_RUNTIME_IMPORT!r}")
    imported = {n.strip() for n in first[len(_RUNTIME_IMPORT):].split(",")}
    allowed = {"environment": set(ENVIRONMENT), "context": set(CONTEXT)}
    for node in ast.walk(ast.parse(rest, name)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            raise Unsupported(f"{name}: line {node.lineno + 1} imports")
        if isinstance(node, ast.Name) and node.id in imported and node.id not in SUPPORTED:
            raise Unsupported(f"{name}: line {node.lineno + 1} uses jinja2.runtime.{node.id}")
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in allowed:
            if node.attr not in allowed[node.value.id]:
                raise Unsupported(f"{name}: line {node.lineno + 1} uses {node.value.id}.{node.attr}")
        if _is_filter_lookup(node) and node.slice.value not in FILTER_NAMES:
            raise Unsupported(f"{name}: line {node.lineno + 1} uses the filter {node.slice.value!r}, which render.py does not define")
    # A comment in its place keeps the line numbers jinja2's debug_info refers to.
    return f"# {first}  (names provided by jobgen.compiler.precompiled){newline}{rest}"


def _is_filter_lookup(node) -> bool:
    """``environment.filters['NAME']``: how compiled code finds a filter."""
    import ast

    return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "filters"
            and isinstance(node.value.value, ast.Name) and node.value.value.id == "environment"
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str))


def build(templates: Path, out: Path) -> list[str]:
    """Compile every template in ``templates`` into ``out`` with its stamp; the names
    compiled. Unsupported, and nothing written, if any module needs more than Templates has."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates)), **options(jinja2))
    env.filters.update(dict.fromkeys(FILTER_NAMES, lambda value, *args: value))
    names = env.list_templates(extensions=["j2"])
    modules = {}
    for name in names:
        # raw, defer_init: as Environment.compile_templates writes them for ModuleLoader
        code = env.compile(env.loader.get_source(env, name)[0], name, name, raw=True, defer_init=True)
        modules[module_filename(name)] = check(code, name)
    out.mkdir(parents=True, exist_ok=True)
    for filename, code in modules.items():
        (out / filename).write_text(code, encoding="utf-8")
    (out / STAMP).write_text(f"{stamp(templates)}\njinja2 {jinja2.__version__}\n", encoding="ascii")
    return names


def load(templates: Path, compiled: Path, filters: dict) -> Templates | None:
    """The compiled templates of ``compiled`` if its stamp is that of ``templates``, else
    None (render through jinja2 from templates/)."""
    try:
        recorded = (compiled / STAMP).read_text(encoding="ascii").split("\n", 1)[0]
    except (OSError, UnicodeDecodeError):
        return None
    if recorded != stamp(templates):
        return None
    return Templates(compiled, filters)


class UndefinedError(Exception):
    """A template used a name render.py did not pass: a bug in jobgen (StrictUndefined)."""


class TemplateRuntimeError(Exception):
    """jinja2.exceptions.TemplateRuntimeError: a template used a filter render.py lacks."""


def _missing_name(*args, name=None, obj=None, **kwargs):
    raise UndefinedError(f"{name!r} is undefined" + ("" if obj is None else f" on {type(obj).__name__}"))


class _Missing:
    """jinja2.runtime.missing: a name the context does not have."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "missing"


MISSING = _Missing()


class _Template:
    __slots__ = ("blocks", "root_render_func")

    def __init__(self, namespace: dict) -> None:
        self.blocks = namespace["blocks"]
        self.root_render_func = namespace["root"]

    def new_context(self, variables: dict, shared: bool = True) -> _Context:
        return _Context(variables, self.blocks)


class _Context:
    """What compiled code asks of jinja2.runtime.Context: the variables, and for each block
    the list of its definitions, the child's first (so `{% extends %}` runs the child's)."""

    __slots__ = ("variables", "blocks")

    def __init__(self, variables: dict, blocks: dict) -> None:
        self.variables = variables
        self.blocks = {name: [block] for name, block in blocks.items()}

    def resolve_or_missing(self, key: str):
        return self.variables.get(key, MISSING)


class Templates:
    """The `environment` compiled code runs against (ENVIRONMENT), and the templates by name."""

    def __init__(self, compiled: Path, filters: dict) -> None:
        self.folder = compiled
        self.filters = filters
        self.concat = "".join
        self.undefined = _missing_name
        self._kept: dict[str, _Template] = {}

    def getattr(self, obj, attribute: str):
        # jinja2.Environment.getattr: the attribute, else the item, else undefined
        try:
            return getattr(obj, attribute)
        except AttributeError:
            pass
        try:
            return obj[attribute]
        except (TypeError, LookupError):
            return self.undefined(obj=obj, name=attribute)

    def get_template(self, name: str, parent: str | None = None) -> _Template:
        template = self._kept.get(name)
        if template is None:
            template = self._kept[name] = _Template(self._run(name))
        return template

    def _run(self, name: str) -> dict:
        # Imported as a module from its file, so Python keeps its byte code in
        # __pycache__ (written at install time) and nothing is compiled per process.
        path = self.folder / module_filename(name)
        spec = importlib.util.spec_from_file_location(f"jobgen._templates.{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        module.__dict__.update(environment=self, missing=MISSING, Undefined=_missing_name,
                               internalcode=lambda f: f, TemplateRuntimeError=TemplateRuntimeError)
        spec.loader.exec_module(module)
        return module.__dict__
