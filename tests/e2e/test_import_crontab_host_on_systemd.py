"""`jobgen import-crontab --host` on real systemd 252 and 257: a Debian host's cron, imported
and applied, runs its jobs from their timers.

The host's cron configuration is Debian's own: /etc/crontab and the cron.daily placeholder
of the release's `cron` package (and, on Debian 13, of `cron-daemon-common`, which ships
/etc/crontab there), unpacked from the .deb files apt downloads from the suite's mirror
(the cron daemon itself is not installed: it would run the jobs too), next to what the tree
already has (/etc/cron.daily/apt-compat and dpkg, /etc/cron.d/e2scrub_all). Added: a
cron.d file and a user crontab of a user `tester`, each with a line that runs every minute
and writes a file. The test waits for those files and for the manager's journal lines.
"""

from __future__ import annotations

import shutil
import time

import pytest

from conftest import TIMINGS
from container import RELEASES, Container, HarnessError, in_image, wait_until

pytestmark = pytest.mark.e2e

DEADLINE = 240.0  # an every-minute timer elapses within 1 minute plus its accuracy (1 minute)
OUT = "/var/lib/jobgen-import"
USER_FILE = "/home/tester/user-ran"
CROND_FILE = "/var/lib/crond-ran"
USER_CRONTAB = "# tester's crontab\n* * * * * /usr/bin/touch /home/tester/user-ran\n"
CROND = "# a local cron.d file\nMAILTO=\"\"\n* * * * * root /usr/bin/touch /var/lib/crond-ran\n"

INSTALL_CRON_CONFIG = """\
set -e
root=$1
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -c '
  set -e
  apt-get -qq update
  mkdir -p /var/tmp/cron-debs /var/tmp/cron-pkg && cd /var/tmp/cron-debs
  pkgs=cron
  if apt-cache show cron-daemon-common >/dev/null 2>&1; then pkgs="$pkgs cron-daemon-common"; fi
  apt-get -qq download $pkgs
  for deb in ./*.deb; do dpkg-deb -x "$deb" /var/tmp/cron-pkg; done
  cp /var/tmp/cron-pkg/etc/crontab /etc/crontab
  for d in /var/tmp/cron-pkg/etc/cron.*; do mkdir -p "/etc/${d##*/}"; cp -a "$d/." "/etc/${d##*/}/"; done
  useradd -m tester
  rm -rf /var/lib/apt/lists/* /var/tmp/cron-debs /var/tmp/cron-pkg
'
"""


@pytest.fixture(params=sorted(RELEASES), ids=lambda r: f"systemd{r}")
def debian_cron(request, e2e_host, jobgen_dist, tmp_path):
    release = request.param
    persist = tmp_path / "persist"
    r = in_image(RELEASES[release], persist, ["/bin/sh", "-c", INSTALL_CRON_CONFIG, "sh", str(persist / "merged")],
                 capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"unpacking Debian's cron configuration into the {RELEASES[release]} tree failed:\n{r.stderr[-3000:]}",
                    pytrace=False)
    c = Container(release, persist=persist)
    try:
        c.boot()
        jobgen_dist.install(c)
    except HarnessError as e:
        c.halt()
        pytest.fail(str(e), pytrace=False)
    yield c
    c.halt()
    shutil.rmtree(persist, ignore_errors=True)


def test_a_debian_hosts_cron_imported_and_applied_runs_from_timers(debian_cron):
    c = debian_cron
    c.write_file("/etc/cron.d/local-touch", CROND)
    c.write_file("/var/spool/cron/crontabs/tester", USER_CRONTAB, mode="0600")
    c.run("chown", "tester:crontab", "/var/spool/cron/crontabs/tester", check=False)
    c.run("chown", "tester", "/var/spool/cron/crontabs/tester")
    c.run("mkdir", "-p", OUT)
    shipped = c.run("sh", "-c", "ls -A /etc/cron.daily").stdout.split()
    # Debian 12's tree has e2fsprogs' /etc/cron.d/e2scrub_all, Debian 13's does not.
    cron_d = [n for n in c.run("ls", "-A", "/etc/cron.d").stdout.split() if not n.startswith(".")]

    started = time.monotonic()
    imported = c.run("jobgen", "import-crontab", "--host", "-o", OUT, "--zone", "UTC", check=False, timeout=300)
    TIMINGS[f"import-crontab --host, systemd {c.release} (s)"] = time.monotonic() - started
    assert imported.returncode == 0, imported.stderr + imported.stdout
    report = imported.stdout.splitlines()
    # Debian's /etc/crontab runs the run-parts folders; each is mapped once, not translated twice.
    assert [line.split(": ", 2)[1] for line in report if line.startswith("/etc/crontab:")] == ["mapped"] * 4, report
    assert "/etc/cron.d/local-touch:3: translated: local-touch-touch-l3 in cron.d-local-touch.yaml" in report, report
    assert "/var/spool/cron/crontabs/tester:2: translated: tester-touch-l2 in user-tester.yaml" in report, report
    # The package's placeholder is a dotfile: skipped as cron skips it.
    assert ("/etc/cron.daily/.placeholder: ignored: cron skips it: a name of letters, digits, '_' and '-' only is read "
            "(run-parts(8), Debian cron(8))") in report, (shipped, report)
    assert "/etc/cron.daily/dpkg: translated: cron-daily-dpkg in cron.daily.yaml" in report, report
    manifests = sorted(c.run("ls", OUT).stdout.split())
    assert manifests == sorted([*(f"cron.d-{n}.yaml" for n in cron_d), "cron.daily.yaml", "user-tester.yaml"]), manifests
    assert "cron.d-local-touch.yaml" in manifests

    applied = c.run("jobgen", "apply", *(f"{OUT}/{m}" for m in manifests), check=False, timeout=300)
    started = time.monotonic()
    assert applied.returncode == 0, applied.stderr + applied.stdout
    timers = c.systemctl("list-timers", "--all", "--no-legend").stdout
    for unit in ("tester-touch-l2.timer", "local-touch-touch-l3.timer", "cron-daily-dpkg.timer"):
        assert unit in timers, timers

    def ran(path: str) -> bool:
        return c.run("test", "-e", path, check=False).returncode == 0

    for path, unit in ((USER_FILE, "tester-touch-l2.service"), (CROND_FILE, "local-touch-touch-l3.service")):
        wait_until(lambda: ran(path), bool, f"{path} written by {unit}", DEADLINE,
                   context=lambda: c.systemctl("status", unit, check=False).stdout)
        TIMINGS.setdefault(f"apply -> {unit} ran, systemd {c.release} (s)", time.monotonic() - started)
        wait_until(lambda: c.journal("UNIT=" + unit), lambda entries: any(
            e.get("MESSAGE", "").startswith(("Finished ", "Deactivated successfully")) or "Succeeded" in e.get("MESSAGE", "")
            for e in entries), f"the manager's journal lines on {unit}", DEADLINE)
    # The user crontab's job ran as its user, the cron.d line as root.
    owner = c.run("stat", "-c", "%U", USER_FILE).stdout.strip()
    assert owner == "tester", owner
    assert c.run("stat", "-c", "%U", CROND_FILE).stdout.strip() == "root"
    # Started by their timers: the timers' last trigger is set.
    for timer in ("tester-touch-l2.timer", "local-touch-touch-l3.timer"):
        show = c.systemctl("show", "-p", "LastTriggerUSec", timer).stdout.strip()
        assert show not in ("LastTriggerUSec=", "LastTriggerUSec=n/a"), show
