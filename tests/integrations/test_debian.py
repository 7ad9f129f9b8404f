"""`jobgen render --layout debian`: a real .deb built by dpkg-buildpackage (debhelper compat 13),
read back with dpkg-deb.

The package is integration_support.MANIFEST rendered into debian/ with `debian/rules` = the plain
`%: dh $@` plus `include debian/jobgen.mk`. What must come out: every unit and the tmpfiles.d
snippet inside the .deb where systemd reads them, and maintainer scripts that enable and start
the timer, the worker target and the single worker, and never the job's oneshot service (the
timer starts it; starting it at install would run the job).
"""

import re
import subprocess
from pathlib import Path

import pytest
from integration_support import MANIFEST, PACKAGE, jobgen

# debhelper 13.11.4 (Debian 12) installs units into /lib/systemd/system; later debhelper
# (Debian 13, Ubuntu 24.04) into /usr/lib/systemd/system. systemd reads both
# (systemd.unit(5), "UNIT FILE LOAD PATH"); on a merged-/usr system they are one folder.
UNIT_DIRS = ("./lib/systemd/system/", "./usr/lib/systemd/system/")
UNITS = {"nightly-report.service", "nightly-report.timer", "mailer.target", "mailer@.service", "indexer.service"}


def debhelper_version() -> str:
    return subprocess.run(["dpkg-query", "-W", "-f=${Version}", "debhelper"], capture_output=True, text=True).stdout


def contents(deb: Path) -> list[str]:
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    return [line.split()[5] for line in listing.splitlines()]


def maintainer_scripts(deb: Path, tmp: Path) -> dict[str, str]:
    control = tmp / "control"
    subprocess.run(["dpkg-deb", "-e", str(deb), str(control)], check=True)
    return {p.name: p.read_text() for p in control.iterdir()}


def units_in(script: str, command: str) -> set[str]:
    """Units named on `deb-systemd-helper enable '...'` or `deb-systemd-invoke ACTION '...'` lines."""
    found: set[str] = set()
    for args in re.findall(rf"^\s*{command} ((?:'[^']+' ?)+)", script, re.M):
        found |= set(re.findall(r"'([^']+)'", args))
    return found


def test_units_and_tmpfiles_snippet_are_in_the_deb(built_deb: Path) -> None:
    paths = contents(built_deb)
    unit_dir = next(d for d in UNIT_DIRS if f"{d}nightly-report.timer" in paths)
    assert {p[len(unit_dir):] for p in paths if p.startswith(unit_dir) and not p.endswith("/")} == UNITS
    if debhelper_version() == "13.11.4":  # Debian 12
        assert unit_dir == "./lib/systemd/system/"
    # dh_installtmpfiles (compat 13): debian/PKG.tmpfiles -> /usr/lib/tmpfiles.d/PKG.conf
    assert f"./usr/lib/tmpfiles.d/{PACKAGE}.conf" in paths


def test_maintainer_scripts_enable_and_start_timer_and_workers_not_the_oneshot(built_deb: Path, tmp_path: Path) -> None:
    scripts = maintainer_scripts(built_deb, tmp_path)
    postinst, prerm, postrm = scripts["postinst"], scripts["prerm"], scripts["postrm"]

    started = {"nightly-report.timer", "mailer.target", "indexer.service"}
    assert units_in(postinst, "deb-systemd-helper enable") == started
    # `deb-systemd-invoke $_dh_action`: start on install, restart on upgrade.
    assert units_in(postinst, r"deb-systemd-invoke \$_dh_action") == started
    assert "nightly-report.service" not in postinst
    # The lock folder exists right after installation, not only after the next boot.
    assert f"systemd-tmpfiles ${{DPKG_ROOT:+--root=\"$DPKG_ROOT\"}} --create {PACKAGE}.conf" in postinst

    # remove stops what was started; a running job is left to finish (no stop of the service).
    assert units_in(prerm, "deb-systemd-invoke stop") == started
    assert "nightly-report.service" not in prerm
    # purge forgets the enablement of what was enabled.
    assert units_in(postrm, "deb-systemd-helper purge") == started


def test_rules_fragment_names_each_unit(tmp_path: Path) -> None:
    (tmp_path / "jobs.yaml").write_text(MANIFEST)
    r = jobgen("render", "jobs.yaml", "--layout", "debian", "--package", PACKAGE, "-o", "debian", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "debian").iterdir()) == [
        "jobgen.mk",
        "shopjobs.indexer.service",
        "shopjobs.mailer.target",
        "shopjobs.mailer@.service",
        "shopjobs.nightly-report.service",
        "shopjobs.nightly-report.timer",
        "shopjobs.tmpfiles",
    ]
    recipe = [line for line in (tmp_path / "debian" / "jobgen.mk").read_text().splitlines() if line.startswith("\t")]
    assert recipe == [
        "\tdh_installsystemd",
        "\tdh_installsystemd -pshopjobs --name=indexer indexer.service",
        "\tdh_installsystemd -pshopjobs --name=mailer mailer.target",
        "\tdh_installsystemd -pshopjobs --name=mailer@",
        "\tdh_installsystemd -pshopjobs --name=nightly-report --no-enable --no-start --no-stop-on-upgrade nightly-report.service",
        "\tdh_installsystemd -pshopjobs --name=nightly-report nightly-report.timer",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layout", "debian"], "jobgen: error: --layout debian needs --package PKG (the binary package in debian/control); nothing written"),
        (["--package", "shopjobs"], "jobgen: error: --package is for --layout debian; --layout flat names no package; nothing written"),
        (
            ["--layout", "debian", "--package", "Shop_Jobs"],
            "jobgen: error: --package 'Shop_Jobs': a Debian package name is lower-case letters, digits and +-. (at least two, starting with a letter or digit); nothing written",
        ),
    ],
)
def test_layout_debian_usage_errors_write_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text("jobgen: 1\njobs:\n  j:\n    command: [/bin/true]\n    schedule: daily\n")
    r = jobgen("render", str(manifest), "-o", str(tmp_path / "debian"), *args)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == message
    assert not (tmp_path / "debian").exists()


def test_two_manifests_with_host_locks_cannot_share_one_tmpfiles_file(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(f"jobgen: 1\njobs:\n  {name}:\n    command: [/bin/true]\n    schedule: daily\n")
    r = jobgen("render", "a.yaml", "b.yaml", "--layout", "debian", "--package", PACKAGE, "-o", "debian", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "jobgen: error: --layout debian puts both tmpfiles.d/jobgen-a.conf and tmpfiles.d/jobgen-b.conf in shopjobs.tmpfiles;"
        " render one manifest with host locks per package; nothing written"
    )
    assert not (tmp_path / "debian").exists()


def test_lintian_reports_no_error_or_warning(built_deb: Path) -> None:
    """Every service carries Documentation= (the manifest's `documentation:`), so lintian's
    systemd-service-file-missing-documentation-key is gone; no other E: or W: either."""
    import shutil

    if shutil.which("lintian") is None:
        pytest.skip("lintian not found: scripts/bootstrap installs it")
    # --show-overrides: a tag silenced by an override shipped in the package (O:) counts too
    r = subprocess.run(["lintian", "--no-cfg", "--show-overrides", str(built_deb)], capture_output=True, text=True, timeout=600)
    tags = [line for line in (r.stdout + r.stderr).splitlines() if re.match(r"[EWO]: ", line)]
    assert tags == [], r.stdout
    assert r.returncode == 0, r.stdout + r.stderr
    contents = subprocess.run(["dpkg-deb", "-c", str(built_deb)], capture_output=True, text=True, check=True).stdout
    assert "lintian" not in contents, contents
