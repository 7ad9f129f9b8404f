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
import subprocess
import sys

import jobgen
from jobgen.contract.locks import DEFAULT_HOLDER

NEUTRAL_CWD = "/"

# sys.argv[1] is the folder jobgen is imported from; the rest are jobgen's own arguments.
_BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from jobgen.cli import main; main()"


def jobgen_argv(*args: str) -> tuple[str, ...]:
    """argv that runs `jobgen ARGS...` with the code this process runs, isolated."""
    home = os.path.dirname(os.path.dirname(os.path.abspath(jobgen.__file__)))
    return (sys.executable, "-I", "-c", _BOOT, home, *args)


def console_script(argv0: str) -> str:
    """The jobgen executable units should name: this one when it was started as the
    console script by an absolute path, else the packaged /usr/bin/jobgen. `python -m
    jobgen` gives argv0 .../jobgen/__main__.py, which is no executable."""
    if os.path.isabs(argv0) and os.path.basename(argv0) == "jobgen" and os.access(argv0, os.X_OK):
        return argv0
    return DEFAULT_HOLDER


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
    argv = list(argv)
    if os.sep not in argv[0]:
        argv[0] = program(argv[0])
    return subprocess.run(argv, **kwargs)
