"""Print one line per manifest: the tree load.py reads, or its problems.

    python both_parsers.py c|python FILE...

``python``: yaml._yaml (libyaml's bindings) cannot be imported, as on a PyYAML built
without libyaml, so load.py falls back to PyYAML's parser in Python.
"""

import sys

mode, files = sys.argv[1], sys.argv[2:]
if mode == "python":
    sys.modules["yaml._yaml"] = None  # import fails with ImportError

from jobgen.compiler import load  # noqa: E402
from jobgen.compiler.diagnostics import ManifestError  # noqa: E402

parser = load._Parser.__module__
assert (parser == "yaml._yaml") == (mode == "c"), parser


def show(node) -> str:
    if isinstance(node, load.Scalar):
        return f"{node.value!r}@{node.pos.line}:{node.pos.col}{'~' if node.is_null else ''}"
    if isinstance(node, load.Seq):
        return f"[{', '.join(map(show, node.items))}]@{node.pos.line}:{node.pos.col}"
    problems = "".join(f" !{d}" for d in node.problems)
    return "{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in node.items) + f"}}@{node.pos.line}:{node.pos.col}{problems}"


for path in files:
    try:
        line = show(load.load_file(path))
    except ManifestError as exc:
        line = " | ".join(map(str, exc.diagnostics))
    print(mode, path, line)
