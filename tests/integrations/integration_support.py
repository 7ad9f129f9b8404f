"""Shared by the tests that hand jobgen's output to other people's tools (a plain module:
the tests import it by name, conftest.py only holds fixtures)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli import jobgen  # noqa: F401 - the tests here import it from this module

ROOT = Path(__file__).resolve().parents[2]

# A package's worth of units: a timer-driven oneshot job with a host lock (so a tmpfiles.d
# snippet) and a Persistent= stamp, a worker scaled by a target, and a single worker.
PACKAGE = "shopjobs"
MANIFEST = """\
jobgen: 1
target:
  systemd: ">=252"
defaults:
  documentation: man:shopjobs(7)
jobs:
  nightly-report:
    command: [/bin/true]
    schedule: daily
    persistent: true
workers:
  mailer:
    command: [/bin/sleep, infinity]
    instances: 2
    stop_timeout: 10s
  indexer:
    command: [/bin/sleep, infinity]
    stop_timeout: 10s
"""

CONTROL = f"""\
Source: {PACKAGE}
Section: admin
Priority: optional
Maintainer: jobgen tests <tests@example.org>
Build-Depends: debhelper-compat (= 13)
Standards-Version: 4.6.2
Rules-Requires-Root: no

Package: {PACKAGE}
Architecture: all
Depends: ${{misc:Depends}}
Description: jobs rendered by jobgen
 A package whose units come from a jobgen manifest.
"""
CHANGELOG = f"""\
{PACKAGE} (1.0) unstable; urgency=medium

  * Initial release.

 -- jobgen tests <tests@example.org>  Wed, 02 Dec 2026 12:00:00 +0000
"""
COPYRIGHT = """\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/

Files: *
Copyright: 2026 jobgen tests
License: Expat
 Permission is hereby granted, free of charge, to any person obtaining a copy of this
 software, to deal in the Software without restriction.
"""
# The plain dh rules file plus the one line the README asks for.
RULES = "#!/usr/bin/make -f\n%:\n\tdh $@\n\ninclude debian/jobgen.mk\n"


def need_debian_build_tools() -> None:
    for tool in ("dpkg-buildpackage", "dh", "dh_installsystemd", "fakeroot", "dpkg-deb"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not found: apt-get install debhelper dpkg-dev fakeroot (scripts/bootstrap)")


def source_package(src: Path) -> Path:
    """The tiny source package in SRC: MANIFEST rendered with `jobgen render --layout
    debian`, debian/rules the plain `dh $@` with `include debian/jobgen.mk`."""
    (src / "debian" / "source").mkdir(parents=True)
    (src / "jobs.yaml").write_text(MANIFEST)
    r = jobgen("render", "jobs.yaml", "--layout", "debian", "--package", PACKAGE, "-o", "debian", cwd=src)
    assert r.returncode == 0, r.stderr
    (src / "debian" / "control").write_text(CONTROL)
    (src / "debian" / "changelog").write_text(CHANGELOG)
    (src / "debian" / "copyright").write_text(COPYRIGHT)
    (src / "debian" / "source" / "format").write_text("3.0 (native)\n")
    rules = src / "debian" / "rules"
    rules.write_text(RULES)
    rules.chmod(0o755)
    return src


def build_deb(workdir: Path) -> Path:
    """A source package rendered with `jobgen render --layout debian`, built by dpkg-buildpackage."""
    need_debian_build_tools()
    src = source_package(workdir / "src")
    build = subprocess.run(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    return workdir / f"{PACKAGE}_1.0_all.deb"

