"""jobgen's own Debian package (debian/), built from this checkout with real
`dpkg-buildpackage -us -uc -b` and read back with dpkg-deb: jobgen-generator where systemd
runs generators, linked to /usr/bin/jobgen-generator (so the `jobgen` beside its real path is
/usr/bin/jobgen, the holder the units of cluster-locked jobs call), the wheel's files with the
templates compiled by the build release's python3-jinja2 (run without it), Depends that Debian can satisfy
(pyproject's floors without typer), and a purge that removes the generator's cache.
"""

from __future__ import annotations

import hashlib
import json
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

from jobgen.compiler import precompiled
from jobgen.host import gencache

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
    deps = subprocess.run(["dpkg-checkbuilddeps"], cwd=src, env=CLEAN_ENV, capture_output=True, text=True)
    if deps.returncode != 0:
        pytest.skip(f"{deps.stderr.strip()}: scripts/bootstrap installs jobgen's build dependencies")
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
    # The templates compiled at build time (hatch_build.py) included: python3-jinja2 is in
    # Build-Depends, so the generator does not compile them at boot.
    assert {n for n in in_deb if n.startswith("jobgen/_templates/")}
    assert in_deb == in_wheel
    assert any(p.startswith("jobgen/templates/") for p in in_deb)
    assert field(jobgen_deb, "Version") == re.search(r'__version__ = "([^"]+)"', (ROOT / "src/jobgen/__init__.py").read_text())[1]


def pyproject_floors() -> dict[str, str]:
    """Debian package -> the floor pyproject.toml's requirement names (typer left out)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        requirements = tomllib.load(f)["project"]["dependencies"]
    floors = {}
    for text in requirements:
        req = Requirement(text)  # "typer>=0.18.0,<0.29": the floor is the >= clause
        (floor,) = [spec.version for spec in req.specifier if spec.operator == ">="]
        if req.name.lower() != "typer":
            floors[DEBIAN_NAMES[req.name.lower()]] = floor
    return floors


def test_depends_are_pyprojects_floors_without_typer(jobgen_deb: Path) -> None:
    floors = pyproject_floors()
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


def build_depends() -> list[str]:
    """debian/control's Build-Depends, one relation each (comment lines left out)."""
    text = "".join(line for line in (ROOT / "debian/control").read_text().splitlines(keepends=True) if not line.startswith("#"))
    value = re.search(r"^Build-Depends:(.*(?:\n[ \t].*)*)", text, re.MULTILINE)[1]
    return [" ".join(d.split()) for d in value.split(",") if d.strip()]


def test_the_build_has_jinja2_at_the_floor_depends_names() -> None:
    # Without jinja2 the wheel's build hook compiles nothing (hatch_build.py).
    (jinja2,) = [d for d in build_depends() if d.startswith("python3-jinja2")]
    assert jinja2 == f"python3-jinja2 (>= {pyproject_floors()['python3-jinja2']})"


def unpacked(deb: Path, where: Path) -> Path:
    """The package's files under WHERE; the folder Python imports jobgen from."""
    subprocess.run(["dpkg-deb", "-x", str(deb), str(where)], check=True)
    return where / "usr/lib/python3/dist-packages"


# Run by the system's python3 with the package's files first on the path: how render.py
# renders (the compiled templates, or jinja2 from templates/), from where, which jinja2 the
# stamp names, and the sha256 of each file rendered. argv: site folder, manifest, and
# "no-jinja2" to make jinja2 unimportable (as if python3-jinja2 had been removed or broken
# by an upgrade).
RENDER_WITH_THE_PACKAGE = """\
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[3:] == ["no-jinja2"]:
    sys.modules["jinja2"] = None
from jobgen.compiler import pipeline, render
files = pipeline.build(sys.argv[2]).files
stamp = (render.compiled_dir() / "SOURCES").read_text().splitlines()
print(json.dumps({"templates": type(render._templates()).__module__ + "." + type(render._templates()).__name__,
                  "compiled": str(render.compiled_dir()), "stamp": stamp, "jinja2 loaded": "jinja2.environment" in sys.modules,
                  "files": {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}}))
"""


def render_with_the_package(site: Path, manifest: Path, *how: str) -> dict:
    r = subprocess.run(["/usr/bin/python3", "-I", "-c", RENDER_WITH_THE_PACKAGE, str(site), str(manifest), *how],
                       capture_output=True, text=True, env=CLEAN_ENV, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def debians_jinja2() -> str:
    r = subprocess.run(["/usr/bin/python3", "-I", "-c", "import jinja2; print(jinja2.__version__)"],
                       capture_output=True, text=True, env=CLEAN_ENV, check=True)  # fmt: skip
    return r.stdout.strip()


def test_the_package_renders_with_templates_compiled_by_the_build_releases_jinja2(jobgen_deb: Path, tmp_path: Path) -> None:
    site = unpacked(jobgen_deb, tmp_path)
    run = render_with_the_package(site, ROOT / "examples/shop.yaml")
    compiled = site / "jobgen" / precompiled.FOLDER
    assert (run["templates"], run["compiled"], run["jinja2 loaded"]) == ("jobgen.compiler.precompiled.Templates", str(compiled), False)
    assert run["stamp"] == [precompiled.stamp(site / "jobgen/templates"), f"jinja2 {debians_jinja2()}"]
    # the bytes templates/ renders (this checkout, the virtualenv's jinja2)
    from jobgen.compiler import pipeline

    files = pipeline.build(str(ROOT / "examples/shop.yaml")).files
    assert run["files"] == {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def test_the_compiled_templates_need_no_jinja2_so_an_upgrade_of_it_changes_nothing(jobgen_deb: Path, tmp_path: Path) -> None:
    # The package's modules run without jinja2 (precompiled.py): a python3-jinja2 upgraded,
    # or not importable at all, neither breaks nor slows a render or a boot.
    site = unpacked(jobgen_deb, tmp_path)
    built = render_with_the_package(site, ROOT / "examples/shop.yaml")
    without = render_with_the_package(site, ROOT / "examples/shop.yaml", "no-jinja2")
    assert without["templates"] == "jobgen.compiler.precompiled.Templates"
    assert without["files"] == built["files"]


def purged_paths() -> list[str]:
    """What debian/jobgen.postrm removes on purge: the paths of its `rm -rf` lines."""
    script = (ROOT / "debian/jobgen.postrm").read_text()
    purge = re.search(r"^\s*purge\)\n(.*?)^\s*;;", script, re.MULTILINE | re.DOTALL)[1]
    return [path for line in purge.splitlines() if (m := re.fullmatch(r"\s*rm -rf (.+)", line)) for path in m[1].split()]


def test_purge_removes_the_generators_cache_folders_and_nothing_else() -> None:
    # The folders the generator makes (gencache.MADE trailing ones of FOLDER: /var/cache/jobgen,
    # never /var/cache) and RUN_FOLDER; the maintainer script names them as literals.
    made = str(Path(gencache.FOLDER).parents[gencache.MADE - 2])
    assert purged_paths() == [made, gencache.RUN_FOLDER]
    assert made.startswith("/var/cache/") and made.count("/") == 3


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
