"""The collection judged by the Ansible community's own tools, as Galaxy and collection
maintainers run them: `ansible-test sanity` (every test, the requirements from the package
index in a virtualenv of the test's own) and `ansible-lint --profile production`, and the
built collection tarball (LICENSE, CHANGELOG.md inside).
"""

from __future__ import annotations

import os
import re
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


# ansible-test pins each sanity test's requirements (pylint==3.3.7, pip==24.2 ...) and builds
# one virtualenv per test under ~/.ansible/test/venv, bootstrapping pip with a get-pip.py it
# downloads. This machine reaches one package index holding one version per package and
# nothing else, so: pip comes from Python's own ensurepip (the bootstrap script's cache slot,
# which ansible-test's message names for offline use), and a virtualenv whose pinned
# requirements cannot be had is built with the same packages, unpinned, from the index,
# then marked complete the way ansible-test marks its own.
GET_PIP = """\
# Offline stand-in for get-pip.py: pip from Python's own ensurepip, then what was asked for.
import ensurepip, subprocess, sys
ensurepip.bootstrap(upgrade=True)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel") and not a.startswith("pip==")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]) if [a for a in args if not a.startswith("-")] else 0)
"""
SANITY_VENV = re.compile(r'(/\S+/\.ansible/test/venv/sanity(?:\.([\w-]+))?/[\d.]+/[0-9a-f]+)/bin/python')


def provide_sanity_venv(venv: Path, test: str | None) -> None:
    import ansible_test

    requirements = Path(ansible_test.__file__).parent / "_data" / "requirements" / f"sanity.{test}.txt"
    names = [line.split("==")[0] for line in requirements.read_text().splitlines() if line and not line.startswith("#")] if test and requirements.exists() else []
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([str(venv / "bin/python"), "-m", "ensurepip"], check=True, capture_output=True)
    if names:
        r = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", *names], capture_output=True, text=True, timeout=1800)
        assert r.returncode == 0, r.stderr[-3000:]
    (venv / "meta.install.json").write_text("[]")
    (venv / "meta.yaml.json").write_text('{"yaml": true, "cloader": true}' if "PyYAML" in names else "null")
    (venv / "marker.txt").touch()


def test_ansible_test_sanity_is_clean(tmp_path: Path) -> None:
    """Every sanity test of the installed ansible-core (validate-modules, pylint, pep8, yamllint,
    import, ansible-doc, ...) on the collection; its only ignore is the GPLv3 header check."""
    dest = copy_collection(tmp_path)
    e = env(tmp_path)
    cache = Path.home() / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "get_pip_24_2.py").write_text(GET_PIP)
    argv = [BIN / "ansible-test", "sanity", "--local", "--python", f"{sys.version_info.major}.{sys.version_info.minor}", "--color", "no"]
    provided: set[str] = set()
    while True:
        r = subprocess.run(argv, cwd=dest, env=e, capture_output=True, text=True, timeout=3600)
        m = SANITY_VENV.search(r.stdout + r.stderr)
        if r.returncode == 0 or not m or "FATAL: " not in r.stdout + r.stderr or m[1] in provided:
            break
        provided.add(m[1])
        provide_sanity_venv(Path(m[1]), m[2])
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-8000:]
    assert "ERROR" not in out, out[-8000:]
    for test in ("validate-modules", "pylint", "pep8", "yamllint", "import", "ansible-doc", "ignores"):
        assert f'Running sanity test "{test}"' in out, out[-4000:]
    ignores = sorted((COLLECTION / "tests" / "sanity").glob("ignore-*.txt"))
    assert {p.read_text().split()[1] for p in ignores} == {"validate-modules:missing-gplv3-license"}
