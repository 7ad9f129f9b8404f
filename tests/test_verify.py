"""Real systemd-analyze accepts every rendered unit without a single line of output.

Each example and policy case is rendered for systemd 247 (Debian 11), 252 (Debian 12),
257 (Debian 13) and 262 (sid) and checked by *that* release's own systemd-analyze
(scripts/fetch-systemd-versions; tests/support/sdanalyze.py). The host's own release is
checked too, so the suite says something even before the cache is filled.
"""

import re
from pathlib import Path

import pytest

from jobgen.compiler import pipeline
from jobgen.compiler.specifier_table import EXPANDS, SPECIFIERS
from jobgen.compiler.target import parse_target
from support.sdanalyze import VerifyResult, host_analyzer, missing_reason, versioned_analyzer

ROOT = Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "tests" / "cases").glob("*.yaml"))
RELEASES = (247, 252, 257, 262)
# Cases whose directives need a newer systemd than some releases: (manifest stem -> releases).
ONLY = {"newest": (262,)}
PAIRS = [(m, r) for m in MANIFESTS for r in ONLY.get(m.stem, RELEASES)]
UNIT_SUFFIXES = (".service", ".timer", ".target")
EXEC_PATH = re.compile(r"^Exec\w+=[-+@:!]*(/[^\s\"]+)", re.M)


def render_into(tmp_path: Path, manifest: Path, systemd: str) -> list[Path]:
    files = pipeline.build(str(manifest), parse_target(systemd)).files
    units = []
    for name, data in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if path.suffix in UNIT_SUFFIXES:
            units.append(path)
    return sorted(units)


def stubs_for(units: list[Path]) -> list[str]:
    """Programs the units start that this machine does not have (/usr/bin/php, jobgen)."""
    return sorted({m for u in units for m in EXEC_PATH.findall(u.read_text()) if not Path(m).exists()})


def analyzer_or_skip(release: int):
    analyzer = versioned_analyzer(release)
    if analyzer is None:
        pytest.skip(missing_reason(release))
    return analyzer


@pytest.mark.matrix
@pytest.mark.parametrize("manifest, release", PAIRS, ids=[f"{m.stem}-{r}" for m, r in PAIRS])
def test_release_verifies_its_own_render(tmp_path: Path, manifest: Path, release: int) -> None:
    analyzer = analyzer_or_skip(release)
    units = render_into(tmp_path, manifest, str(release))
    result = analyzer.verify(units, stubs=stubs_for(units))
    assert (result.rc, result.lines) == (0, []), f"{manifest.name} rendered for {release}"


# The host's systemd is 252 or 257; the cases for newer releases are the matrix's.
@pytest.mark.parametrize("manifest", [m for m in MANIFESTS if m.stem not in ONLY], ids=lambda p: p.stem)
def test_host_verifies_render_for_its_version(tmp_path: Path, manifest: Path) -> None:
    analyzer = host_analyzer()
    if analyzer is None:
        pytest.skip("systemd-analyze not found: apt-get install systemd")
    units = render_into(tmp_path, manifest, str(analyzer.version))
    result = analyzer.verify(units, stubs=stubs_for(units))
    assert (result.rc, result.lines) == (0, [])


@pytest.mark.matrix
def test_gating_is_what_keeps_252_quiet(tmp_path: Path) -> None:
    """The negative check: units rendered for 257 carry DeferReactivation=, which 252's
    parser does not know; rendered for >=252 they do not."""
    analyzer = analyzer_or_skip(252)
    shop = ROOT / "examples" / "shop.yaml"
    for_257 = render_into(tmp_path / "257", shop, "257")
    result = analyzer.verify(for_257, stubs=stubs_for(for_257))
    assert result.rc == 1
    assert result.lines == [f"{tmp_path}/257/catalog-refresh.timer:10: Unknown key 'DeferReactivation' in section [Timer], ignoring."]
    for_252 = render_into(tmp_path / "252", shop, ">=252")
    assert analyzer.verify(for_252, stubs=stubs_for(for_252)).lines == []


@pytest.mark.matrix
@pytest.mark.parametrize("release", (252, 257))
def test_strict_hardening_scores_ok(tmp_path: Path, release: int) -> None:
    """`hardening: strict` must be "OK" or better (exposure <= 2.0) on 252 and 257."""
    analyzer = analyzer_or_skip(release)
    units = render_into(tmp_path, ROOT / "examples" / "hardened.yaml", str(release))
    service = next(u for u in units if u.name == "sitemap.service")
    score = analyzer.security(service, stubs=stubs_for(units))
    assert score <= 2.0, f"exposure {score} on systemd {release}"


@pytest.mark.matrix
@pytest.mark.parametrize("release", (252, 257))
def test_hardening_profiles_are_ordered(tmp_path: Path, release: int) -> None:
    """none > default > strict in exposure, measured, on the same job."""
    analyzer = analyzer_or_skip(release)
    text = (ROOT / "examples" / "hardened.yaml").read_text()
    scores = {}
    for profile in ("none", "default", "strict"):
        manifest = tmp_path / f"{profile}.yaml"
        manifest.write_text(text.replace("hardening: strict", f"hardening: {profile}"))
        units = render_into(tmp_path / profile, manifest, str(release))
        scores[profile] = analyzer.security(next(u for u in units if u.suffix == ".service"), stubs=stubs_for(units))
    assert scores["none"] > scores["default"] > scores["strict"], scores


# --------------------------------------------------------------------------- % specifiers
# Which directives expand '%' is a fact per directive (compiler/specifier_table.py);
# escape.py doubles '%' only there. Real systemd is the judge of both halves.

MEMORY_JOB = """jobgen: 1
jobs:
  report:
    description: "Report at 50% memory"
    command: [/usr/bin/true, "--share=50%"]
    schedule: daily
    memory_max: 50%
"""


@pytest.mark.parametrize("release", (252, 257))
def test_memory_max_percent_is_written_as_is_and_verifies_clean(tmp_path: Path, release: int) -> None:
    analyzer = analyzer_or_skip(release)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(MEMORY_JOB)
    units = render_into(tmp_path / "out", manifest, str(release))
    service = (tmp_path / "out" / "report.service").read_text().splitlines()
    assert "MemoryMax=50%" in service  # MemoryMax= does not expand specifiers
    assert "Description=Report at 50%% memory" in service  # Description= does
    (start,) = [line for line in service if line.startswith("ExecStart=")]
    assert start.endswith(' /usr/bin/true "--share=50%%"')  # and so does ExecStart=
    assert analyzer.verify(units, stubs=stubs_for(units)) == VerifyResult(0, [])


@pytest.mark.parametrize("release", (252, 257))
def test_doubling_the_percent_in_memory_max_is_what_systemd_refuses(tmp_path: Path, release: int) -> None:
    """The defect the table prevents: '50%%' reaches MemoryMax='s parser literally."""
    analyzer = analyzer_or_skip(release)
    unit = tmp_path / "m.service"
    unit.write_text("[Service]\nType=oneshot\nExecStart=/usr/bin/true\nMemoryMax=50%%\n")
    result = analyzer.verify([unit])
    assert f"{unit}:4: Invalid memory limit '50%%', ignoring: Invalid argument" in result.lines


# Directives whose parser reads a keyword before it resolves an argument get the '%Z' where
# the argument goes: LoadCredential= is NAME:PATH (before 252 a value without ':' is
# refused unread); StandardOutput= and friends resolve the file: path.
PROBE_VALUES = {"LoadCredential": "c:/%Z", "Standard": "file:/%Z"}


def _probe_units(folder: Path, release: int) -> dict[str, tuple[str, str]]:
    """One unit per directive of the table the release has, with the value '%Z' (no such
    specifier). [Install] is read by `systemctl enable`, not by verify: left out."""
    target = parse_target(str(release))
    folder.mkdir()
    (folder / "probe-target.service").write_text("[Service]\nType=oneshot\nExecStart=/usr/bin/true\n")
    units = {}
    for i, row in enumerate(SPECIFIERS):
        if row.section == "Install" or not target.has(row.section, row.directive):
            continue
        value = next((v for prefix, v in PROBE_VALUES.items() if row.directive.startswith(prefix)), "%Z")
        if row.section == "Timer":
            name, body = f"p{i}.timer", f"[Timer]\n{row.directive}={value}\nOnCalendar=daily\nUnit=probe-target.service\n"
        elif row.section == "Path":
            other = "PathExists=/x\n" if row.directive != "PathExists" else ""
            unit = "Unit=probe-target.service\n" if row.directive != "Unit" else ""
            name, body = f"p{i}.path", f"[Path]\n{row.directive}={value}\n{other}{unit}"
        else:
            head = f"[Unit]\n{row.directive}={value}\n[Service]\n" if row.section == "Unit" else f"[Service]\n{row.directive}={value}\n"
            kind = "" if row.directive == "Type" else "Type=oneshot\n"
            name, body = f"p{i}.service", head + kind + "ExecStart=/usr/bin/true\n"
        (folder / name).write_text(body)
        units[name] = (row.section, row.directive)
    return units


@pytest.mark.matrix
@pytest.mark.parametrize("release", RELEASES)
def test_specifier_table_is_what_systemd_does(tmp_path: Path, release: int) -> None:
    """For each directive: '%Z' makes an expanding parser say it failed to resolve the
    specifier; any other parser reads '%Z' as the value itself and says something else."""
    analyzer = analyzer_or_skip(release)
    units = _probe_units(tmp_path / "units", release)
    result = analyzer.verify([tmp_path / "units" / name for name in units])
    said: dict[tuple[str, str], list[str]] = {key: [] for key in units.values()}
    for line in result.lines:
        name = Path(line.split(":", 1)[0]).name
        if name in units:
            said[units[name]].append(line)
    measured = {key: any("resolve" in m and "specifiers" in m for m in lines) for key, lines in said.items()}
    assert measured == {key: EXPANDS[key] for key in measured}
