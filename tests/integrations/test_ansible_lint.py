"""The collection judged by the Ansible community's own tools, as Galaxy and collection
maintainers run them: `ansible-test sanity` (every test, the requirements from the package
index in a virtualenv of the test's own) and `ansible-lint --profile production`, and the
built collection tarball (LICENSE, CHANGELOG.md inside).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "ansible" / "ansible_collections" / "jobgen" / "jobgen"
BIN = Path(sys.executable).parent


def copy_collection(tmp_path: Path) -> Path:
    """ansible-test wants the collection at ansible_collections/NS/NAME, and a git work tree or none."""
    dest = tmp_path / "ansible_collections" / "jobgen" / "jobgen"
    shutil.copytree(COLLECTION, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"), "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1"}


def lint(argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    r = subprocess.run([BIN / "ansible-lint", "--profile", "production", "--offline", "--nocolor", *argv], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=900)  # fmt: skip
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]
    assert "Passed" in r.stdout + r.stderr, r.stdout + r.stderr


def test_ansible_lint_production_profile_is_clean_on_the_collection(tmp_path: Path) -> None:
    lint([], copy_collection(tmp_path), env(tmp_path))


def test_ansible_lint_production_profile_is_clean_on_the_example_playbook(tmp_path: Path) -> None:
    e = {**env(tmp_path), "ANSIBLE_COLLECTIONS_PATH": str(tmp_path)}
    copy_collection(tmp_path)
    lint([str(ROOT / "ansible/examples/jobs.yml")], ROOT / "ansible/examples", e)


def test_built_collection_carries_license_and_changelog(tmp_path: Path) -> None:
    dest = copy_collection(tmp_path)
    r = subprocess.run([BIN / "ansible-galaxy", "collection", "build", "--output-path", str(tmp_path / "dist"), str(dest)],
                       env=env(tmp_path), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (tarball,) = (tmp_path / "dist").glob("jobgen-jobgen-*.tar.gz")
    names = set(tarfile.open(tarball).getnames())
    assert {"LICENSE", "CHANGELOG.md", "README.md", "plugins/modules/jobgen_apply.py"} <= names
    assert "tests/sanity/ignore-2.19.txt" in names


def test_ansible_test_sanity_is_clean(tmp_path: Path) -> None:
    """Every sanity test of the installed ansible-core, with its requirements from the index."""
    dest = copy_collection(tmp_path)
    e = env(tmp_path)
    # ansible-test's own virtualenv for the sanity tools (pylint, mypy, yamllint, ...)
    r = subprocess.run([BIN / "ansible-test", "sanity", "--venv", "--requirements", "--python",
                        f"{sys.version_info.major}.{sys.version_info.minor}", "--color", "no"],
                       cwd=dest, env=e, capture_output=True, text=True, timeout=3600)  # fmt: skip
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-8000:]
    assert "ERROR" not in r.stdout + r.stderr, r.stdout[-8000:] + r.stderr[-8000:]
