"""The sdist and wheel as the Python packaging community judges them: built with `python -m
build`, checked with `twine check --strict`, their metadata complete (license file,
classifiers, project URLs, authors, a description whose links resolve on the package index),
and the sdist's own tests passing from the unpacked sdist (the CLI, loader, schema and wheel
tests: what needs neither systemd releases nor containers).
"""

from __future__ import annotations

import email
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SDIST_TESTS = ["tests/test_cli.py", "tests/test_load.py", "tests/test_schema.py", "tests/test_packaging.py",
               "tests/integrations/test_install_hint.py"]  # fmt: skip


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return out


def metadata(dist: Path) -> email.message.Message:
    (wheel,) = dist.glob("jobgen-*.whl")
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(name))


def test_twine_check_strict_passes(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2, files
    r = subprocess.run([BIN / "twine", "check", "--strict", *files], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_COLOR": "1"})  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("PASSED") == 2, r.stdout


def test_wheel_metadata_is_complete(dist: Path) -> None:
    meta = metadata(dist)
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("License-File") == ["LICENSE"]
    (wheel,) = dist.glob("jobgen-*.whl")
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zipfile.ZipFile(wheel).namelist())
    assert "jobgen developers" in meta["Author-email"]
    assert "Operating System :: POSIX :: Linux" in meta.get_all("Classifier")
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Documentation"} <= set(urls)
    # the zone database, for a machine without the system's (README: Install)
    assert "tzdata; extra == 'tz'" in meta.get_all("Requires-Dist")


def test_description_links_resolve_on_the_index(dist: Path) -> None:
    description = metadata(dist).get_payload()
    links = re.findall(r"\]\(([^)]+)\)|<(https?://[^>]+)>", description)
    targets = [a or b for a, b in links]
    assert targets, description
    assert [t for t in targets if not re.match(r"https?://", t)] == []


def test_sdist_carries_what_its_tests_and_packagings_read(dist: Path) -> None:
    (sdist,) = dist.glob("jobgen-*.tar.gz")
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    for needed in ("LICENSE", ".pre-commit-hooks.yaml", "debian/control", "debian/copyright", "tools/gen_directives.py",
                   "docs/description.md", "ansible/ansible_collections/jobgen/jobgen/galaxy.yml", "templates/unit.j2"):
        assert needed in names, needed
    assert not [n for n in names if "__pycache__" in n]


def test_sdist_tests_pass_from_the_unpacked_sdist(dist: Path, tmp_path: Path) -> None:
    (sdist,) = dist.glob("jobgen-*.tar.gz")
    with tarfile.open(sdist) as t:
        t.extractall(tmp_path, filter="data")
    (tree,) = tmp_path.iterdir()
    # the sdist's jobgen, not this checkout's editable one: src/ first on the path
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SDIST_TESTS], cwd=tree, env=env,
                       capture_output=True, text=True, timeout=1800)  # fmt: skip
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert re.search(r"\d+ passed", r.stdout) and "skipped" not in r.stdout and "error" not in r.stdout.lower(), r.stdout[-3000:]
    which = subprocess.run([sys.executable, "-c", "import jobgen; print(jobgen.__file__)"], env=env, capture_output=True, text=True)
    assert which.stdout.startswith(str(tree)), which.stdout
