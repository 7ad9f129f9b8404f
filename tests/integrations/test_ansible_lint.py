"""The collection judged by the Ansible community's own tools, as Galaxy and collection
maintainers run them: `ansible-test sanity` (every test, with the ansible-core and the
tools pinned in ansible/sanity-requirements.txt, installed from the package index) and
`ansible-lint --profile production`, and the built collection tarball (LICENSE,
CHANGELOG.md inside).
"""

from __future__ import annotations

import hashlib
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


# ansible-test pins each sanity test's requirements (pylint==3.3.7, ...) and builds one
# virtualenv per test under ~/.ansible/test/venv, bootstrapping pip==24.2 with a get-pip.py it
# downloads from ci-files.testing.ansible.com, which this machine cannot reach (the package
# index it can). The test runs a pinned ansible-core (ansible/sanity-requirements.txt) in a
# virtualenv of its own, with HOME in a folder of its own (so no virtualenv an earlier,
# unpinned run left is reused), and a get-pip.py stand-in: pip from Python's own ensurepip,
# then exactly what ansible-test asks for (pip==24.2), from the index. ansible-test then
# installs each test's pinned requirements itself (and removes pip again when done: what a
# virtualenv holds is read with importlib.metadata).
PINS = ROOT / "ansible" / "sanity-requirements.txt"
GET_PIP = """\
# Stand-in for get-pip.py (which cannot be downloaded here): pip from Python's own ensurepip,
# then the packages asked for (pip==24.2) from the package index; no setuptools when asked.
# ensurepip runs in a process of its own: in this one it would set PIP_CONFIG_FILE=/dev/null
# for every later pip, which then no longer sees the machine's pip configuration.
import subprocess, sys
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
flags = ("--no-setuptools", "--no-wheel")
args = [a for a in sys.argv[1:] if a not in flags]
rc = subprocess.call([sys.executable, "-m", "pip", "install", *args])
if rc == 0 and "--no-setuptools" in sys.argv:
    rc = subprocess.call([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "setuptools"])
sys.exit(rc)
"""


def pins() -> dict[str, str]:
    """ansible/sanity-requirements.txt as name (lower case) -> 'Name==version'."""
    lines = [line.strip() for line in PINS.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {line.split("==")[0].lower().replace("_", "-"): line for line in lines}


def frozen(python: Path) -> list[str]:
    """Name==version of every distribution PYTHON sees (pip's own included; a virtualenv of
    ansible-test's without requirements has no pip to ask)."""
    code = "import importlib.metadata as m; print('\\n'.join(f'{d.name}=={d.version}' for d in m.distributions()))"
    r = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, check=True)
    return sorted(line for line in r.stdout.splitlines() if line)


def unpinned(installed: list[str]) -> list[str]:
    """The packages of a `pip freeze` that are not exactly as ansible/sanity-requirements.txt pins them."""
    want = pins()
    return [line for line in installed if want.get(line.split("==")[0].lower().replace("_", "-")) != line]


def pinned_ansible_test() -> Path:
    """A virtualenv with the pinned ansible-core and its pinned dependencies, made once per
    content of ansible/sanity-requirements.txt (under ~/.cache/jobgen)."""
    key = hashlib.sha256(PINS.read_bytes()).hexdigest()[:12]
    venv = Path.home() / ".cache" / "jobgen" / f"ansible-sanity-{key}"
    if not (venv / "done").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        r = subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            "--constraint", str(PINS), "ansible-core", "pip"], capture_output=True, text=True, timeout=1800)  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
        # venv's ensurepip brought setuptools (Python 3.11), which nothing here asked for
        subprocess.run([str(venv / "bin/python"), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True)
        (venv / "home").mkdir()
        (venv / "done").touch()
    return venv


def test_sanity_pins_are_what_the_pinned_ansible_test_ships() -> None:
    """Every pin of the pinned ansible-core's sanity.*.txt is in ansible/sanity-requirements.txt
    as it ships it, and the controller virtualenv holds only pinned packages."""
    venv = pinned_ansible_test()
    site = subprocess.run([str(venv / "bin/python"), "-c", "import ansible_test, os; print(os.path.dirname(ansible_test.__file__))"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    shipped = [line for f in sorted(Path(site, "_data", "requirements").glob("sanity.*.txt"))
               for line in f.read_text().splitlines() if "==" in line]  # fmt: skip
    assert shipped and unpinned(shipped) == []
    installed = frozen(venv / "bin/python")
    assert pins()["ansible-core"] in installed
    assert unpinned(installed) == []


def test_ansible_test_sanity_is_clean(tmp_path: Path) -> None:
    """Every sanity test of the pinned ansible-core (validate-modules, pylint, pep8, yamllint,
    import, ansible-doc, ...) on the collection, each in the virtualenv ansible-test builds
    with exactly the pinned tools; its only ignore is the GPLv3 header check."""
    venv = pinned_ansible_test()
    home = venv / "home"
    dest = copy_collection(tmp_path)
    e = {**env(tmp_path), "HOME": str(home), "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    e.pop("VIRTUAL_ENV", None)
    cache = home / ".ansible" / "test" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "get_pip_24_2.py").write_text(GET_PIP)
    argv = [venv / "bin/ansible-test", "sanity", "--local", "--python", f"{sys.version_info.major}.{sys.version_info.minor}", "--color", "no"]
    r = subprocess.run(argv, cwd=dest, env=e, capture_output=True, text=True, timeout=3600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-8000:]
    assert "ERROR" not in out, out[-8000:]
    for test in ("validate-modules", "pylint", "pep8", "yamllint", "import", "ansible-doc", "ignores"):
        assert f'Running sanity test "{test}"' in out, out[-4000:]
    ignores = sorted((COLLECTION / "tests" / "sanity").glob("ignore-*.txt"))
    assert {p.read_text().split()[1] for p in ignores} == {"validate-modules:missing-gplv3-license"}
    # The tools that judged the collection are the pinned ones, in every test's virtualenv.
    venvs = sorted(p.parent.parent for p in (home / ".ansible" / "test" / "venv").glob("*/*/*/bin/python"))
    assert {v.parts[-3] for v in venvs} >= {"sanity.pylint", "sanity.pep8", "sanity.yamllint", "sanity.validate-modules", "sanity.import"}
    assert {v.parts[-3]: unpinned(frozen(v / "bin/python")) for v in venvs} == {v.parts[-3]: [] for v in venvs}
