"""Hostile input ends with exit 2 and a position, never a traceback, a hang or a unit
systemd cannot read: every limit in src/jobgen/compiler/limits.py (README "Limits").

The inputs are too big to keep as files in tests/errors/, so each is generated here,
with the exact expected diagnostics beside it, and run through the real CLI as
tests/test_errors.py runs its cases: exit 2, exactly these lines on stderr, and the
output folder untouched. Each run gets an address-space limit and a timeout as a safety
net only: a regression fails the test instead of the machine. Nothing is timed.

At the edges, the largest accepted input is rendered into a real folder (names whose
derived files are exactly 255 bytes) and read by real systemd-analyze (the longest
ExecStart= line a command may produce).
"""

from __future__ import annotations

import re
import resource
from functools import partial
from pathlib import Path

import pytest

from jobgen.compiler import limits, load, plan, validate, write
from support.cli import jobgen as run_jobgen
from support.sdanalyze import host_analyzer

ROOT = Path(__file__).resolve().parent.parent
SAFETY_AS = 2 * 1024**3  # bytes of address space for one jobgen run: a safety net, not a measure
SAFETY_TIMEOUT = 120  # seconds: the same


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SAFETY_AS, SAFETY_AS))


jobgen = partial(run_jobgen, timeout=SAFETY_TIMEOUT, preexec_fn=_limit_memory)


HEAD = 'jobgen: 1\ntarget: {systemd: ">=252"}\n'


def job(name: str, command: str = "[/usr/local/bin/backup]", extra: str = "") -> str:
    return f"  {name}:\n    command: {command}\n    schedule: daily\n{extra}"


def _deep(levels: int) -> str:
    return HEAD + "jobs:\n  backup:\n    command: " + "[" * levels + "/bin/true" + "]" * levels + "\n    schedule: daily\n"


def _too_large() -> str:
    # A plain manifest of ordinary jobs, just past 1 MiB.
    body = "".join(job(f"job{i}", f"[/usr/local/bin/run, 'task-{i}']") for i in range(17_000))
    return HEAD + "jobs:\n" + body


def _chained_aliases() -> str:
    # Each anchor nests the previous one 10 levels deeper: 4 lines, 43 levels once expanded.
    lines = ["a0: &a0 [[[[[[[[[[x]]]]]]]]]]"]
    for i in range(1, 4):
        lines.append(f"a{i}: &a{i} [[[[[[[[[[*a{i - 1}]]]]]]]]]]")
    return HEAD + "\n".join(lines) + "\njobs: {}\n"


def _values_through_aliases() -> str:
    # One 60 KiB description, used by 80 jobs: 4.7 MiB of unit text from a 70 KiB file.
    first = job("job0", extra=f"    description: &d {'x' * 60 * 1024}\n")
    return HEAD + "jobs:\n" + first + "".join(job(f"job{i}", extra="    description: *d\n") for i in range(1, 80))


def _args(n: int, size: int) -> str:
    return "[/usr/local/bin/run" + "".join(f", '{'a' * size}'" for _ in range(n)) + "]"


M = "m.yaml"
HOSTILE = [
    # (what, manifest text, the expected diagnostics). A problem found in what an alias
    # expands to is placed where the aliased value is written.
    # libyaml stops at its own limit (1000 levels) while it looks ahead in a flow list,
    # before the composer reaches jobgen's (32): the same message, where libyaml saw it.
    ("nesting 100,000 levels deep (was RecursionError)", _deep(100_000),
     [f"{M}:5:1011: error: the manifest nests deeper than 32 levels (a manifest needs 5) (README: Limits)"]),
    ("nesting deeper through chained aliases", _chained_aliases(),
     [f"{M}:3:10: error: the manifest nests deeper than 32 levels through aliases; write it out plainly (README: Limits)"]),
    ("a 2 MiB line (reached systemd: 'No buffer space available')",
     HEAD + "jobs:\n" + job("backup", "[/usr/local/bin/backup, " + "x" * 2 * 1024 * 1024 + "]"),
     [f"{M}:1:1: error: the manifest is larger than 1 MiB, jobgen's limit for one manifest; split it into several manifests (README: Limits)"]),
    ("a manifest of 17,000 ordinary jobs, past 1 MiB", _too_large(),
     [f"{M}:1:1: error: the manifest is larger than 1 MiB, jobgen's limit for one manifest; split it into several manifests (README: Limits)"]),
    ("one value past 64 KiB", HEAD + "jobs:\n" + job("backup", extra=f"    description: {'x' * 70_000}\n"),
     [f"{M}:7:18: error: a value of 70,000 bytes; one value may have at most 65,536 (README: Limits)"]),
    ("4 MiB of values through aliases", _values_through_aliases(),
     [f"{M}:7:18: error: the manifest's values add up to more than 4 MiB through aliases; write it out plainly (README: Limits)"]),
    ("a command of 1,025 arguments", HEAD + "jobs:\n" + job("backup", _args(1024, 1)),
     [f"{M}:5:14: error: job 'backup': 'command': the command has 1025 arguments; a command may have at most 1024 (README: Limits)"]),
    ("a command of 70,000 bytes in several arguments", HEAD + "jobs:\n" + job("backup", _args(2, 35_000)),
     [f"{M}:5:14: error: job 'backup': 'command': the command's arguments add up to 70,018 bytes; a command may have at most 65,536 (README: Limits); put long scripts in a file and run that"]),
    ("a 242-character job name (was ENAMETOOLONG half-way through writing)", HEAD + "jobs:\n" + job("j" * 242),
     [f"{M}:4:3: error: job '{'j' * 242}': the name has 242 characters; jobgen allows at most 241, so that every file it derives from the name (NAME-drain.service, NAME.lock, ...) fits in 255 bytes (README: Limits)"]),
    ("a path component longer than NAME_MAX",
     HEAD + "jobs:\n" + job("backup", extra=f"    working_directory: /srv/{'d' * 256}\n"),
     [f"{M}:7:24: error: job 'backup': 'working_directory': a path component has 256 bytes; each may have at most 255 (NAME_MAX)"]),
    ("a host lock name whose lock file is longer than NAME_MAX",
     HEAD + "jobs:\n" + job("backup", extra=f"    lock: {{name: {'l' * 251}}}\n"),
     [f"{M}:7:12: error: job 'backup': 'lock.name': the name has 251 characters; a host lock name may have at most 250 (the lock file name NAME.lock must fit in 255 bytes)"]),
]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("text,expected", [(t, e) for _, t, e in HOSTILE], ids=[w for w, _, _ in HOSTILE])
def test_hostile_input_exits_2_with_a_position_and_writes_nothing(tmp_path: Path, text: str, expected: list[str]) -> None:
    (tmp_path / M).write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "sentinel.service").write_text("[Unit]\n")
    before = _tree(out)
    for args in (("render", M, "-o", "out"), ("check", M)):
        result = jobgen(*args, cwd=tmp_path)
        assert "Traceback" not in result.stderr
        assert result.stderr.splitlines() == expected + ["jobgen: 1 error; nothing written"]
        assert result.returncode == 2
    assert _tree(out) == before


def test_validation_stops_after_1000_problems(tmp_path: Path) -> None:
    """40,000 misspelt keys took minutes (each gets a "did you mean" search); problems
    past the first 1,000 are not looked for."""
    keys = "".join(f"    descriptoin{i}: x\n" for i in range(1100))
    (tmp_path / M).write_text(HEAD + "jobs:\n" + job("backup", extra=keys))
    result = jobgen("check", M, cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert lines[0] == f"{M}:7:5: error: job 'backup': unknown key 'descriptoin0'; did you mean 'description'?"
    assert lines[-2:] == [
        f"{M}:1007:5: error: more than 1,000 problems; stopped here (README: Limits)",
        "jobgen: 1001 errors; nothing written",
    ]
    assert len(lines) == 1002 and result.returncode == 2


def test_a_manifest_file_name_too_long_for_its_tmpfiles_conf(tmp_path: Path) -> None:
    stem = "m" * (limits.MANIFEST_STEM_BYTES + 1)
    (tmp_path / f"{stem}.yaml").write_text(HEAD + "jobs:\n" + job("backup"))
    result = jobgen("render", f"{stem}.yaml", "-o", "out", cwd=tmp_path)
    assert result.stderr.splitlines() == [
        f"{stem}.yaml:1:1: error: the manifest's file name has 244 bytes before its extension; jobgen allows at most 243, "
        "so that tmpfiles.d/jobgen-NAME.conf fits in 255 bytes (README: Limits)",
        "jobgen: 1 error; nothing written",
    ]
    assert result.returncode == 2
    assert not (tmp_path / "out").exists()


# The manifest's file name is written into the first line of every unit and the tmpfiles.d
# snippet's name: a line break there started a line of its own in every unit (a directive,
# if the name said one), and a byte that is not UTF-8 ended the render with an internal error.
@pytest.mark.parametrize("name, shown, what", [
    (b"a\nExecStartPre=true.yaml", "a\\nExecStartPre=true.yaml", "the control character U+000A"),
    (b"red\x1b[31m.yaml", "red\\x1b[31m.yaml", "the control character U+001B"),
    (b"caf\xe9.yaml", "caf\\xe9.yaml", "a byte that is not UTF-8"),
])
def test_a_manifest_file_name_that_cannot_be_written_into_a_unit(tmp_path: Path, name: bytes, shown: str, what: str) -> None:
    import os

    path = os.path.join(os.fsencode(tmp_path), name)
    with open(path, "w") as fh:
        fh.write(HEAD + "jobs:\n" + job("backup"))
    for command in (["render", os.fsdecode(name), "-o", "out"], ["check", os.fsdecode(name)]):
        result = jobgen(*command, cwd=tmp_path)
        assert result.stderr.splitlines() == [
            f"{shown}:1:1: error: the manifest's file name holds {what}; it is written into the first line of every unit "
            "and into the tmpfiles.d snippet's name: rename the file",
            "jobgen: 1 error; nothing written",
        ]
        assert result.returncode == 2
    assert not (tmp_path / "out").exists()



def test_a_manifest_that_is_a_fifo_nobody_writes_ends_at_once(tmp_path: Path) -> None:
    """open(2) of a FIFO waits for a writer: every command, and the generator at boot, hung
    there. It reads as empty now; a pipe (`jobgen check <(...)`) is still read to its end."""
    import os

    os.mkfifo(tmp_path / "m.yaml")
    for command in (["render", "m.yaml", "-o", "out"], ["check", "m.yaml"], ["plan", "m.yaml"]):
        result = jobgen(*command, cwd=tmp_path, timeout=60)
        assert (result.returncode, result.stderr.splitlines()) == (2, [
            "m.yaml:1:1: error: the manifest is empty (it needs at least 'jobgen: 1' and a 'jobs:' section)",
            "jobgen: 1 error; nothing written",
        ])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]
    piped = jobgen("check", "/dev/stdin", input=HEAD + "jobs:\n" + job("backup"), timeout=60)
    assert piped.returncode == 0 and piped.stdout.startswith("/dev/stdin: ok (3 files"), piped

def test_the_longest_names_render_into_a_real_folder(tmp_path: Path) -> None:
    """At the limits, every file jobgen derives (and the temporary file it writes first)
    fits: the names of a job, a queue job and a worker are 241 characters, the manifest's
    stem 243 bytes."""
    name = "n" * limits.NAME
    queued, worker = "q" + name[1:], "w" + name[1:]
    stem = "m" * limits.MANIFEST_STEM_BYTES
    workers = f"workers:\n  {worker}:\n    command: [/usr/local/bin/work]\n    stop_timeout: 30s\n    instances: {limits.INSTANCES}\n"
    jobs = job(name) + job(queued, extra="    overlap: queue\n")
    (tmp_path / f"{stem}.yaml").write_text(HEAD + "jobs:\n" + jobs + workers)
    result = jobgen("render", f"{stem}.yaml", "-o", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    written = {p.name for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert {
        f"{name}.service", f"{name}.timer", f"{queued}-drain.service", f"{queued}-drain.path",
        f"{worker}@.service", f"{worker}.target", f"jobgen-{stem}.conf",
    } <= written
    assert not [n for n in written if n.endswith(".jobgen-tmp")]
    target = (tmp_path / "out" / f"{worker}.target").read_text()
    assert f"Wants={worker}@{limits.INSTANCES}.service" in target


def _longest_exec_manifest() -> str:
    # The worst a command may be: 1,024 arguments holding 64 KiB of control characters,
    # each written as a 4-byte \xNN escape, behind the longest lock wrapper (a host lock
    # file of 4,095 bytes under a folder of 255-byte names).
    per_arg = limits.COMMAND_BYTES // limits.COMMAND_ARGS
    args = ", ".join('"' + "\\x01" * per_arg + '"' for _ in range(limits.COMMAND_ARGS - 1))
    folder = "/run/" + "/".join(["d" * 255] * 15)
    lock_path = folder + "/" + "l" * (limits.PATH_MAX - 1 - len(folder) - 1 - len(".lock")) + ".lock"
    return (
        HEAD + "jobs:\n" + job("longest", f"[/usr/local/bin/run, {args}]",
                               f"    hardening: none\n    lock: {{path: {lock_path}}}\n")
    )


def test_the_longest_exec_line_is_read_by_real_systemd(tmp_path: Path) -> None:
    """systemd refuses a unit line past LONG_LINE_MAX, 1 MiB (src/basic/fileio.h). The
    worst command the limits allow renders well inside it, and systemd-analyze reads it."""
    analyzer = host_analyzer()
    if analyzer is None:
        pytest.skip("no systemd-analyze on this host")
    (tmp_path / M).write_text(_longest_exec_manifest())
    result = jobgen("render", M, "-o", "out", "--systemd", str(analyzer.version), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    service = tmp_path / "out" / "longest.service"
    line = next(x for x in service.read_bytes().splitlines() if x.startswith(b"ExecStart="))
    assert 256 * 1024 < len(line) < 1024 * 1024
    verdict = analyzer.verify([service, tmp_path / "out" / "longest.timer"], stubs=["/usr/local/bin/run"])
    assert (verdict.rc, verdict.lines) == (0, [])


def test_a_line_past_systemds_limit_is_what_the_limits_prevent(tmp_path: Path) -> None:
    """The other side: a unit with a 2 MiB ExecStart= line, written by hand, is refused by
    systemd-analyze ("No buffer space available", ENOBUFS from read_line())."""
    analyzer = host_analyzer()
    if analyzer is None:
        pytest.skip("no systemd-analyze on this host")
    service = tmp_path / "long.service"
    service.write_text("[Service]\nType=oneshot\nExecStart=/usr/local/bin/run " + "x" * 2 * 1024 * 1024 + "\n")
    verdict = analyzer.verify([service], stubs=["/usr/local/bin/run"])
    assert verdict.rc != 0
    assert any(re.search(r"No buffer space available", line) for line in verdict.lines), verdict.lines


def test_readme_states_every_limit() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Limits", 1)[1].split("\n## ", 1)[0]
    for shown in (
        f"| manifest file | {limits.MANIFEST_BYTES // 2**20} MiB |",
        f"| {limits.DEPTH} levels",
        f"| {limits.NODES:,} |",
        f"| problems reported | {limits.PROBLEMS:,} |",
        f"| one value | {limits.VALUE_BYTES // 1024} KiB |",
        f"| {limits.TOTAL_VALUE_BYTES // 2**20} MiB |",
        f"| {limits.COMMAND_ARGS:,} arguments, {limits.COMMAND_BYTES // 1024} KiB in all |",
        f"| `instances` | {limits.INSTANCES:,} |",
        f"| {limits.UINT_MAX:,} |",
        f"| a job or worker name | {limits.NAME} characters |",
        f"| a host `lock.name` | {limits.NAME_MAX - len('.lock')} characters |",
        f"| {limits.MANIFEST_STEM_BYTES} bytes |",
        f"| a path | {limits.PATH_MAX - 1:,} bytes, {limits.NAME_MAX} per component |",
    ):
        assert shown in section


def test_temporary_names_come_from_write_and_do_not_grow_with_the_final_name(tmp_path: Path) -> None:
    """The limits leave no room for the temporary file each file is written through,
    because its name is write.py's fixed prefix and counter, never the final name: were
    it to carry the name again, NAME and MANIFEST_STEM_BYTES would have to shrink."""
    names = {Path(write._write_temp(tmp_path, b"x", sync=False)).name for _ in range(3)}
    assert all(n.startswith(write.TMP_PREFIX) and len(n) <= write.TMP_NAME_MAX for n in names)
    assert write.TMP_NAME_MAX <= limits.NAME_MAX
    # the limits are the derived names' own lengths, nothing else
    assert limits.NAME == limits.NAME_MAX - len("-drain.service")
    assert limits.tmpfiles_name(f"/srv/{'m' * limits.MANIFEST_STEM_BYTES}.yaml") == f"jobgen-{'m' * limits.MANIFEST_STEM_BYTES}.conf"
    assert len(limits.tmpfiles_name("m" * limits.MANIFEST_STEM_BYTES + ".yaml")) == limits.NAME_MAX


def test_the_planner_names_the_tmpfiles_snippet_by_the_same_rule(tmp_path: Path) -> None:
    """plan.plan called without the pipeline (as tools and tests do) names the snippet as
    render, apply and the generator do: limits.tmpfiles_name, no fallback name of its own."""
    path = tmp_path / "shop.yaml"
    path.write_text("jobgen: 1\ntarget: {systemd: '252'}\njobs:\n  tick:\n    command: [/bin/true]\n    schedule: daily\n")
    manifest, _ = validate.validate(load.load_file(str(path)), str(path))
    snippets = [f.filename for f in plan.plan(manifest).files if f.filename.startswith("tmpfiles.d/")]
    assert snippets == ["tmpfiles.d/jobgen-shop.conf"] == [f"tmpfiles.d/{limits.tmpfiles_name(str(path))}"]
