"""The shape of jobgen's imports, read from the source (ast), not from what happens to be
loaded: every `import` and `from ... import` counts, at module level and inside functions
(a lazy import is still a dependency, and still a cycle).

- contract/ is the shared vocabulary: it imports nothing of jobgen outside contract/.
- tools/ reads manifests and contracts; it never reaches into runtime/ (the lock holder,
  the queue), so what it shows comes from the same contract tables runtime/ uses.
- No two jobgen modules import each other, directly or through others.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "jobgen"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The jobgen module `name` is, or lives in (jobgen.a.b.NAME -> jobgen.a.b)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str) -> set[str]:
    """The jobgen modules `module` imports anywhere in its text."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from jobgen.contract import locks` imports the module jobgen.contract.locks
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        found |= {m for t in targets if t.startswith("jobgen") and (m := _resolve(t))}
    found.discard(module)
    return found


GRAPH: dict[str, set[str]] = {m: imports_of(m) for m in MODULES}


def test_the_graph_sees_lazy_and_relative_imports():
    # The walk must find the imports this file's claims rest on, or every check passes.
    assert "jobgen.contract.locks" in GRAPH["jobgen.tools.plan"]
    assert "jobgen.contract.outcomes" in GRAPH["jobgen.contract.policies"]
    assert len(MODULES) > 50


def test_contract_imports_nothing_of_jobgen_outside_contract():
    outside = {m: sorted(d for d in deps if not d.startswith("jobgen.contract"))
               for m, deps in GRAPH.items() if m.startswith("jobgen.contract")}
    assert {m: d for m, d in outside.items() if d} == {}


def test_tools_import_nothing_from_runtime():
    reach = {m: sorted(d for d in deps if d.startswith("jobgen.runtime"))
             for m, deps in GRAPH.items() if m.startswith("jobgen.tools")}
    assert {m: d for m, d in reach.items() if d} == {}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_lazy_two_module_cycle():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    # A package's __init__ that re-exports its submodules is imported by them only as the
    # parent every `import jobgen.x.y` loads first, not as a dependency: drop the edge from
    # a submodule to its own parent packages.
    return {m: {d for d in deps if not m.startswith(d + ".")} for m, deps in graph.items()}


def test_no_import_cycle_among_jobgen_modules():
    assert _cycles(_without_package_inits(GRAPH)) == []


# jobgen.__main__ runs the CLI when imported (python -m jobgen): not a library module.
@pytest.mark.parametrize("module", sorted(set(MODULES) - {"jobgen.__main__"}))
def test_every_module_imports(module):
    importlib.import_module(module)


# The commands that compile manifests go through pipeline.build, the one entry to the
# stages: a command calling them itself has once compiled differently from render
# (names, merge rules, the tmpfiles.d name).
STAGES = {f"jobgen.compiler.{s}" for s in ("load", "validate", "plan", "render")}


@pytest.mark.parametrize("module", ["jobgen.host.generator", "jobgen.cli.apply", "jobgen.cli.render", "jobgen.cli.app"])
def test_commands_compile_through_the_pipeline(module):
    assert sorted(GRAPH[module] & STAGES) == []
    assert "jobgen.compiler.pipeline" in GRAPH[module] | {d for m in GRAPH[module] if m.startswith("jobgen.cli") for d in GRAPH[m]}


# --------------------------------------------------------------------------- what a command loads
# What `jobgen render` and `jobgen check` import, seen in a fresh interpreter (sys.modules
# when the command ends). Every module is start-up time paid on each render: what the
# compile does not use must not load. Some of what loads is typer's and jinja2's own, at
# their import, whoever imports them: typer.core imports difflib, typer._click.core inspect
# (with ast, dis), typer.main platform and uuid; jinja2/__init__ imports jinja2.bccache,
# which imports pickle and tempfile (README "Performance"). Those are the floor, measured
# here as what `import typer, jinja2, yaml` loads; what jobgen adds on top of it is judged.

_MODULES_AT_EXIT = """
import atexit, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv[0] = "jobgen"
from jobgen.cli import main
main()
"""
_FLOOR = "import sys, typer, jinja2, yaml; print('\\n'.join(sorted(sys.modules)))"
MANIFEST = "jobgen: 1\ntarget: {systemd: '252'}\njobs:\n  backup:\n    command: [/usr/bin/backup]\n    schedule: daily\n"

# Never on these paths, whoever would import them: TLS and HMAC (no network, no secret
# is made), the zone database and sysconfig (only a manifest naming a time zone needs
# them), packaging (only a target clause it must explain needs it), sockets, logging.
NEVER = {"ssl", "_ssl", "hmac", "secrets", "zoneinfo", "sysconfig", "packaging", "socket", "logging", "email"}
# Not added by jobgen to what typer and jinja2 load: pickle, difflib (--diff imports it),
# subprocess, ctypes (only a write syncs through it, write._syncfs), tempfile.
NOT_OURS = {"pickle", "difflib", "subprocess", "ctypes", "tempfile", "random", "inspect", "json.decoder"}
# What a manifest of calendar schedules and argument lists (MANIFEST, most manifests) never
# needs: the cron hint for a schedule that did not read, the shell-word reader for a command
# written as one string.
NOT_FOR_THIS_MANIFEST = {"jobgen.compiler.cron", "jobgen.compiler.shellwords"}
OTHER_COMMANDS = {"jobgen.cli.apply", "jobgen.cli.run", "jobgen.cli.queue", "jobgen.cli.plan", "jobgen.cli.status",
                  "jobgen.cli.import_crontab", "jobgen.cli.schema", "jobgen.cli.lock", "jobgen.cli.directives"}


def _loaded(tmp_path: Path, *args: str, script: str = _MODULES_AT_EXIT, env: dict[str, str] | None = None) -> set[str]:
    import subprocess
    import sys

    out = tmp_path / "modules.txt"
    r = subprocess.run([sys.executable, "-c", script, str(out), *args], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    return set(out.read_text().split())


@pytest.fixture(scope="module")
def floor() -> set[str]:
    import subprocess
    import sys

    return set(subprocess.run([sys.executable, "-c", _FLOOR], capture_output=True, text=True, check=True).stdout.split())


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST)
    return path


def test_the_floor_is_what_the_comments_say(floor):
    # If typer or jinja2 stop importing these, NOT_OURS can become NEVER.
    assert {"difflib", "pickle", "inspect"} <= floor


def test_render_loads_only_its_own_command_and_nothing_unused(tmp_path, manifest, floor):
    loaded = _loaded(tmp_path, "render", str(manifest), "-o", str(tmp_path / "out"), "-q", "--no-cache")
    assert (tmp_path / "out" / "backup.service").is_file()
    assert loaded & NEVER == set()
    assert (loaded - floor) & NOT_OURS == {"ctypes"}  # the write's syncfs
    assert loaded & OTHER_COMMANDS == set()
    assert loaded & NOT_FOR_THIS_MANIFEST == set()
    assert {m for m in loaded if m.startswith(("jobgen.tools", "jobgen.host", "jobgen.runtime"))} == set()
    assert {"jinja2.compiler", "jinja2.lexer", "jinja2.parser"} <= loaded  # jinja2/__init__ imports them


def test_an_unchanged_render_writes_nothing_and_loads_no_ctypes(tmp_path, manifest, floor):
    args = ("render", str(manifest), "-o", str(tmp_path / "out"), "-q")
    _loaded(tmp_path, *args)
    loaded = _loaded(tmp_path, *args)  # the render cache's case, and the same words again
    assert loaded & NEVER == set()
    assert (loaded - floor) & NOT_OURS == set()
    # typer's parse recalled (cli/recall.py): neither typer nor what it alone imports
    assert {m for m in loaded if m == "typer" or m.startswith(("typer.", "click"))} == set()
    assert loaded & {"inspect", "ast", "dis", "difflib", "platform", "uuid"} == set()


def test_check_loads_only_its_own_command_and_nothing_unused(tmp_path, manifest, floor):
    loaded = _loaded(tmp_path, "check", str(manifest))
    assert loaded & NEVER == set()
    assert loaded & NOT_FOR_THIS_MANIFEST == set()
    assert (loaded - floor) & NOT_OURS == set()
    assert loaded & (OTHER_COMMANDS | {"jobgen.cli.render", "jobgen.compiler.write", "jobgen.compiler.cache"}) == set()


# A target that reads (none: the default >=252, a range, a preset) never loads packaging:
# only a clause that is not an operator and a whole number does (target.py _plain_clause).
@pytest.mark.parametrize("target", ["", "target: {systemd: '>=252,< 258'}\n", "target: {systemd: debian-12}\n"])
def test_a_target_that_reads_loads_no_packaging(tmp_path, target):
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST.replace("target: {systemd: '252'}\n", target))
    assert "packaging" not in _loaded(tmp_path, "check", str(path))
    assert "packaging" not in _loaded(tmp_path, "render", str(path), "-o", str(tmp_path / "out"), "-q")


# Defining a dataclass executes its generated methods (six for a frozen one, ten ordered)
# at every start: some 0.5-1 ms each on this machine, paid by every render and boot. So no
# record on these paths is one (named tuples, plain classes, model.Record), and the
# dataclasses module itself is not loaded: neither typer, jinja2 nor PyYAML needs it.
def test_render_check_and_the_generator_define_no_dataclass(tmp_path, manifest, floor):
    import os

    assert "dataclasses" not in floor
    # A command written as one string as well: the shell-word reader is on the path then.
    manifest.write_text(MANIFEST + "  sweep:\n    command: /usr/bin/sweep --all\n    schedule: hourly\n")
    gen = _MODULES_AT_EXIT.replace("from jobgen.cli import main", "from jobgen.cli.generator import main")
    env = {**os.environ, "JOBGEN_MANIFEST_DIRS": str(tmp_path), "JOBGEN_GENERATOR_CACHE": ""}
    runs = {
        "render": _loaded(tmp_path, "render", str(manifest), "-o", str(tmp_path / "out"), "-q", "--no-cache"),
        "check": _loaded(tmp_path, "check", str(manifest)),
        "generator": _loaded(tmp_path, str(tmp_path / "gen"), script=gen, env=env),
    }
    assert (tmp_path / "gen" / "backup.service").is_file()  # the generator compiled the manifest
    assert {name: {"jobgen.compiler.model", "jobgen.compiler.shellwords"} <= loaded for name, loaded in runs.items()} == dict.fromkeys(runs, True)
    assert {name: sorted(loaded & {"dataclasses"}) for name, loaded in runs.items()} == dict.fromkeys(runs, [])


def test_help_still_lists_every_command(tmp_path):
    loaded = _loaded(tmp_path, "--help")
    assert OTHER_COMMANDS <= loaded
