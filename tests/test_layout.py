"""`jobgen render --layout flat|etc|usr`: where each file goes, and the warning when the flat
layout's tmpfiles.d/ snippet would land where systemd-tmpfiles never reads it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import jobgen

from jobgen.compiler import layout, limits

MANIFEST = """\
jobgen: 1
target: {systemd: 252}
jobs:
  tick:
    command: [/bin/true]
    schedule: hourly
"""


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


# --------------------------------------------------------------------------- debian's longer file names
# --layout debian names a unit debian/PKG.UNIT: the package name and a dot come before
# every unit's file name, so a name the flat layout can hold may not fit in NAME_MAX there.

def long_queue_job(tmp_path: Path, length: int) -> Path:
    path = tmp_path / "shop.yaml"
    path.write_text(f"jobgen: 1\ntarget: {{systemd: '252'}}\njobs:\n  {'q' * length}:\n    command: [/bin/true]\n"
                    "    schedule: daily\n    overlap: queue\n")
    return path


def test_a_name_too_long_for_debians_file_names_is_refused_at_the_job_and_nothing_written(tmp_path):
    limit = 255 - len("shopjobs.") - len("-drain.service")  # 232: debian/shopjobs.NAME-drain.service
    manifest = long_queue_job(tmp_path, limit + 1)
    r = jobgen("render", str(manifest), "--layout", "debian", "--package", "shopjobs", "-o", str(tmp_path / "debian"))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (
        f"{manifest}:4:3: error: job '{'q' * (limit + 1)}': the name has {limit + 1} characters; --layout debian "
        f"--package shopjobs allows at most {limit}, so that shopjobs.NAME-drain.service fits in 255 bytes (README: Limits)\n"
        "jobgen: 1 error; nothing written\n"
    )
    assert not (tmp_path / "debian").exists()


def test_the_longest_name_debian_allows_is_written(tmp_path):
    limit = 255 - len("shopjobs.") - len("-drain.service")
    manifest = long_queue_job(tmp_path, limit)
    r = jobgen("render", str(manifest), "--layout", "debian", "--package", "shopjobs", "-o", str(tmp_path / "debian"))
    assert r.returncode == 0, r.stderr
    longest = max((p.name for p in (tmp_path / "debian").iterdir()), key=len)
    assert (longest, len(longest.encode())) == (f"shopjobs.{'q' * limit}-drain.service", 255)


def test_the_same_name_renders_flat(tmp_path):
    # The flat layout adds nothing to a unit's name: its limit is the manifest's (241).
    r = jobgen("render", str(long_queue_job(tmp_path, 233)), "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr


def test_each_layouts_name_limit_is_its_longest_unit_file_within_name_max():
    assert {name: layout.name_limit(row, "shopjobs") for name, row in layout.LAYOUTS.items()} == {
        "flat": limits.NAME, "etc": limits.NAME, "usr": limits.NAME, "debian": limits.NAME - len("shopjobs."),
    }
    # A package name of its own length moves the limit with it.
    assert layout.name_limit(layout.LAYOUTS["debian"], "p" * 40) == limits.NAME_MAX - len("p" * 40 + ".") - len("-drain.service")


def test_a_package_name_that_leaves_no_room_for_a_unit_name_is_refused(tmp_path):
    longest = 255 - len(".") - 1 - len("-drain.service")  # 239: PKG. + a one-character name + -drain.service
    ok = jobgen("render", str(long_queue_job(tmp_path, 1)), "--layout", "debian", "--package", "p" * longest, "-o", str(tmp_path / "a"))
    assert ok.returncode == 0, ok.stderr
    r = jobgen("render", str(long_queue_job(tmp_path, 1)), "--layout", "debian", "--package", "p" * (longest + 1), "-o", str(tmp_path / "b"))
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (f"jobgen: error: --package: a name of {longest + 1} characters leaves no room for a unit's name in "
                        f"255 bytes (at most {longest}); nothing written\n")
    assert not (tmp_path / "b").exists()
