"""jobgen's Debian package built inside, and installed into, real Debian 12 (systemd 252) and
Debian 13 (systemd 257) containers with that release's own debhelper: the generator runs at
daemon-reload and at boot from where the package put it, and `dpkg -r` turns it off. The same
container's debhelper also builds test_debian.py's `--layout debian` package: units in
/lib/systemd/system on Debian 12, /usr/lib/systemd/system on 13; timer and workers enabled
and started, the oneshot not.

The build and runtime dependencies come from the Debian archive with apt-get inside the
container (it shares the host's network for that), into a persistent tree of the test.
"""

from __future__ import annotations

import io
import posixpath
import sys
import tarfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the container harness

from container import RELEASES, Container, ensure_rootfs_all, format_journal, missing_prerequisites, wait_until  # noqa: E402
from test_debian_generator import checkout_files  # noqa: E402
from integration_support import PACKAGE, ROOT, source_package  # noqa: E402
from test_debian import UNITS, units_in  # noqa: E402

pytestmark = pytest.mark.e2e

BUILD_DEPS = "build-essential debhelper dpkg-dev fakeroot dh-python pybuild-plugin-pyproject python3-hatchling pkgconf"
RUNTIME_DEPS = "python3-jinja2 python3-yaml python3-packaging tzdata"
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


def test_package_built_and_installed_runs_the_generator_at_reload_and_boot(release: str, tmp_path: Path) -> None:
    persist = tmp_path / "disk"
    c = Container(release, private_network=False, persist=persist).boot()
    try:
        extra = " systemd-dev" if release != "252" else ""
        c.run("/bin/sh", "-c", f"apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {BUILD_DEPS}{extra} {RUNTIME_DEPS}", timeout=900)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in checkout_files():
                tar.add(ROOT / f, arcname=f"jobgen/{f}")
        c.run("/bin/sh", "-c", "rm -rf /root/build && mkdir -p /root/build && tar -x -C /root/build", input=buf.getvalue(), binary=True)
        c.run("/bin/sh", "-c", "cd /root/build/jobgen && dpkg-buildpackage -us -uc -b", timeout=600)
        listing = c.run("dpkg-deb", "-c", "/root/build/jobgen_0.1.0_all.deb").stdout
        # dh_link: absolute on Debian 12 (/lib -> /usr), relative on 13 (both under /usr)
        link = next(line.split(" -> ")[1] for line in listing.splitlines() if f".{GENERATOR_DIR[release]}/jobgen-generator -> " in line)
        assert posixpath.normpath(posixpath.join(GENERATOR_DIR[release], link)) == "/usr/bin/jobgen-generator", listing
        layout_debian_with_this_releases_debhelper(c, release, tmp_path)
        c.run("dpkg", "-i", "/root/build/jobgen_0.1.0_all.deb")
        assert c.run("jobgen", "--version").stdout.startswith("jobgen ")

        c.write_file("/etc/jobgen/deb.yaml", MANIFEST)
        c.systemctl("daemon-reload")
        assert show(c, "deb-tick.timer", "LoadState") == "loaded"
        assert show(c, "deb-tick.timer", "SourcePath") == "/etc/jobgen/deb.yaml"
        c.systemctl("start", "deb-tick.timer")
        wait_until(lambda: show(c, "deb-tick.service", "Result") == "success" and show(c, "deb-tick.service", "InvocationID"),
                   bool, "a run of deb-tick.service", 120, lambda: format_journal(c.journal())[-6000:])
    finally:
        c.halt()

    # Reboot the same disk: the boot's generator run and timers.target.wants start the timer.
    c = Container(release, persist=persist).boot()
    try:
        assert show(c, "deb-tick.timer", "ActiveState") == "active"
        assert c.run("readlink", "/run/systemd/generator/timers.target.wants/deb-tick.timer").stdout.strip() == "../deb-tick.timer"
        wait_until(lambda: c.journal("--boot", "SYSLOG_IDENTIFIER=jobgen", "JOBGEN_JOB=deb-tick"), bool,
                   "a run after the reboot", 120, lambda: format_journal(c.journal("--boot"))[-6000:])

        c.systemctl("stop", "deb-tick.timer")
        c.run("dpkg", "-r", "jobgen")
        assert c.run("test", "-e", f"{GENERATOR_DIR[release]}/jobgen-generator", check=False).returncode == 1
        c.systemctl("daemon-reload")
        assert show(c, "deb-tick.timer", "LoadState") == "not-found"
        assert c.run("test", "-e", "/run/systemd/generator/deb-tick.timer", check=False).returncode == 1
    finally:
        c.halt()
