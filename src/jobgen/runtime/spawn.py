"""How jobgen starts programs: another jobgen, and the system's own tools.

jobgen often runs as root, from whatever folder the operator stands in (/tmp, a shared
project folder). A program it starts must be the one it means, whatever that folder, PATH
and the environment hold:

- Another jobgen runs on this very interpreter in isolated mode (python(1) -I: no PYTHON*
  variable is read, no user site folder, and neither the working folder nor a script's
  folder goes on sys.path), and imports jobgen from the folder this process imported it
  from. Never `python -m jobgen`: -m puts the working folder first on sys.path, so a
  `jobgen/` package planted there would run instead (python(1), "-m" and "-I").
- A system program (systemctl, journalctl) is looked up on PATH's absolute entries only:
  an empty, '.' or other relative entry names the working folder (execvp(3)).
- The working folder of a child that needs none is '/'.

The console script (/usr/bin/jobgen) is safe as it is: Python puts the script's own folder,
not the working folder, first on sys.path. It is what units run; `jobgen run` runs the
units' argv.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING

import jobgen
from jobgen.contract.locks import DEFAULT_HOLDER

if TYPE_CHECKING:
    import subprocess

NEUTRAL_CWD = "/"

# sys.argv[1] is the folder jobgen is imported from; the rest are jobgen's own arguments.
_BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from jobgen.cli import main; main()"


def jobgen_argv(*args: str) -> tuple[str, ...]:
    """argv that runs `jobgen ARGS...` with the code this process runs, isolated."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(jobgen.__file__)))
    return (sys.executable, "-I", "-c", _BOOT, home, *args)


def running_jobgen(argv0: str) -> str | None:
    """The jobgen that is running, as the absolute path a unit can exec: `jobgen` beside
    this program's real path (a virtualenv's or pipx's bin/, /usr/bin; a link
    /usr/local/bin/jobgen -> /opt/jobgen/bin/jobgen gives the latter), as the generator
    finds it beside itself; None when there is none (`python -m jobgen` gives argv0
    .../jobgen/__main__.py, beside which no jobgen is installed)."""
    if not os.path.isabs(argv0):
        return None
    candidate = os.path.join(os.path.dirname(os.path.realpath(argv0)), "jobgen")
    return candidate if os.path.isfile(candidate) and os.access(candidate, os.X_OK) else None


def console_script(argv0: str) -> str:
    """The jobgen executable units should name: the running one, else /usr/bin/jobgen."""
    return running_jobgen(argv0) or DEFAULT_HOLDER


def find(name: str) -> str | None:
    """NAME on PATH's absolute entries only, or None."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not os.path.isabs(folder):
            continue  # '', '.', 'bin': the working folder, which anyone may have written to
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def program(name: str) -> str:
    """find(NAME), or FileNotFoundError naming it (as exec would)."""
    path = find(name)
    if path is None:
        raise FileNotFoundError(errno.ENOENT, f"{os.strerror(errno.ENOENT)} on PATH's absolute folders", name)
    return path


def run(argv, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run for a system program named without a folder: found by program()."""
    # Imported here: jobgen-generator asks this module only for running_jobgen(), and
    # subprocess (with signal, selectors, locale) is some 5 ms of every cold run.
    import subprocess

    argv = list(argv)
    if os.sep not in argv[0]:
        argv[0] = program(argv[0])
    return subprocess.run(argv, **kwargs)
