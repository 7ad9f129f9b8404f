"""jobgen's Debian package built inside, and installed into, real Debian 12 (systemd 252) and
Debian 13 (systemd 257) containers with that release's own debhelper: the generator runs at
daemon-reload and at boot from where the package put it, with the templates compiled by that
release's python3-jinja2 at build time; `apt-get remove` turns it off and keeps the generator's
cache, `apt-get purge` removes the cache and nothing else. The same container's debhelper
also builds test_debian.py's `--layout debian` package: units in /lib/systemd/system on
Debian 12, /usr/lib/systemd/system on 13; timer and workers enabled and started, the oneshot not.

The build dependencies are the ones debian/control names (`apt-get build-dep`), the runtime
ones its Depends (`apt-get install ./jobgen_*.deb`), from the Debian archive inside the
container (it shares the host's network for that), into a persistent tree of the test.
"""
from __future__ import annotations

import io
import posixpath
import re
import sys
import tarfile
from pathlib import Path

import pytest

from jobgen.compiler import precompiled
from jobgen.host import gencache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the container harness

from container import RELEASES, Container, ensure_rootfs_all, format_journal, missing_prerequisites, wait_until  # noqa: E402
from test_debian_generator import checkout_files  # noqa: E402
from integration_support import PACKAGE, ROOT, source_package  # noqa: E402
from test_debian import UNITS, units_in  # noqa: E402

pytestmark = pytest.mark.e2e

APT = "DEBIAN_FRONTEND=noninteractive apt-get -y -qq --no-install-recommends"
GENERATOR_DIR = {"252": "/lib/systemd/system-generators", "257": "/usr/lib/systemd/system-generators"}
MANIFEST = """\
jobgen: 1
jobs:
  deb-tick:
    command: [/bin/true]
    schedule: {every: 3s}
    accuracy: 1s
"""




def show(c: Container, unit: str, prop: str) -> str:
    return c.systemctl("show", "-P", prop, unit, check=False).stdout.strip()


@pytest.fixture(params=sorted(RELEASES), ids=lambda r: f"systemd{r}")
def release(request):
    suite = RELEASES[request.param]
    if reason := missing_prerequisites([suite]):
        pytest.skip(reason)
    ensure_rootfs_all([suite])
    return request.param


# Where dh_installsystemd puts units: /lib on Debian 12 (debhelper 13.11.4), /usr/lib on 13.
UNIT_DIR = {"252": "./lib/systemd/system/", "257": "./usr/lib/systemd/system/"}


def layout_debian_with_this_releases_debhelper(c: Container, release: str, tmp: Path) -> None:
    """test_debian.py's package (`jobgen render --layout debian`, rendered on the host),
    built by the container's own dpkg-buildpackage and read with its dpkg-deb."""
    src = source_package(tmp / "shopjobs")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(src, arcname="shopjobs")
    c.run("/bin/sh", "-c", "rm -rf /root/pkg && mkdir -p /root/pkg && tar -x -C /root/pkg", input=buf.getvalue(), binary=True)
    c.run("/bin/sh", "-c", "cd /root/pkg/shopjobs && dpkg-buildpackage -us -uc -b", timeout=600)
    deb = f"/root/pkg/{PACKAGE}_1.0_all.deb"
    paths = [line.split()[5] for line in c.run("dpkg-deb", "-c", deb).stdout.splitlines()]
    units = {p[len(UNIT_DIR[release]):] for p in paths if p.startswith(UNIT_DIR[release]) and not p.endswith("/")}
    assert units == UNITS, paths
    assert not [p for p in paths if "/systemd/system/" in p and not p.startswith(UNIT_DIR[release])], paths
    assert f"./usr/lib/tmpfiles.d/{PACKAGE}.conf" in paths
    c.run("dpkg-deb", "-e", deb, "/root/pkg/control")
    postinst = c.read_file("/root/pkg/control/postinst").decode()
    prerm = c.read_file("/root/pkg/control/prerm").decode()
    started = {"nightly-report.timer", "mailer.target", "indexer.service"}
    assert units_in(postinst, "deb-systemd-helper enable") == started
    assert units_in(postinst, r"deb-systemd-invoke \$_dh_action") == started
    assert "nightly-report.service" not in postinst
    assert units_in(prerm, "deb-systemd-invoke stop") == started


# The package's compiled templates (precompiled.FOLDER), as Python imports them: by their
# byte code, which py3compile wrote at install (dh_python3's postinst).
COMPILED = "/usr/lib/python3/dist-packages/jobgen/" + precompiled.FOLDER
STAMP_OF_THIS_JINJA2 = (
    "import jinja2; from jobgen.compiler import precompiled, resources; "
    "print(precompiled.stamp(resources.template_dir())); print('jinja2', jinja2.__version__)"
)


def loaded_compiled_templates(verbose: str) -> set[str]:
    """The templates whose compiled module (tmpl_SHA1, precompiled.module_filename) a run
    imported from the package's byte code, read from its PYTHONVERBOSE lines."""
    modules = {precompiled.module_filename(p.name)[:-3]: p.name for p in (ROOT / "templates").glob("*.j2")}
    found = re.findall(rf"^# code object from '{re.escape(COMPILED)}/__pycache__/(tmpl_[0-9a-f]+)\.cpython-3\d+\.pyc'$", verbose, re.MULTILINE)
    return {modules[m] for m in found}


def cache_entries(c: Container, folder: str) -> list[str]:
    r = c.run("find", folder, "-name", "*" + gencache.SUFFIX, check=False)
    return r.stdout.split() if r.returncode == 0 else []


def exists(c: Container, path: str) -> bool:
    return c.run("test", "-e", path, check=False).returncode == 0


def test_package_built_and_installed_runs_the_generator_at_reload_and_boot(release: str, tmp_path: Path) -> None:
    persist = tmp_path / "disk"
    c = Container(release, private_network=False, persist=persist).boot()
    try:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in checkout_files():
                tar.add(ROOT / f, arcname=f"jobgen/{f}")
        c.run("/bin/sh", "-c", "rm -rf /root/build && mkdir -p /root/build && tar -x -C /root/build", input=buf.getvalue(), binary=True)
        # What debian/control's Build-Depends name, nothing more (build-essential: apt adds it).
        c.run("/bin/sh", "-c", f"apt-get update -qq && {APT} build-dep /root/build/jobgen", timeout=900)
        c.run("/bin/sh", "-c", "cd /root/build/jobgen && dpkg-buildpackage -us -uc -b", timeout=600)
        listing = c.run("dpkg-deb", "-c", "/root/build/jobgen_0.1.0_all.deb").stdout
        # dh_link: absolute on Debian 12 (/lib -> /usr), relative on 13 (both under /usr)
        link = next(line.split(" -> ")[1] for line in listing.splitlines() if f".{GENERATOR_DIR[release]}/jobgen-generator -> " in line)
        assert posixpath.normpath(posixpath.join(GENERATOR_DIR[release], link)) == "/usr/bin/jobgen-generator", listing
        assert f".{COMPILED}/{precompiled.STAMP}" in listing, listing
        layout_debian_with_this_releases_debhelper(c, release, tmp_path)
        c.run("/bin/sh", "-c", f"{APT} install /root/build/jobgen_0.1.0_all.deb", timeout=900)
        assert c.run("jobgen", "--version").stdout.startswith("jobgen ")
        # compiled by this release's python3-jinja2: the stamp render.py requires
        stamp = c.read_file(f"{COMPILED}/{precompiled.STAMP}").decode().strip()
        assert stamp == c.run("python3", "-c", STAMP_OF_THIS_JINJA2).stdout.strip()

        c.write_file("/etc/jobgen/deb.yaml", MANIFEST)
        c.systemctl("daemon-reload")
        assert show(c, "deb-tick.timer", "LoadState") == "loaded"
        assert show(c, "deb-tick.timer", "SourcePath") == "/etc/jobgen/deb.yaml"
        c.systemctl("start", "deb-tick.timer")
        wait_until(lambda: show(c, "deb-tick.service", "Result") == "success" and show(c, "deb-tick.service", "InvocationID"),
                   bool, "a run of deb-tick.service", 120, lambda: format_journal(c.journal())[-6000:])

        # A run that compiles (cache off) renders with the package's compiled templates, from
        # the byte code py3compile wrote: no template is compiled from its text.
        run = c.run("env", "PYTHONVERBOSE=1", f"{gencache.FOLDER_ENV}=", "jobgen-generator", "/tmp/gen-compiled")
        assert {"service.j2", "timer.j2", "unit.j2"} <= loaded_compiled_templates(run.stderr), run.stderr[-6000:]
        assert c.run("cmp", "/tmp/gen-compiled/deb-tick.timer", "/run/systemd/generator/deb-tick.timer").returncode == 0
    finally:
        c.halt()

    # Reboot the same disk: the boot's generator run and timers.target.wants start the timer.
    c = Container(release, persist=persist).boot()
    try:
        assert show(c, "deb-tick.timer", "ActiveState") == "active"
        assert c.run("readlink", "/run/systemd/generator/timers.target.wants/deb-tick.timer").stdout.strip() == "../deb-tick.timer"
        wait_until(lambda: c.journal("--boot", "SYSLOG_IDENTIFIER=jobgen", "JOBGEN_JOB=deb-tick"), bool,
                   "a run after the reboot", 120, lambda: format_journal(c.journal("--boot"))[-6000:])

        # Cache entries in both folders the generator keeps them in: runs by hand (outside
        # systemd's sandbox, which on 257 makes /var/cache read-only for generators).
        c.run("jobgen-generator", "/tmp/gen-var")
        c.run("env", f"{gencache.FOLDER_ENV}={gencache.RUN_FOLDER}", "jobgen-generator", "/tmp/gen-run")
        entries = {folder: cache_entries(c, folder) for folder in gencache.FOLDERS}
        assert all(entries.values()), entries
        # what purge must leave: the administrator's manifest, jobgen's lock folder, a file
        # a link in the cache points to, and /var/cache itself
        c.run("/bin/sh", "-c", "mkdir -p /run/jobgen && touch /run/jobgen/keep.lock /root/keep && "
                               f"ln -s /root/keep {gencache.FOLDER}/keep-link")  # fmt: skip
        kept = ["/etc/jobgen/deb.yaml", "/run/jobgen/keep.lock", "/root/keep", "/var/cache"]

        c.systemctl("stop", "deb-tick.timer")
        c.run("/bin/sh", "-c", f"{APT} remove jobgen", timeout=300)
        assert not exists(c, f"{GENERATOR_DIR[release]}/jobgen-generator")
        c.systemctl("daemon-reload")
        assert show(c, "deb-tick.timer", "LoadState") == "not-found"
        assert not exists(c, "/run/systemd/generator/deb-tick.timer")
        # remove keeps the cache (and the manifest)
        assert {folder: cache_entries(c, folder) for folder in gencache.FOLDERS} == entries
        assert [p for p in kept if not exists(c, p)] == []

        c.run("/bin/sh", "-c", f"{APT} purge jobgen", timeout=300)
        assert c.run("dpkg-query", "-W", "-f=${db:Status-Status}", "jobgen", check=False).stdout in ("", "not-installed")
        made = str(Path(gencache.FOLDER).parents[gencache.MADE - 2])  # /var/cache/jobgen
        assert [p for p in (made, gencache.RUN_FOLDER) if exists(c, p)] == []
        assert [p for p in kept if not exists(c, p)] == []
    finally:
        c.halt()
