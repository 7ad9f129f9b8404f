"""`jobgen completion SHELL`: the script on stdout whatever shell runs jobgen, and what it
completes, asked the way a shell asks: the bash script sourced in a real bash with
COMP_WORDS set, and click's protocol (`_JOBGEN_COMPLETE=complete_zsh`, `complete_fish`)
driven through the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.cli.apply import LAYOUTS as APPLY_LAYOUTS
from jobgen.cli.completion import COMPLETE_VAR
from jobgen.compiler.layout import LAYOUTS

BIN = Path(sys.executable).parent  # .venv/bin: where the `jobgen` console script is
ENV = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", NO_COLOR="1")

MANIFEST = """\
jobgen: 1
defaults: {user: app}
jobs:
  catalog-refresh: {command: [/bin/true], schedule: daily}
  nightly-import: {command: [/bin/true], schedule: daily, overlap: queue}
  cleanup: {command: [/bin/true], schedule: daily}
"""


@pytest.fixture
def manifest(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST)
    return path


def _script(shell: str) -> str:
    # From sh, where typer's --show-completion answers "Shell sh not supported".
    result = subprocess.run(["sh", "-c", f"jobgen completion {shell}"], capture_output=True, text=True, env=ENV, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    return result.stdout


def _bash(script: str, line: str) -> list[str]:
    """What bash offers after `line` (the word being completed is the last one, '' after a space)."""
    words = line.split(" ")
    program = script + f"\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\nCOMP_CWORD={len(words) - 1}\n" \
                       "_jobgen_completion jobgen\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"  # fmt: skip
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, env=ENV, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    return [w for w in result.stdout.splitlines() if w]


@pytest.fixture(scope="module")
def bash_script():
    return _script("bash")


def test_the_scripts_print_from_sh():
    assert "complete -o default -F _jobgen_completion jobgen" in _script("bash")
    assert "compdef _jobgen_completion jobgen" in _script("zsh")
    assert _script("fish").startswith("complete --command jobgen")
    for script in map(_script, ("bash", "zsh", "fish")):
        assert f"{COMPLETE_VAR}=" in script


def test_an_unknown_shell_is_a_usage_error():
    result = subprocess.run(["jobgen", "completion", "sh"], capture_output=True, text=True, env=ENV, timeout=60)
    assert result.returncode == 2 and "'sh' is not one of 'bash', 'zsh', 'fish'" in result.stderr


CASES = [
    ("commands", "jobgen comp", ["completion"]),
    ("render's layouts", "jobgen render jobs.yaml -o out --layout ", list(LAYOUTS)),
    ("render's layouts from a prefix", "jobgen render jobs.yaml -o out --layout d", ["debian"]),
    ("apply's layouts", "jobgen apply jobs.yaml --layout ", list(APPLY_LAYOUTS)),
    ("the manifest's jobs", "jobgen run jobs.yaml ", ["catalog-refresh", "nightly-import", "cleanup"]),
    ("the manifest's jobs from a prefix", "jobgen run jobs.yaml c", ["catalog-refresh", "cleanup"]),
    ("queue takes the jobs with overlap: queue", "jobgen queue jobs.yaml ", ["nightly-import"]),
    ("enqueue too", "jobgen enqueue jobs.yaml ", ["nightly-import"]),
    ("a missing manifest completes to nothing", "jobgen run missing.yaml ", []),
]


@pytest.mark.parametrize("line, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bash_completes(bash_script, manifest, line, expected):
    assert _bash(bash_script, line.replace("jobs.yaml", str(manifest)).replace("missing.yaml", str(manifest.parent / "no.yaml"))) == expected


def test_a_broken_manifest_completes_to_nothing(bash_script, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs: [unclosed\n")
    assert _bash(bash_script, f"jobgen run {bad} ") == []


def _protocol(shell: str, line: str) -> str:
    env = dict(ENV, **{COMPLETE_VAR: f"complete_{shell}", "_TYPER_COMPLETE_ARGS": line, "_TYPER_COMPLETE_FISH_ACTION": "get-args"})
    result = subprocess.run(["jobgen"], capture_output=True, text=True, env=env, timeout=60)
    assert (result.returncode, result.stderr) == (0, "")
    return result.stdout


def test_zsh_and_fish_complete_layouts_and_jobs(manifest):
    for shell in ("zsh", "fish"):
        layouts = _protocol(shell, "jobgen render x.yaml -o out --layout ")
        assert all(name in layouts for name in LAYOUTS), layouts
        jobs = _protocol(shell, f"jobgen run {manifest} ")
        assert all(name in jobs for name in ("catalog-refresh", "nightly-import", "cleanup")), jobs
