"""jobgen's own Debian package (debian/), built from this checkout with real
`dpkg-buildpackage -us -uc -b` and read back with dpkg-deb: jobgen-generator where systemd
runs generators, linked to /usr/bin/jobgen-generator (so the `jobgen` beside its real path is
/usr/bin/jobgen, the holder the units of cluster-locked jobs call), the wheel's files, and
Depends that Debian can satisfy: pyproject's floors without typer.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from integration_support import ROOT, need_debian_build_tools

# pyproject requirement -> Debian package (typer is left out: Debian's is older than the floor)
DEBIAN_NAMES = {"jinja2": "python3-jinja2", "pyyaml": "python3-yaml", "packaging": "python3-packaging"}
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}


def checkout_files() -> list[str]:
    """Tracked and new (not ignored) files of the checkout, as a fresh clone would hold them."""
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [f for f in r.stdout.splitlines() if (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def jobgen_deb(tmp_path_factory) -> Path:
    need_debian_build_tools()
    for tool in ("pybuild", "pkg-config"):
        if shutil.which(tool, path=CLEAN_ENV["PATH"]) is None:
            pytest.skip(f"{tool} not found: scripts/bootstrap installs jobgen's build dependencies")
    work = tmp_path_factory.mktemp("jobgen-deb")
    src = work / "jobgen"
    for f in checkout_files():
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    # The system's python3 and Debian's build tools, not a virtualenv's or pyenv's.
    build = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=CLEAN_ENV, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    (deb,) = work.glob("jobgen_*_all.deb")
    return deb


def listing(deb: Path) -> dict[str, str]:
    """path -> link target ('' for files and folders)."""
    out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    entries = {}
    for line in out.splitlines():
        path = line.split(None, 5)[5]
        name, _, target = path.partition(" -> ")
        entries[name] = target
    return entries


def field(deb: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True).stdout.strip()


def test_generator_is_linked_into_systemds_generator_folder(jobgen_deb: Path) -> None:
    generator_dir = subprocess.run(
        ["pkg-config", "--variable=systemdsystemgeneratordir", "systemd"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert generator_dir in ("/lib/systemd/system-generators", "/usr/lib/systemd/system-generators")
    entries = listing(jobgen_deb)
    # dh_link: absolute on Debian 12 (/lib -> /usr), relative where both are under /usr
    link = entries[f".{generator_dir}/jobgen-generator"]
    assert posixpath.normpath(posixpath.join(generator_dir, link)) == "/usr/bin/jobgen-generator"
    assert "./usr/bin/jobgen-generator" in entries and "./usr/bin/jobgen" in entries
    # the folders the generator reads
    assert "./etc/jobgen/" in entries
    assert "./usr/lib/jobgen/" not in entries  # the vendor packages' folder: theirs to create


def test_package_carries_the_wheels_files(jobgen_deb: Path, tmp_path: Path) -> None:
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp_path.glob("jobgen-*.whl")
    in_wheel = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("jobgen/")}
    prefix = "./usr/lib/python3/dist-packages/"
    in_deb = {p[len(prefix):] for p in listing(jobgen_deb) if p.startswith(prefix + "jobgen/") and not p.endswith("/")}
    # The templates compiled at build time (hatch_build.py) are there when the build had
    # jinja2 (pip's build does; Debian's, without python3-jinja2 in Build-Depends, does not,
    # and jobgen then compiles templates/ at run time: compiler/precompiled.py).
    compiled = {n for n in in_wheel if n.startswith("jobgen/_templates/")}
    assert compiled
    assert in_deb - compiled == in_wheel - compiled
    assert in_deb & compiled in (set(), compiled)
    assert any(p.startswith("jobgen/templates/") for p in in_deb)
    assert field(jobgen_deb, "Version") == re.search(r'__version__ = "([^"]+)"', (ROOT / "src/jobgen/__init__.py").read_text())[1]


def test_depends_are_pyprojects_floors_without_typer(jobgen_deb: Path) -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        requirements = tomllib.load(f)["project"]["dependencies"]
    floors = {}
    for text in requirements:
        req = Requirement(text)  # "typer>=0.18.0,<0.29": the floor is the >= clause
        (floor,) = [spec.version for spec in req.specifier if spec.operator == ">="]
        if req.name.lower() != "typer":
            floors[DEBIAN_NAMES[req.name.lower()]] = floor
    depends = [d.strip() for d in field(jobgen_deb, "Depends").split(",")]
    python_deps = {}
    for dep in depends:
        m = re.fullmatch(r"(python3-[a-z0-9.-]+) \(>= ([^)]+)\)", dep)
        if m:
            python_deps[m[1]] = m[2]
    assert python_deps == floors
    assert not [d for d in depends if "typer" in d or "click" in d], depends
    # flock(1), logger(1) of the generated units: util-linux is Essential, so not named
    assert "util-linux" not in depends
    assert "tzdata" in depends  # timezone: zones, read by systemd and checked by jobgen


def test_without_typer_other_commands_say_what_works(tmp_path: Path) -> None:
    # What Debian's package is: jobgen without typer. The runtime verbs run; the rest say why not.
    code = "import sys; sys.modules['typer'] = None; sys.argv = ['jobgen', *sys.argv[1:]]; from jobgen.cli import main; main()"
    r = subprocess.run([sys.executable, "-c", code, "render", "x.yaml", "-o", "out"], capture_output=True, text=True, cwd=tmp_path, env={**os.environ})
    assert r.returncode == 2
    assert r.stderr.startswith("jobgen: error: this command needs typer >= 0.18, which is not installed;"), r.stderr
    assert not (tmp_path / "out").exists()
    v = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True, text=True)
    assert (v.returncode, v.stdout.startswith("jobgen ")) == (0, True), v.stderr


def lintian(deb: Path) -> list[str]:
    """lintian's tags on a package, information tags included: every line it prints."""
    if shutil.which("lintian") is None:
        pytest.skip("lintian not found: scripts/bootstrap installs it")
    r = subprocess.run(["lintian", "--no-cfg", "--display-info", "--show-overrides", str(deb)], capture_output=True, text=True, timeout=600, env=CLEAN_ENV)
    return [line for line in (r.stdout + r.stderr).splitlines() if not line.startswith("running with root privileges")]


def test_lintian_finds_nothing_in_jobgens_package(jobgen_deb: Path) -> None:
    # no-copyright-file, depends-on-essential-package-without-using-version (util-linux),
    # no-manual-page, package-contains-empty-directory (usr/lib/jobgen/): all fixed, none hidden
    assert lintian(jobgen_deb) == []
    assert not (ROOT / "debian/jobgen.lintian-overrides").exists() and not (ROOT / "debian/source/lintian-overrides").exists()


def test_manual_pages_are_in_the_package(jobgen_deb: Path) -> None:
    entries = listing(jobgen_deb)
    for page in ("man1/jobgen.1.gz", "man8/jobgen-generator.8.gz", "man5/jobgen.yaml.5.gz"):
        assert f"./usr/share/man/{page}" in entries
    assert "./usr/share/doc/jobgen/copyright" in entries
