"""mail_on_failure on real systemd 252 and 257: a failing job's mail reaches a local mailbox.

The mail goes through a real MTA: Debian's dma (DragonFly Mail Agent, a sendmail that
delivers local mail itself), installed with apt into a persistent overlay of the suite's
cached root filesystem before the boot (container.in_image), with a user `ops` whose
mailbox is read back. Without a sendmail (the session's plain container) the mail unit
logs one line and succeeds.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from container import RELEASES, Container, HarnessError, in_image
from conftest import render

from jobgen.compiler import notify

pytestmark = pytest.mark.e2e

JOB = "nightly-report"  # a '-': %I would make it '/' unless escaped
UNIT = f"{JOB}.service"
MAILBOX = "/var/mail/ops"
DEADLINE = 90.0

MANIFEST = """\
jobgen: 1
jobs:
  nightly-report:
    command: [/bin/sh, -c, "echo report input is missing; exit 3"]
    schedule: yearly
    overlap: allow
    mail_on_failure: {address}
"""

# Run on the host with the overlay mounted at $1: dma and the user `ops`, from the suite's
# own mirror (the tree's sources.list), the host's resolver for the download only.
INSTALL_DMA = """\
set -e
root=$1
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc"' EXIT
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  sh -c 'apt-get -qq update && apt-get -qq install -y --no-install-recommends dma && useradd -m ops && rm -rf /var/lib/apt/lists/*'
"""


def _wait(what: str, check, c: Container):
    deadline = time.monotonic() + DEADLINE
    while not (found := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"systemd {c.release}: {what} within {DEADLINE:.0f}s", pytrace=False)
        time.sleep(0.2)
    return found


@pytest.fixture(params=sorted(RELEASES), ids=lambda r: f"systemd{r}")
def with_dma(request, e2e_host, tmp_path):
    release = request.param
    persist = tmp_path / "persist"
    r = in_image(RELEASES[release], persist, ["/bin/sh", "-c", INSTALL_DMA, "sh", str(persist / "merged")],
                 capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"installing dma into the {RELEASES[release]} tree failed:\n{r.stderr[-3000:]}", pytrace=False)
    c = Container(release, persist=persist)
    try:
        c.boot()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    yield c
    c.halt()
    shutil.rmtree(persist, ignore_errors=True)


def _fail_the_job(c: Container, tmp_path: Path, address: str) -> str:
    out = render(MANIFEST.format(address=address), c.release, tmp_path / "out")
    installed = c.install_units(out)
    assert notify.MAIL_TEMPLATE in installed
    r = c.systemctl("start", UNIT, check=False)
    assert r.returncode != 0  # the job failed: OnFailure= starts the mail unit
    return notify.mail_unit(UNIT, address)


def test_a_failing_job_is_mailed_through_the_hosts_mta(with_dma, tmp_path):
    c = with_dma
    mail_unit = _fail_the_job(c, tmp_path, "ops")

    def delivered() -> str:
        r = c.run("cat", MAILBOX, check=False)
        return r.stdout if r.returncode == 0 and f"Subject: jobgen: {UNIT} failed" in r.stdout else ""

    mail = _wait(f"no mail for {UNIT} in {MAILBOX}", delivered, c)
    assert "\nTo: ops\n" in mail and "by vm (DragonFly Mail Agent" in mail, mail  # delivered by dma
    assert f"{UNIT} - jobgen job {JOB}\n" in mail, mail  # systemctl status
    assert "Active: failed (Result: exit-code)" in mail, mail
    # The journal lines: the job's own output and why it failed.
    assert f"sh[" in mail and "]: report input is missing\n" in mail, mail
    assert f"{UNIT}: Main process exited, code=exited, status=3/NOTIMPLEMENTED\n" in mail, mail
    show = c.systemctl("show", "-p", "Result", "-p", "ActiveState", mail_unit).stdout
    assert "Result=success" in show, show


def test_without_sendmail_the_mail_unit_logs_why_and_succeeds(scenario):
    c = scenario.container
    installed = scenario.deploy(MANIFEST.format(address="ops@example.com"))
    assert notify.MAIL_TEMPLATE in installed
    assert c.systemctl("start", UNIT, check=False).returncode != 0
    mail_unit = notify.mail_unit(UNIT, "ops@example.com")
    line = f"jobgen-mail: {UNIT} failed; no sendmail on this host, so no mail to ops@example.com"

    def logged() -> bool:
        return any(e.get("MESSAGE") == line for e in c.unit_journal(mail_unit))

    _wait(f"no '{line}' in the journal", logged, c)
    assert "Result=success" in c.systemctl("show", "-p", "Result", mail_unit).stdout
