"""The pre-commit hook of .pre-commit-hooks.yaml, run by real pre-commit.

`pre-commit try-repo` clones this repository the way a user's `repo:` line would, installs
jobgen into the hook's own virtualenv (language: python) and runs `jobgen check` on the
files the hook's `files:` pattern selects in a throw-away git repository.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
jobgen: 1
target:
  systemd: "252"
jobs:
  backup:
    command: [/usr/bin/true]
    schedule: daily
"""
# `schedul` is misspelt: jobgen says where, which job, and what was meant.
BROKEN = GOOD.replace("    schedule: daily", "    schedul: daily")
BROKEN_MESSAGE = "deploy/broken.jobgen.yaml:7:5: error: job 'backup': unknown key 'schedul'; did you mean 'schedule'?"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's repository: a good manifest, a broken one, and a YAML file that is no manifest."""
    if shutil.which("git") is None:
        pytest.skip("git not found: apt-get install git (scripts/bootstrap)")
    repo = tmp_path / "project"
    (repo / "jobgen").mkdir(parents=True)
    (repo / "deploy").mkdir()
    (repo / "jobgen" / "good.yaml").write_text(GOOD)
    (repo / "deploy" / "broken.jobgen.yaml").write_text(BROKEN)
    # Not a manifest and not named like one: the hook's files: pattern leaves it alone.
    (repo / "config.yaml").write_text("schedul: daily\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    return repo


def try_repo(project: Path, home: Path, *selection: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    # try-repo of a checkout with uncommitted changes commits them into a shadow clone:
    # give git an identity so that works on a machine without one.
    for who in ("AUTHOR", "COMMITTER"):
        env.setdefault(f"GIT_{who}_NAME", "jobgen tests")
        env.setdefault(f"GIT_{who}_EMAIL", "tests@example.org")
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(ROOT), "jobgen-check", "--color", "never", *selection],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )


def test_broken_manifest_fails_with_its_position_and_good_one_passes(project: Path, tmp_path: Path) -> None:
    home = tmp_path / "pre-commit-home"

    everything = try_repo(project, home, "--all-files")
    assert everything.returncode == 1, everything.stdout + everything.stderr
    assert BROKEN_MESSAGE in everything.stdout
    assert "jobgen check" in everything.stdout and "Failed" in everything.stdout
    # The hook passed only manifest files to jobgen: config.yaml was not checked.
    assert "config.yaml" not in everything.stdout

    good = try_repo(project, home, "--files", "jobgen/good.yaml")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "jobgen check" in good.stdout and "Passed" in good.stdout

    nothing = try_repo(project, home, "--files", "config.yaml")
    assert nothing.returncode == 0, nothing.stdout + nothing.stderr
    assert "(no files to check)Skipped" in nothing.stdout
