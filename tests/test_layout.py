"""`jobgen render --layout flat|etc|usr`: where each file goes, and the warning when the flat
layout's tmpfiles.d/ snippet would land where systemd-tmpfiles never reads it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MANIFEST = """\
jobgen: 1
target: {systemd: 252}
jobs:
  tick:
    command: [/bin/true]
    schedule: hourly
"""


def jobgen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobgen", *args], capture_output=True, text=True, timeout=60)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "layout, expected",
    [
        ("flat", ["tick.service", "tick.timer", "tmpfiles.d/jobgen-shop.conf"]),
        ("etc", ["etc/systemd/system/tick.service", "etc/systemd/system/tick.timer", "etc/tmpfiles.d/jobgen-shop.conf"]),
        ("usr", ["usr/lib/systemd/system/tick.service", "usr/lib/systemd/system/tick.timer", "usr/lib/tmpfiles.d/jobgen-shop.conf"]),
    ],
)
def test_layout_places_units_and_tmpfiles_where_their_reader_looks(tmp_path, layout, expected):
    (tmp_path / "shop.yaml").write_text(MANIFEST)
    r = jobgen("render", str(tmp_path / "shop.yaml"), "-o", str(tmp_path / "out"), "--layout", layout)
    assert r.returncode == 0, r.stderr
    assert files_under(tmp_path / "out") == expected
    assert "warning" not in r.stderr


def test_unknown_layout_is_refused_and_nothing_written(tmp_path):
    (tmp_path / "shop.yaml").write_text(MANIFEST)
    r = jobgen("render", str(tmp_path / "shop.yaml"), "-o", str(tmp_path / "out"), "--layout", "opt")
    assert (r.returncode, r.stderr) == (2, "jobgen: error: --layout opt: choose one of flat, etc, usr, debian\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("folder", ["/etc/systemd/system", "/etc/systemd/system/", "/usr/lib/systemd/system"])
def test_flat_layout_into_a_unit_folder_warns_that_the_snippet_is_not_read(tmp_path, folder):
    # --check: the test reads the warning and writes nothing into the host's folders.
    (tmp_path / "shop.yaml").write_text(MANIFEST)
    r = jobgen("render", str(tmp_path / "shop.yaml"), "-o", folder, "--check")
    warning = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warning == [
        f"jobgen: warning: {folder.rstrip('/')}/tmpfiles.d/jobgen-shop.conf is not read by systemd-tmpfiles "
        "(it reads /etc/tmpfiles.d, not a tmpfiles.d/ folder beside the units): the lock files would be "
        "missing after the next reboot and every host-locked job would fail. Install with `jobgen apply "
        "MANIFEST`, or render a root tree with `--layout etc -o /` (then `systemd-tmpfiles --create` and "
        "`systemctl daemon-reload`)"
    ]


def test_etc_layout_into_root_does_not_warn(tmp_path):
    (tmp_path / "shop.yaml").write_text(MANIFEST)
    r = jobgen("render", str(tmp_path / "shop.yaml"), "-o", "/", "--layout", "etc", "--check")
    assert "warning" not in r.stderr, r.stderr
