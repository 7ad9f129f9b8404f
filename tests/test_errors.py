"""Bad input: every case in tests/errors/ is one manifest with its exact expected output.

A case file starts with a comment block:

    # What the case shows, in a sentence.
    # expect: tests/errors/<case>.yaml:LINE:COL: error: job 'x': 'key': ...
    # exit: 0            (only for lint cases: warnings, exit 0, files written)

and the test runs the real CLI on it (`python -m jobgen render CASE -o DIR`, from the
repository root so messages name the file as the case does) and checks:

* the exit code: 2 for invalid input, unless the case says `# exit: 0`;
* stderr, line for line: the `# expect:` lines, then for errors the summary
  `jobgen: N errors; nothing written` (N counted from the expect lines);
* no traceback, ever;
* for errors, the output folder is byte-for-byte what it was (a sentinel and a nested
  file, modes and mtimes included), and a folder that did not exist is not created
  (checked for one case of each refusing stage);
  for lint cases, units were written;
* `jobgen check CASE` prints the same diagnostics with the same exit code.

A few inputs cannot carry a comment header (an empty file, bytes that are not UTF-8, a
path that is not there); they are inline at the end, with their expectation beside them.
"""

from __future__ import annotations

import re
import subprocess
from functools import partial
from pathlib import Path

import pytest
from support.cli import jobgen

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "tests" / "errors").glob("*.yaml"))
EXPECT = re.compile(r"# expect: (.*)")
EXIT = re.compile(r"# exit: (\d+)")
EXIT_INVALID = 2


def _header(case: Path) -> tuple[list[str], int]:
    expect, code = [], EXIT_INVALID
    for line in case.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("#"):
            break
        if m := EXPECT.fullmatch(line):
            expect.append(m.group(1))
        elif m := EXIT.fullmatch(line):
            code = int(m.group(1))
    return expect, code


_jobgen = partial(jobgen, cwd=ROOT)


def _expected_stderr(expect: list[str], code: int) -> list[str]:
    if code == 0:
        return expect
    n = sum(1 for line in expect if ": error: " in line)
    return expect + [f"jobgen: {n} error{'s' if n != 1 else ''}; nothing written"]


def _tree(root: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every path under root with its mode, mtime and content: what 'untouched' means."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, path.read_bytes() if path.is_file() else None)
    return out


def _no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in result.stderr + result.stdout, result.stderr


def _ids(cases: list[Path]) -> list[str]:
    return [c.stem for c in cases]


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_render_prints_exactly_the_expected_diagnostics_and_writes_nothing(case: Path, tmp_path: Path) -> None:
    expect, code = _header(case)
    out = tmp_path / "units"
    (out / "tmpfiles.d").mkdir(parents=True)
    (out / "sentinel.service").write_text("[Unit]\nDescription=not jobgen's\n")
    (out / "tmpfiles.d" / "keep.conf").write_text("d /run/keep 0755 root root -\n")
    before = _tree(out)

    result = _jobgen("render", str(case.relative_to(ROOT)), "-o", str(out))

    _no_traceback(result)
    assert result.stderr.splitlines() == _expected_stderr(expect, code)
    assert result.returncode == code
    if code == EXIT_INVALID:
        assert _tree(out) == before
        assert result.stdout == ""
    else:
        written = set(_tree(out)) - set(before)
        assert any(name.endswith(".service") for name in written), result.stdout


# One case per stage that can refuse a manifest (load, validate, plan): the CLI's "write
# nothing" path after them is the same, so these stand for all.
NO_FOLDER_CASES = [c for c in CASES if c.stem in ("yaml-syntax", "several-errors", "gate-randomized-offset")]


@pytest.mark.parametrize("case", NO_FOLDER_CASES, ids=_ids(NO_FOLDER_CASES))
def test_render_into_a_missing_folder_does_not_create_it(case: Path, tmp_path: Path) -> None:
    out = tmp_path / "not-there" / "units"
    result = _jobgen("render", str(case.relative_to(ROOT)), "-o", str(out))
    _no_traceback(result)
    assert result.returncode == EXIT_INVALID
    assert not (tmp_path / "not-there").exists()


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_check_reports_the_same_diagnostics(case: Path) -> None:
    expect, code = _header(case)
    result = _jobgen("check", str(case.relative_to(ROOT)))
    _no_traceback(result)
    assert result.stderr.splitlines() == _expected_stderr(expect, code)
    assert result.returncode == code


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_case_is_well_formed(case: Path) -> None:
    """A case that expects nothing proves nothing; an expect line must name its own file,
    be one diagnostic, and the lines must be in the order jobgen promises (by position)."""
    expect, _ = _header(case)
    assert expect, f"{case.name} has no '# expect:' line"
    place = re.compile(rf"{re.escape(str(case.relative_to(ROOT)))}:(\d+):(\d+): (error|warning|note): .+")
    positions = []
    for line in expect:
        m = place.fullmatch(line)
        assert m, f"not a diagnostic for {case.name}: {line}"
        positions.append((int(m.group(1)), int(m.group(2))))
    assert positions == sorted(positions)


def test_every_behaviour_the_brief_names_has_a_case() -> None:
    names = {c.stem for c in CASES}
    for needed in (
        "typo-key", "unknown-top-level-key", "type-list-as-description", "type-mapping-as-command",
        "timespan-unknown-unit", "timespan-negative", "calendar-gibberish", "calendar-hour-25",
        "name-with-space", "name-with-suffix", "name-too-long", "description-newline-escape",
        "description-block-scalar", "environment-control-char", "wait-without-wait-timeout",
        "wait-timeout-without-wait", "missing-command", "missing-schedule", "relative-command",
        "duplicate-key", "duplicate-name-job-and-worker", "yaml-syntax", "only-comments", "version-2",
        "target-banana", "cluster-without-backend", "cluster-without-name", "cluster-literal-password",
        "persistent-with-every", "lock-with-overlap-allow", "several-errors", "gate-randomized-offset",
        "gate-on-success", "worker-missing-stop-timeout", "watchdog-without-notify",
        "warn-stop-timeout-shorter-than-job", "warn-recycle-shorter-than-stop", "warn-restart-always-unlimited",
        # what systemd or the host would reject or misread
        "warn-user-nobody", "name-shadows-system-unit", "lock-shared-different-users", "lock-path-private",
        "recycle-with-restart-no", "warn-cluster-without-timeout", "yaml-explicit-tag-str", "duplicate-key-and-more",
        "warn-environment-secret",
        # hostile input (the large ones are generated in tests/test_limits.py)
        "nesting-too-deep", "instances-superscript", "instances-too-many", "number-too-large", "yaml-alias-bomb",
        "names-too-long-for-systemd",
        # messages that name the real mistake
        "lock-typo-and-more", "queue-bad-settings", "yaml-tab-indent", "job-keys-outdented", "note-no-target",
        "shell-syntax-expansions",
    ):
        assert needed in names


# --- inputs that cannot carry a header ------------------------------------------------

INLINE = [
    # (file name, bytes, the one expected diagnostic)
    ("empty.yaml", b"", "empty.yaml:1:1: error: the manifest is empty (it needs at least 'jobgen: 1' and a 'jobs:' section)"),
    ("latin1.yaml", b"jobgen: 1\njobs:\n  caf\xe9:\n", "latin1.yaml:3:1: error: the manifest is not valid UTF-8"),
]


@pytest.mark.parametrize("name,data,expected", INLINE, ids=[i[0] for i in INLINE])
def test_headerless_input(tmp_path: Path, name: str, data: bytes, expected: str) -> None:
    (tmp_path / name).write_bytes(data)
    for args in (("render", name, "-o", "out"), ("check", name)):
        result = _jobgen(*args, cwd=tmp_path)
        _no_traceback(result)
        assert result.stderr.splitlines() == [expected, "jobgen: 1 error; nothing written"]
        assert result.returncode == EXIT_INVALID
    assert not (tmp_path / "out").exists()


def test_a_manifest_that_is_not_there(tmp_path: Path) -> None:
    result = _jobgen("render", "missing.yaml", "-o", "out", cwd=tmp_path)
    _no_traceback(result)
    assert result.stderr.splitlines() == [
        "missing.yaml:1:1: error: cannot read manifest: No such file or directory",
        "jobgen: 1 error; nothing written",
    ]
    assert result.returncode == EXIT_INVALID
    assert not (tmp_path / "out").exists()


def test_one_bad_manifest_among_good_ones_writes_nothing(tmp_path: Path) -> None:
    """All manifests are checked before anything is written."""
    out = tmp_path / "out"
    good = ROOT / "examples" / "shop.yaml"
    bad = ROOT / "tests" / "errors" / "typo-key.yaml"
    result = _jobgen("render", str(good), str(bad.relative_to(ROOT)), "-o", str(out))
    _no_traceback(result)
    assert result.returncode == EXIT_INVALID
    assert result.stderr.splitlines()[-1] == "jobgen: 1 error; nothing written"
    assert not out.exists()
