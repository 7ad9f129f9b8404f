"""The overrun emulation's ExecCondition= never trusts its stamp file.

Below systemd 257 a job with `overlap: skip` on a calendar schedule gets an
ExecCondition= shell script (plan.DEFER_CHECK) that reads the end time the previous run
wrote into /run/jobgen/JOB.ended and defers a catch-up activation that starts less
than 2 s after it. The stamp is written by the job's user, so its content is data:

* it is never evaluated (bash would run `x[$(cmd)]` inside $((...)));
* anything but a plain number is ignored and the job runs (exit 0), never deferred
  forever (dash exits 2 on a non-number, which ExecCondition= counts as "skip");
* a stamp from the future is ignored (99999999999999999 would defer every run);
* a missing or unreadable stamp prints nothing (no error line reaches the journal);
* a genuine recent stamp still defers (exit 1).

The script is taken from the rendered unit's ExecCondition= argv and run, as the unit
runs it, under both dash (Debian's /bin/sh) and bash (RHEL's /bin/sh).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from jobgen.compiler import pipeline
from jobgen.compiler.plan import DEFER_CHECK, Exec
from jobgen.compiler.target import parse_target

SHELLS = ("dash", "bash")
JOB = "jobgen: 1\njobs:\n  j:\n    command: [/bin/true]\n    schedule: daily\n    overlap: skip\n"


def condition_argv() -> tuple[str, ...]:
    """The ExecCondition= argv jobgen writes for a skip job on systemd 252."""
    plan = pipeline.build("m.yaml", parse_target("252"), text=JOB).plan
    service = next(f for f in plan.files if f.filename == "j.service")
    (value,) = [v for section, rows in service.sections for k, v in rows if k == "ExecCondition"]
    assert isinstance(value, Exec)
    return value.argv


def run_check(shell: str, stamp: Path) -> subprocess.CompletedProcess[str]:
    path = shutil.which(shell)
    if path is None:
        pytest.skip(f"{shell} not found: apt-get install -y {shell}")
    sh, flag, script, name, _stamp = condition_argv()
    assert (sh, flag, script, name) == ("/bin/sh", "-c", DEFER_CHECK, "jobgen-defer")
    return subprocess.run([path, flag, script, name, str(stamp)], capture_output=True, text=True, timeout=30)


def write_stamp_now(stamp: Path) -> None:
    """What the reporter writes when a run ends: date +%s%6N (µs)."""
    subprocess.run(["/bin/sh", "-c", 'date +%s%6N > "$1"', "sh", str(stamp)], check=True, timeout=30)


# (name, stamp content with {pwned} for the file a payload would create): every one runs the job.
BAD_STAMPS = [
    ("command substitution in an array index", "x[$(id > {pwned})]"),
    ("command substitution alone", "$(id > {pwned})"),
    ("backquotes", "`id > {pwned}`"),
    ("letters", "abc"),
    ("empty", ""),
    ("only a newline", "\n"),
    ("in the future", "99999999999999999"),
    ("a huge number", "9" * 400),
    ("above 64 bits", "18446744073709551617"),
    ("negative", "-5"),
    ("negative and recent", "-1"),
    ("leading zero (octal in bash)", "0899"),
    ("a number and a word", "1700000000000000 x"),
    ("arithmetic", "1+1"),
    ("a NUL byte", "17\x0000"),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("content", [c for _, c in BAD_STAMPS], ids=[n for n, _ in BAD_STAMPS])
def test_a_bad_stamp_is_ignored_and_the_job_runs(tmp_path: Path, shell: str, content: str) -> None:
    pwned = tmp_path / "pwned"
    stamp = tmp_path / "j.ended"
    stamp.write_text(content.format(pwned=pwned))
    result = run_check(shell, stamp)
    assert not pwned.exists(), "the stamp's content was executed"
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_missing_stamp_runs_the_job_silently(tmp_path: Path, shell: str) -> None:
    result = run_check(shell, tmp_path / "never-written.ended")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("shell", SHELLS)
def test_an_unreadable_stamp_runs_the_job_silently(tmp_path: Path, shell: str) -> None:
    stamp = tmp_path / "j.ended"
    stamp.mkdir()  # reading a folder fails for root too ("Is a directory")
    result = run_check(shell, stamp)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("shell", SHELLS)
def test_an_old_stamp_runs_the_job(tmp_path: Path, shell: str) -> None:
    stamp = tmp_path / "j.ended"
    stamp.write_text("1700000000000000\n")  # November 2023
    result = run_check(shell, stamp)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_run_that_just_ended_defers_the_catch_up(tmp_path: Path, shell: str) -> None:
    stamp = tmp_path / "j.ended"
    write_stamp_now(stamp)
    result = run_check(shell, stamp)
    assert result.returncode == 1, result
    assert result.stdout.startswith("previous run ended ") and "ms ago: deferring" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize("shell", SHELLS)
def test_a_genuine_stamp_with_trailing_lines_still_defers(tmp_path: Path, shell: str) -> None:
    """Only the first line is read: what follows it is never looked at."""
    pwned = tmp_path / "pwned"
    stamp = tmp_path / "j.ended"
    write_stamp_now(stamp)
    with stamp.open("a") as f:
        f.write(f"$(id > {pwned})\n")
    result = run_check(shell, stamp)
    assert not pwned.exists()
    assert result.returncode == 1, result
