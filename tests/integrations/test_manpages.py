"""The manual pages jobgen(1), jobgen-generator(8), jobgen.yaml(5): generated from the command
definitions and the key tables by tools/gen_manpages.py, committed in docs/man/, rendered by
man-db's `man --warnings -l` without a warning, and naming every command, exit code and key.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.cli.exits import EXIT_CODES
from jobgen.compiler import validate

ROOT = Path(__file__).resolve().parents[2]
MAN = ROOT / "docs" / "man"


def generator():
    spec = importlib.util.spec_from_file_location("gen_manpages", ROOT / "tools" / "gen_manpages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rendered(page: Path) -> subprocess.CompletedProcess:
    if shutil.which("man") is None:
        pytest.skip("man not found: scripts/bootstrap installs man-db")
    env = {**os.environ, "MANWIDTH": "80", "LC_ALL": "C.UTF-8", "MAN_KEEP_FORMATTING": "0"}
    r = subprocess.run(["man", "--warnings", "-l", str(page)], capture_output=True, text=True, env=env, timeout=120)
    r.stdout = re.sub(".\b", "", r.stdout)  # grotty's overstrike bold and underline
    return r


def test_committed_pages_are_the_generated_ones() -> None:
    gen = generator()
    assert sorted(p.name for p in MAN.iterdir()) == sorted(gen.PAGES)
    for name, make in gen.PAGES.items():
        assert (MAN / name).read_text() == make(), f"docs/man/{name} is stale: run {sys.executable} tools/gen_manpages.py docs/man"


@pytest.mark.parametrize("name", sorted(p.name for p in MAN.iterdir()))  # every page (the one above: every generated one)
def test_man_renders_without_a_warning(name: str) -> None:
    r = rendered(MAN / name)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.startswith(name.rsplit(".", 1)[0].upper() + "(")


def test_jobgen_1_names_every_command_and_exit_code() -> None:
    text = rendered(MAN / "jobgen.1").stdout
    from jobgen.cli.app import COMMANDS

    for command in COMMANDS:
        assert f"jobgen {command.replace('_', '-')}" in text
    for code, meaning in EXIT_CODES:
        assert meaning.split(";")[0][:30] in " ".join(text.split())
    assert "--output DIR" in text and "--layout flat|etc|usr|debian" in text


def test_jobgen_yaml_5_names_every_key() -> None:
    text = rendered(MAN / "jobgen.yaml.5").stdout
    for key in [*validate.TOP_LEVEL_KEYS, *validate.JOB_KEYS, *validate.WORKER_KEYS, *validate._LOCK_KEYS, *validate._QUEUE_KEYS]:
        assert f"\n       {key}" in text, key
