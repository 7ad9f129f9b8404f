"""The .deb of `--layout debian` installed with dpkg on real systemd 252 and 257 (containers of
tests/e2e/container.py): install, remove and purge do what the README says.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))  # the container harness

from container import RELEASES, Container, ensure_rootfs_all, missing_prerequisites  # noqa: E402

pytestmark = pytest.mark.e2e

STARTED = ("nightly-report.timer", "mailer.target", "mailer@1.service", "mailer@2.service", "indexer.service")
STAMP = "/var/lib/systemd/timers/stamp-nightly-report.timer"  # systemd.timer(5), Persistent=


@pytest.fixture(params=sorted(RELEASES), ids=lambda r: f"systemd{r}")
def container(request):
    suite = RELEASES[request.param]
    if reason := missing_prerequisites([suite]):
        pytest.skip(reason)
    ensure_rootfs_all([suite])
    c = Container(request.param)
    c.boot()
    try:
        yield c
    finally:
        c.halt()


def states(c: Container, verb: str, *units: str) -> list[str]:
    return c.systemctl(verb, *units, check=False).stdout.split()


def test_install_starts_timer_and_workers_remove_stops_them_purge_keeps_the_stamp(container: Container, built_deb: Path) -> None:
    c = container
    c.write_file("/root/shopjobs.deb", built_deb.read_bytes())
    c.run("dpkg", "-i", "/root/shopjobs.deb")

    assert states(c, "is-active", *STARTED) == ["active"] * len(STARTED)
    assert states(c, "is-enabled", "nightly-report.timer", "mailer.target", "indexer.service") == ["enabled"] * 3
    # The job's service was installed, not run: no invocation yet, and it is static (the timer wants it).
    assert c.systemctl("show", "-P", "InvocationID", "nightly-report.service").stdout.strip() == ""
    assert states(c, "is-enabled", "nightly-report.service") == ["static"]
    # postinst ran systemd-tmpfiles: the lock file the snippet names is there before the first
    # run or boot.
    snippet = c.read_file("/usr/lib/tmpfiles.d/shopjobs.conf").decode()
    lock = next(w for line in snippet.splitlines() for w in line.split() if w.endswith("/nightly-report.lock"))
    c.run("test", "-f", lock)
    # ... so the job runs through its lock now.
    c.systemctl("start", "nightly-report.service", timeout=120)
    assert c.systemctl("show", "-P", "Result", "nightly-report.service").stdout.strip() == "success"
    c.run("test", "-f", STAMP)  # Persistent=yes: systemd keeps the last trigger time here

    c.run("dpkg", "-r", "shopjobs")
    assert states(c, "is-active", *STARTED) == ["inactive"] * len(STARTED)
    assert c.run("ls", "/lib/systemd/system/nightly-report.timer", check=False).returncode != 0
    # remove keeps the enablement (so a reinstall keeps the admin's choice) ...
    c.run("test", "-L", "/etc/systemd/system/timers.target.wants/nightly-report.timer")

    c.run("dpkg", "--purge", "shopjobs")
    # ... purge forgets it,
    assert c.run("test", "-L", "/etc/systemd/system/timers.target.wants/nightly-report.timer", check=False).returncode == 1
    assert c.run("test", "-L", "/etc/systemd/system/multi-user.target.wants/mailer.target", check=False).returncode == 1
    # but not the timer's Persistent= stamp: a later timer of the same name catches up from it.
    c.run("test", "-f", STAMP)
