"""Golden files: every example and the policy cases, rendered for systemd 252 and 257.

The expected bytes live in tests/golden/<manifest>/<systemd>/, reviewed as diffs in
git. After a deliberate change, regenerate them with

    JOBGEN_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py

and read the diff before committing.
"""

import os
from pathlib import Path

import pytest

from jobgen.compiler import pipeline
from jobgen.compiler.target import parse_target

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
MANIFESTS = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "tests" / "cases").glob("*.yaml"))
TARGETS = ("252", "257")
# Cases whose directives need a newer systemd are rendered for the newest release only.
NEWEST = ("262",)
CASES = [(m, t) for m in MANIFESTS for t in (NEWEST if m.stem == "newest" else TARGETS)]


def rendered(manifest: Path, systemd: str) -> dict[str, bytes]:
    # The relative path, as a user in the repository would type it: the header names
    # only the file name, so this does not change the bytes (tests/test_properties.py).
    return pipeline.build(str(manifest.relative_to(ROOT)), parse_target(systemd)).files


def golden_tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("manifest, systemd", CASES, ids=[f"{m.stem}-{t}" for m, t in CASES])
def test_golden(manifest: Path, systemd: str) -> None:
    folder = GOLDEN / manifest.stem / systemd
    files = rendered(manifest, systemd)
    if os.environ.get("JOBGEN_UPDATE_GOLDEN") == "1":
        for old in folder.rglob("*"):
            if old.is_file():
                old.unlink()
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    expected = golden_tree(folder)
    assert sorted(files) == sorted(expected), "file set differs from the golden folder"
    for name in files:
        assert files[name].decode() == expected[name].decode(), f"{manifest.name} -> {name} for systemd {systemd}"


def test_golden_units_use_exactly_the_directives_jobgen_declares() -> None:
    """plan.EMITTED is what `jobgen directives` reports on: the goldens use no other, and
    every one of them is shown in at least one golden file."""
    from jobgen.compiler.plan import EMITTED

    section = None
    used = set()
    for path in GOLDEN.rglob("*"):
        if not path.is_file() or path.parent.name == "tmpfiles.d":
            continue
        for line in path.read_text().splitlines():
            if line.startswith("["):
                section = line.strip("[]")
            elif "=" in line and not line.startswith("#"):
                used.add((section, line.split("=", 1)[0]))
    assert used <= set(EMITTED), sorted(used - set(EMITTED))
    assert set(EMITTED) <= used, f"not in any golden file: {sorted(set(EMITTED) - used)}"
