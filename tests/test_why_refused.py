"""Why jobgen refuses or warns: the real systemd tool shows the problem on the output
jobgen would otherwise write.

tests/errors/ holds the messages (warn-user-nobody, lock-shared-different-users); these
tests hold the evidence:

* systemd-analyze verify warns "Special user nobody configured, this is not safe!" for
  the unit of a job that runs as nobody, and says nothing for a dedicated user;
* systemd-tmpfiles, given two jobs' lock lines for one path with different owners, keeps
  the first and ignores the other ("Duplicate line"), so the second job's user cannot
  open its lock file. The same owner twice is no conflict;
* the names refused as system units include every unit the real systemd packages ship.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jobgen.compiler import names, pipeline
from jobgen.compiler.target import parse_target
from support.sdanalyze import RELEASES, cache_dir, host_analyzer, versioned_analyzer

TMPFILES = shutil.which("systemd-tmpfiles")


def _worker(user: str) -> str:
    return (
        'jobgen: 1\ntarget: {systemd: ">=252"}\nworkers:\n  mailer:\n'
        f"    command: [/usr/local/bin/mailer]\n    stop_timeout: 30s\n    user: {user}\n"
    )


def _write(tmp_path: Path, files: dict[str, bytes]) -> list[Path]:
    paths = []
    for name, data in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        paths.append(path)
    return paths


def _analyzers():
    found = [a for a in (host_analyzer(), versioned_analyzer(257)) if a is not None]
    if not found:
        pytest.skip("no systemd-analyze: neither on this host nor cached (run scripts/fetch-systemd-versions)")
    return found


@pytest.mark.parametrize("user,expected", [("nobody", ["Special user nobody configured, this is not safe!"]), ("mail", [])])
def test_systemd_warns_about_user_nobody(tmp_path: Path, user: str, expected: list[str]) -> None:
    result = pipeline.build(str(tmp_path / "m.yaml"), parse_target("252"), text=_worker(user))
    warned = [d.message for d in result.diagnostics if d.severity == "warning"]
    assert bool(warned) == bool(expected)  # jobgen warns exactly when systemd does
    units = [p for p in _write(tmp_path / "out", result.files) if p.suffix == ".service"]
    for analyzer in _analyzers():
        verdict = analyzer.verify(units, stubs=["/usr/local/bin/mailer"])
        said = [line.split(": ", 1)[-1] for line in verdict.lines]
        assert said == expected, analyzer.label


def _job(name: str, user: str) -> str:
    return (
        f'jobgen: 1\ntarget: {{systemd: ">=252"}}\njobs:\n  {name}:\n    command: [/usr/local/bin/{name}]\n'
        f"    schedule: daily\n    user: {user}\n    lock: {{name: warehouse}}\n"
    )


def _tmpfiles_root(tmp_path: Path, manifests: dict[str, str]) -> Path:
    """A root folder with users shop (1001) and etl (1002) and the tmpfiles.d files
    jobgen renders from each manifest (each valid on its own)."""
    root = tmp_path / "root"
    (root / "etc" / "tmpfiles.d").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\nshop:x:1001:1001::/:/bin/false\netl:x:1002:1002::/:/bin/false\n")
    (root / "etc" / "group").write_text("root:x:0:\nshop:x:1001:\netl:x:1002:\n")
    for stem, text in manifests.items():
        files = pipeline.build(str(tmp_path / f"{stem}.yaml"), text=text).files
        (root / "etc" / "tmpfiles.d" / f"jobgen-{stem}.conf").write_bytes(files[f"tmpfiles.d/jobgen-{stem}.conf"])
    return root


def _create(root: Path) -> list[str]:
    proc = subprocess.run([TMPFILES, f"--root={root}", "--create"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [line.replace(str(root), "") for line in proc.stderr.splitlines()]


@pytest.mark.skipif(TMPFILES is None, reason="no systemd-tmpfiles on this host")
def test_tmpfiles_keeps_one_owner_for_a_shared_lock_file(tmp_path: Path) -> None:
    root = _tmpfiles_root(tmp_path, {"export": _job("export", "shop"), "import": _job("import", "etl")})
    assert _create(root) == [
        '/etc/tmpfiles.d/jobgen-import.conf:8: Duplicate line for path "/run/jobgen/warehouse.lock", ignoring.'
    ]
    lock = (root / "run" / "jobgen" / "warehouse.lock").stat()
    # Owned by the first job's user, 0600: the job running as etl cannot open it.
    assert (lock.st_uid, lock.st_mode & 0o777) == (1001, 0o600)


@pytest.mark.skipif(TMPFILES is None, reason="no systemd-tmpfiles on this host")
def test_tmpfiles_accepts_a_lock_file_shared_by_one_user(tmp_path: Path) -> None:
    root = _tmpfiles_root(tmp_path, {"export": _job("export", "shop"), "audit": _job("audit", "shop")})
    assert _create(root) == []
    assert (root / "run" / "jobgen" / "warehouse.lock").stat().st_uid == 1001


# --------------------------------------------------------------------------- system unit names

_UNIT_DIRS = ("lib/systemd/system", "usr/lib/systemd/system")
_UNIT_FILE = re.compile(r"(?P<stem>[^@]+?)@?\.(service|socket|target|timer|path|mount|slice|automount|swap)")


def _shipped_stems() -> dict[str, str]:
    """Unit name stems in the systemd releases the suite caches (scripts/fetch-systemd-versions:
    Debian's systemd packages 247, 252, 257, 262) and in the Debian 12/13 systems the e2e
    tests boot (minbase + systemd: apt, dpkg, e2fsprogs, util-linux, ...): stem -> where."""
    roots = [cache_dir() / str(release) / "root" for release in sorted(RELEASES)]
    roots += sorted((cache_dir().parent / "rootfs").glob("*"))
    stems: dict[str, str] = {}
    for root in roots:
        for folder in (root / d for d in _UNIT_DIRS):
            for unit in sorted(folder.iterdir()) if folder.is_dir() else ():
                if (m := _UNIT_FILE.fullmatch(unit.name)) and names.JOB_NAME.fullmatch(m["stem"]):
                    stems.setdefault(m["stem"], str(unit))
    return stems


def test_every_unit_systemd_ships_is_refused_as_a_name() -> None:
    """The table in names.py (SYSTEM_UNITS, SYSTEM_PREFIXES) covers every unit the real
    systemd packages ship: a new release that adds a unit shows here."""
    stems = _shipped_stems()
    if not stems:
        pytest.skip(f"no systemd release cached in {cache_dir()}: run scripts/fetch-systemd-versions")
    assert len(stems) > 100  # the folders were read, not missed
    missing = {stem: where for stem, where in stems.items() if names.system_unit(stem) is None}
    assert missing == {}


@pytest.mark.parametrize("name", ["backup", "catalog-refresh", "nightly-billing", "mailer", "app-ssh", "sshkeys", "timers2"])
def test_ordinary_names_are_not_system_units(name: str) -> None:
    assert names.system_unit(name) is None


def test_the_generators_own_units_are_refused_as_names() -> None:
    from jobgen.host import generator

    for unit in (generator.LOCKS_UNIT, generator.REPORT_UNIT):
        assert names.system_unit(unit.removesuffix(".service")) == f"{unit}, written by jobgen-generator"
