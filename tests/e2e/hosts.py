"""A persistent container for e2e tests that reboot: boot(), reboot(), and jobgen inside.

The tree is an overlay whose upper layer is kept in a folder of the test, so "reboot" is what
it is on a host: halt, then boot the same disk with a fresh /run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from container import Container, HarnessError, format_journal, wait_until

JOB_USER = "svc"
OTHER_USER = "mallory"


class Host:
    """A persistent container: boot(), reboot(), and jobgen inside."""

    def __init__(self, release: str, persist: Path, dist):
        self.release, self.persist, self.dist = release, persist, dist
        self.c: Container | None = None

    def boot(self) -> Container:
        self.c = Container(self.release, persist=self.persist)
        try:
            self.c.boot()
        except HarnessError as e:
            pytest.fail(str(e), pytrace=False)
        return self.c

    def reboot(self) -> Container:
        self.c.halt()
        return self.boot()

    def halt(self) -> None:
        if self.c is not None:
            self.c.halt()

    def install(self) -> None:
        self.dist.install(self.c)
        self.c.run("/bin/sh", "-c", f"id {JOB_USER} >/dev/null 2>&1 || useradd --system --no-create-home {JOB_USER}")
        self.c.run("/bin/sh", "-c", f"id {OTHER_USER} >/dev/null 2>&1 || useradd --no-create-home {OTHER_USER}")

    def apply(self, manifest: str, *args: str) -> tuple[int, dict]:
        self.c.write_file("/root/m/shop.yaml", manifest)
        r = self.c.run("jobgen", "apply", "/root/m/shop.yaml", "--format", "json", *args, check=False, timeout=300)
        try:
            return r.returncode, json.loads(r.stdout)
        except ValueError:
            raise AssertionError(f"jobgen apply exit {r.returncode}: {r.stdout!r} {r.stderr!r}") from None

    def sh(self, script: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.c.run("/bin/sh", "-c", script, check=check)

    def journal(self, *matches: str) -> list[dict]:
        """This boot's journal entries only (the journal on the persistent tree keeps the
        earlier boots' too)."""
        return self.c.journal("--boot", *matches)

    def outcomes(self, job: str) -> list[str]:
        return [e["JOBGEN_OUTCOME"] for e in self.journal("SYSLOG_IDENTIFIER=jobgen", f"JOBGEN_JOB={job}")]

    def wait(self, probe, done, what: str, timeout: float = 60):
        return wait_until(probe, done, f"{what} (systemd {self.release})", timeout,
                          lambda: format_journal(self.journal())[-6000:])

    def state(self, unit: str) -> tuple[str, str]:
        enabled = self.c.run("systemctl", "is-enabled", unit, check=False).stdout.strip()
        active = self.c.run("systemctl", "is-active", unit, check=False).stdout.strip()
        return enabled, active
