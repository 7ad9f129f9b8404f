"""The command line: the only package that prints or exits.

``main`` is the console script. ``jobgen lock`` runs in front of every cluster-scope job,
so it is dispatched before typer, jinja2 or the compiler are imported; every other
command lives in its own module here and is registered on one typer app by
``COMMANDS`` (app.py), where ``lock`` has an entry too so that `jobgen --help` lists it. A command module parses options, calls the pure core or the host
layer, and turns what comes back into output and an exit code (exits.py).
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["lock"]:
        from jobgen.runtime import lock

        sys.exit(lock.main(argv[1:]))
    from jobgen.cli.app import run

    sys.exit(run(argv))
