"""What jobgen starts is what it means, whatever the caller's folder, PATH and environment
hold (runtime/spawn.py). Another local user can write to the folder an operator stands in
(/tmp, a shared project folder); root's PATH may carry an empty or '.' entry. Each test
plants code there that would write a marker, runs the real command, and shows the marker
is never written. (The queue commands and `jobgen run` on a real lock server:
tests/cluster/test_spawn_safety_on_servers.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.contract.locks import DEFAULT_HOLDER
from jobgen.runtime import spawn

JOBGEN_BIN = str(Path(sys.executable).parent / "jobgen")
SHOP = str(Path(__file__).resolve().parent.parent / "examples" / "shop.yaml")


def _plant_program(folder: Path, name: str, marker: Path) -> None:
    tool = folder / name
    tool.write_text(f"#!/bin/sh\necho planted >> {marker}\necho 'systemd 999 (999)'\n")
    tool.chmod(0o755)


@pytest.mark.parametrize("path", [":{empty}", ".:{empty}", "{empty}::", "bin:{empty}"])
def test_systemctl_is_not_taken_from_the_working_folder(tmp_path: Path, path: str) -> None:
    """`--systemd auto` asks `systemctl --version`: a PATH whose only way to a systemctl is
    through the working folder ('' '.' or a relative entry) finds none."""
    cwd, empty, marker = tmp_path / "shared", tmp_path / "empty", tmp_path / "MARKER"
    (cwd / "bin").mkdir(parents=True)
    empty.mkdir()
    _plant_program(cwd, "systemctl", marker)
    _plant_program(cwd / "bin", "systemctl", marker)
    env = {**os.environ, "PATH": path.format(empty=empty)}
    r = subprocess.run([JOBGEN_BIN, "check", SHOP, "--systemd", "auto"], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr == ("jobgen: error: --systemd auto: cannot read `systemctl --version`: [Errno 2] "
                        "No such file or directory on PATH's absolute folders: 'systemctl'\n")
    assert not marker.exists()


def test_status_does_not_run_a_journalctl_from_the_working_folder(tmp_path: Path) -> None:
    cwd, empty, marker = tmp_path / "shared", tmp_path / "empty", tmp_path / "MARKER"
    cwd.mkdir()
    empty.mkdir()
    _plant_program(cwd, "journalctl", marker)
    r = subprocess.run([JOBGEN_BIN, "status", SHOP], cwd=cwd, env={**os.environ, "PATH": f":{empty}"},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 4  # systemd or the journal cannot be reached
    assert r.stderr == "jobgen: error: cannot run journalctl: No such file or directory on PATH's absolute folders\n"
    assert not marker.exists()


def test_a_child_jobgen_ignores_the_folder_and_python_variables(tmp_path: Path) -> None:
    """spawn.jobgen_argv: this jobgen, isolated (-I) — not the working folder's `jobgen/`,
    nor PYTHONPATH, PYTHONSTARTUP or PYTHONHOME an environment could carry."""
    cwd, marker = tmp_path / "shared", tmp_path / "MARKER"
    (cwd / "jobgen").mkdir(parents=True)
    code = f"open({str(marker)!r}, 'a').write('planted\\n')\n"
    for name in ("__init__.py", "__main__.py", "startup.py"):
        (cwd / "jobgen" / name).write_text(code)
    (cwd / "sitecustomize.py").write_text(code)
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYTHONSTARTUP": str(cwd / "jobgen" / "startup.py"),
           "PYTHONINSPECT": "1"}
    r = subprocess.run(list(spawn.jobgen_argv("--version")), cwd=cwd, env=env, capture_output=True,
                       text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("jobgen ")
    assert not marker.exists()


@pytest.mark.parametrize("argv0,holder", [
    (JOBGEN_BIN, JOBGEN_BIN),  # the console script by its absolute path: itself
    (str(Path(spawn.__file__).parent.parent / "__main__.py"), DEFAULT_HOLDER),  # python -m jobgen
    ("jobgen", DEFAULT_HOLDER),  # relative: resolved against a folder that may change
    ("./jobgen", DEFAULT_HOLDER),
])
def test_the_holder_units_name_is_a_console_script(argv0: str, holder: str) -> None:
    assert spawn.console_script(argv0) == holder
