"""`jobgen` run as a user runs it, for every test that judges the command line by what it
prints and its exit status.

One way to start it and one environment rule, so that a test reads the same bytes on any
machine: this interpreter's jobgen (``python -m jobgen``, the checkout under test, not
whichever `jobgen` is first on PATH), the caller's environment (or the one a test gives),
and help text laid out for 200 columns without colour whatever terminal runs the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

JOBGEN = (sys.executable, "-m", "jobgen")
# What the output may not depend on: the terminal's width (click wraps help to it) and colour.
PLAIN = {"COLUMNS": "200", "NO_COLOR": "1"}
TIMEOUT = 120  # seconds; generous for a loaded 2-core CI machine, never reached by a passing test


class Ran(NamedTuple):
    """How a jobgen run ended: ``code, out, err = jobgen(...)``, or by field."""

    code: int
    stdout: str
    stderr: str

    @property
    def returncode(self) -> int:  # subprocess.CompletedProcess's name for it
        return self.code


def jobgen(
    *args: str,
    cwd: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    prefix: Sequence[str] = (),
    python: Sequence[str] = (),
    program: Sequence[str] | None = None,
    timeout: float = TIMEOUT,
    preexec_fn: Callable[[], Any] | None = None,
    input: str | None = None,
) -> Ran:
    """Run ``jobgen ARGS...``.

    ``env``: the whole environment (default: this process's); PLAIN is added to it.
    ``prefix``: a command jobgen runs under (setpriv, unshare). ``python``: interpreter
    options (-X importtime). ``program``: another way to start jobgen (an installed
    console script) instead of JOBGEN."""
    argv = [*prefix, *(program if program is not None else (JOBGEN[0], *python, *JOBGEN[1:])), *args]
    environment = {**(os.environ if env is None else env), **PLAIN}
    r = subprocess.run(argv, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=preexec_fn, input=input)
    return Ran(r.returncode, r.stdout, r.stderr)
