"""Suite-wide policy: in CI nothing the suite needs may be silently missing.

Tests skip with a reason naming what to install when a real component (a systemd
release, a database server, systemd-nspawn, root) is absent. That is right on a
developer's laptop and wrong in CI, whose set-up command installs all of it: there a
skip for a missing component fails the run, so a green CI means every real-thing test
ran. A skip is "for a missing component" when its reason names an installer.
"""

import os

import pytest

# jobgen-generator's compiled cache (host/gencache.py) defaults to /var/cache/jobgen/generator:
# a generator the suite starts (as root in a container) must not fill the machine's. Off
# for every child that inherits this environment; cache tests name their own folder.
os.environ.setdefault("JOBGEN_GENERATOR_CACHE", "")

_INSTALL_HINTS = ("scripts/", "apt-get", "install", "not cached", "not found", "needs root")
_missing: list[str] = []


def _strict() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("JOBGEN_NO_SKIP") == "1"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2])
        if any(h in reason for h in _INSTALL_HINTS):
            _missing.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _strict() and _missing and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus: int) -> None:
    if _strict() and _missing:
        terminalreporter.section("skipped for a missing component (a failure in CI)")
        for line in _missing:
            terminalreporter.write_line(line)


@pytest.fixture(autouse=True)
def _own_render_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test has its own, empty render cache (README: Render cache), so no test sees
    an entry another test or the developer's own renders left; jobgen processes a test
    starts inherit it."""
    monkeypatch.setenv("JOBGEN_CACHE_DIR", str(tmp_path_factory.mktemp("jobgen-cache")))
