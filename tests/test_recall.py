"""A render line run again (cli/recall.py): typer's parse of the same words is recalled,
typer is not imported, and every outcome is said exactly as typer's parse says it.

Whether typer parsed is observed from outside: `python -X importtime` lists every module
the process imported. Every test has its own cache folder (conftest.py, JOBGEN_CACHE_DIR),
where the records live next to the render cache's entries.
"""

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.cli import jobgen as run_jobgen

# One job on systemd 257, its run serialized on the host: a unit, a timer and a lock file.
MANIFEST = """\
jobgen: 1
target: {systemd: '257'}
jobs:
  sweep:
    lock: host
    schedule: daily
    command: [/usr/bin/sweep, --all]
"""


def jobgen(*args: str) -> SimpleNamespace:
    """jobgen as a user runs it; ``parsed``: typer was imported (it parsed the words)."""
    r = run_jobgen(*args, python=("-X", "importtime"))
    lines = r.stderr.splitlines(keepends=True)
    parsed = any(line.startswith("import time:") and line.split("|")[-1].strip() == "typer" for line in lines)
    stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return SimpleNamespace(code=r.code, stdout=r.stdout, stderr=stderr, parsed=parsed)


def records() -> list[Path]:
    return sorted((Path(os.environ["JOBGEN_CACHE_DIR"]) / "render").glob("*.argv"))


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(MANIFEST)
    return path


def test_the_same_line_again_is_not_parsed_by_typer_and_says_the_same(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = jobgen("render", str(manifest), "-o", str(out))
    again = jobgen("render", str(manifest), "-o", str(out))
    assert (first.code, first.parsed, again.code, again.parsed) == (0, True, 0, False)
    assert len(records()) == 1
    for record in records():
        record.unlink()
    parsed = jobgen("render", str(manifest), "-o", str(out))
    assert parsed.parsed
    assert (again.stdout, again.stderr) == (parsed.stdout, parsed.stderr)
    assert again.stdout.split()[::2] == ["identical"] * 3


# What changes between the run that records the line and the next one, and the words: each
# outcome said by the recalled parse and by typer's, byte for byte (none of them writes, so
# the two runs find the same folder).
def _edit(manifest: Path, out: Path) -> None:
    manifest.write_text(MANIFEST.replace("--all", "--full"))


def _break(manifest: Path, out: Path) -> None:
    manifest.write_text(MANIFEST.replace("schedule: daily", "schedule: daily\n    colour: blue"))


def _block(manifest: Path, out: Path) -> None:
    for path in sorted(out.iterdir()):
        if path.is_dir():
            for inner in path.iterdir():
                inner.unlink()
            path.rmdir()
        else:
            path.unlink()
    out.rmdir()
    out.write_text("a file where the folder was\n")


OUTCOMES = {
    "--check finds drift (exit 1)": (_edit, ["--check"], 1),
    "--diff shows it": (_edit, ["--diff"], 0),
    "an invalid manifest (exit 2)": (_break, [], 2),
    "an invalid manifest, --format json": (_break, ["--format", "json"], 2),
    "an output that is a file (exit 73)": (_block, [], 73),
    "an output that is a file, --format json": (_block, ["--format", "json"], 73),
    "an option the command refuses (exit 2)": (None, ["--layout", "nowhere"], 2),
    "an option the command refuses, --format json": (None, ["--layout", "nowhere", "--format", "json"], 2),
}


@pytest.mark.parametrize("case", list(OUTCOMES))
def test_every_outcome_of_a_recalled_line_is_said_as_typer_says_it(manifest: Path, tmp_path: Path, case: str) -> None:
    change, words, code = OUTCOMES[case]
    out = tmp_path / "out"
    argv = ("render", str(manifest), "-o", str(out), *words)
    assert jobgen("render", str(manifest), "-o", str(out)).code == 0
    if words:
        assert jobgen(*argv).parsed  # the line recorded
    if change is not None:
        change(manifest, out)
    recalled = jobgen(*argv)
    for record in records():
        record.unlink()
    parsed = jobgen(*argv)
    assert (recalled.parsed, parsed.parsed) == (False, True)
    assert (recalled.code, recalled.stdout, recalled.stderr) == (parsed.code, parsed.stdout, parsed.stderr)
    assert recalled.code == code
    assert "Traceback" not in recalled.stderr


def test_the_json_answer_of_a_recalled_line_is_one_document(manifest: Path, tmp_path: Path) -> None:
    argv = ("render", str(manifest), "-o", str(tmp_path / "out"), "--format", "json")
    jobgen(*argv)
    _break(manifest, tmp_path / "out")
    recalled = jobgen(*argv)
    assert not recalled.parsed
    doc = json.loads(recalled.stdout)
    assert (doc["ok"], doc["exit_code"], doc["error"]) == (False, 2, "1 error; nothing written")
    assert doc["diagnostics"][0]["message"].startswith("job 'sweep': unknown key 'colour'")


# A record is data only (JSON, read field by field): one that is not exactly what recall.py
# writes, or that others could have written, is not used; typer parses, nothing fails.
DAMAGE = {
    "not JSON": lambda doc: "{not json",
    "another command": lambda doc: json.dumps({**doc, "command": "apply"}),
    "an argument missing": lambda doc: json.dumps({**doc, "arguments": {k: v for k, v in doc["arguments"].items() if k != "quiet"}}),
    "an argument jobgen lacks": lambda doc: json.dumps({**doc, "arguments": {**doc["arguments"], "exec": "/bin/sh"}}),
    "a value of another kind": lambda doc: json.dumps({**doc, "arguments": {**doc["arguments"], "output": {"path": 5}}}),
    "an unknown tag": lambda doc: json.dumps({**doc, "arguments": {**doc["arguments"], "fmt": {"pickle": "cos\nsystem\n"}}}),
    "another format": lambda doc: json.dumps({**doc, "format": 2}),
    "a list in a list": lambda doc: json.dumps({**doc, "arguments": {**doc["arguments"], "manifests": [doc["arguments"]["manifests"]]}}),
    "nested deeper than JSON's parser goes": lambda doc: "[" * 100_000 + "]" * 100_000,
    "writable by its group": None,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_untrusted_record_is_not_used(manifest: Path, tmp_path: Path, damage: str) -> None:
    out = tmp_path / "out"
    argv = ("render", str(manifest), "-o", str(out), "-q")
    jobgen(*argv)
    (record,) = records()
    if DAMAGE[damage] is None:
        record.chmod(0o664)
    else:
        record.write_text(DAMAGE[damage](json.loads(record.read_text())))
    again = jobgen(*argv)
    assert (again.code, again.parsed, again.stdout, again.stderr) == (0, True, "", "")


def test_another_line_is_parsed_by_typer(manifest: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    jobgen("render", str(manifest), "-o", str(out))
    other = jobgen("render", str(manifest), "-o", str(out), "-q")
    assert (other.code, other.parsed, other.stdout) == (0, True, "")
    assert len(records()) == 2


def test_no_cache_neither_reads_nor_writes_a_record(manifest: Path, tmp_path: Path) -> None:
    argv = ("render", str(manifest), "-o", str(tmp_path / "out"), "--no-cache")
    assert [jobgen(*argv).parsed for _ in range(2)] == [True, True]
    assert records() == []
