"""`jobgen import-crontab` on fuzzed crontabs: a documented exit code and one line per problem,
never an internal error, whatever the input.

The inputs are drawn with a fixed seed (every run feeds the same files): the lines of
tests/crontabs/corpus with random field mutations (a field replaced, cut, doubled, or given
stray characters), garbage bytes, long lines, NULs and control characters, and files that are
not UTF-8 at all. Each file is one run of the real command.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from jobgen.cli.exits import EXIT_INVALID, EXIT_OK
from jobgen.cli.import_crontab import EXIT_PARTIAL
from jobgen.tools import crontab as tool
from tests.test_cron_corpus import entries

ROOT = Path(__file__).resolve().parent.parent
SEED = 20261203
FILES = 10
LINES_PER_FILE = 40
DOCUMENTED = {EXIT_OK, EXIT_PARTIAL, EXIT_INVALID}  # README: import-crontab

_TOKENS = ["*", "*/0", "*/99999999999999999999", "-", "--1", "1-", "/", "//5", ",", "1,,2", "60", "-1", "007",
           "jan-", "mon-sun", "@", "@daily", "%", "\\%", "L", "?", "5#3", "1-31/0", "2-1", "é", "٣", "𝟙", "½",
           "0x10", "1e3", " ", "\t", "'", '"', "`", "$(x)", "\\", "*/" + "9" * 400]
_GARBAGE = "\x00\x01\x07\x08\x1b[31m\x7f\ufeff\u200b\ufffd"


def _mutate(rng: random.Random, line: str) -> str:
    words = line.split(" ")
    roll = rng.random()
    i = rng.randrange(len(words))
    if roll < 0.3:
        words[i] = rng.choice(_TOKENS)
    elif roll < 0.45:
        del words[i]
    elif roll < 0.55:
        words.insert(i, words[i])
    elif roll < 0.7:
        w = words[i]
        at = rng.randrange(len(w) + 1)
        words[i] = w[:at] + rng.choice(_GARBAGE + "*/,-@%=") + w[at:]
    elif roll < 0.8:
        return line + " " + "x" * rng.choice((1000, 70000))  # a long line
    elif roll < 0.9:
        return "".join(rng.choice(_GARBAGE + "abc =*/@%") for _ in range(rng.randrange(1, 60)))
    else:
        return rng.choice(("", "FOO", "=", "=x", "A B=c", "CRON_TZ=", "CRON_TZ=../../etc/passwd", "SHELL=sh",
                           "MAILTO=a@b,c@d", "RANDOM_DELAY=-1", "PERSISTENT=maybe", "TZ=\x00", "X=\x1b]0;x\x07"))
    return " ".join(words)


def fuzzed() -> list[tuple[str, bytes, list[str]]]:
    """(name, file bytes, extra arguments) for each run, always the same."""
    rng = random.Random(SEED)
    lines = [e.line for e in entries()]
    out = []
    for n in range(FILES):
        text = "\n".join(_mutate(rng, rng.choice(lines)) for _ in range(LINES_PER_FILE)) + "\n"
        data = text.encode("utf-8", "surrogatepass")
        args = ["--system"] if n % 3 == 0 else ["--user-crontab", "--user", "alice"]
        out.append((f"fuzz{n}", data, args))
    # not UTF-8: a Latin-1 crontab and random bytes
    out.append(("latin1", "0 0 * * * /usr/bin/caf\xe9\n".encode("latin-1"), ["--user-crontab"]))
    out.append(("bytes", bytes(rng.randrange(256) for _ in range(4000)), ["--user-crontab"]))
    return out


def _jobgen(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "jobgen", *args], cwd=ROOT, capture_output=True, text=True,
                          errors="surrogateescape", env=env, timeout=300)


@pytest.mark.parametrize(("name", "data", "args"), fuzzed(), ids=[f[0] for f in fuzzed()])
def test_a_fuzzed_crontab_ends_in_a_documented_code_with_one_line_per_problem(tmp_path, name, data, args):
    src, out = tmp_path / name, tmp_path / "out.yaml"
    src.write_bytes(data)
    r = _jobgen("import-crontab", *args, str(src), "-o", str(out))
    assert r.returncode in DOCUMENTED, r.stderr[-3000:]
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    if r.returncode == EXIT_INVALID:  # not a crontab jobgen can read: one line, nothing written
        assert len(lines) == 1 and lines[0].startswith(f"jobgen: error: {src}: cannot read:"), lines
        assert not out.exists()
        return
    shape = re.compile(rf"{re.escape(str(src))}:(\d+): (error|note): \S")
    problems = [m for m in map(shape.match, lines[:-1])]
    assert all(problems), [line for line, m in zip(lines, problems) if not m]
    # one clear line each: no control character reaches the terminal
    assert not [line for line in lines if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", line)]
    summary = re.fullmatch(r"jobgen: (\d+) jobs? imported(?:; (\d+) lines? not translated)?", lines[-1])
    assert summary, lines[-1]
    errors = [m for m in problems if m.group(2) == "error"]
    # the summary counts lines; each problem has its own error line, and a crontab line can
    # have two (a bad schedule and an unescaped '%')
    assert len({m.group(1) for m in errors}) == int(summary.group(2) or 0)
    manifest = yaml.safe_load(out.read_text())
    assert len(manifest["jobs"] or {}) == int(summary.group(1))


# --------------------------------------------------------------------------- what the fuzzing found, one input each


def _read(text: str) -> tuple[tool.Imported, str]:
    imported = tool.read(text, "ctl", system=False, user="alice")
    return imported, tool.settle(imported, "ctl", "<import>")


def _problems(imported: tool.Imported) -> list[str]:
    return [str(p) for p in sorted(imported.problems, key=lambda p: p.line)]


def test_a_control_character_in_a_command_is_refused_and_shown_escaped():
    imported, manifest = _read("0 0 * * * /usr/bin/x\x07y\n@\x00 /bin/true\n0 1 * * * /usr/bin/ok\n")
    assert _problems(imported) == [
        "line 1: the command contains U+0007 (a control character or line break), which a unit file cannot carry",
        "line 2: unknown nickname '@\\x00' (cron knows @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
        "@hourly, @reboot)",
    ]
    assert list(yaml.safe_load(manifest)["jobs"]) == ["ctl-ok-l3"]


def test_characters_yaml_cannot_hold_raw_are_escaped_in_the_manifest():
    """Format characters: JSON's quoting leaves them raw, YAML refuses them."""
    imported, manifest = _read("0 0 * * * /usr/bin/echo caf\u00e9\u200b\ufeff\n")
    assert _problems(imported) == []
    job = yaml.safe_load(manifest)["jobs"]["ctl-echo-l1"]
    assert job["command"] == ["/usr/bin/echo", "caf\u00e9\u200b\ufeff"]
    assert "\\u200b" in manifest and "\u200b" not in manifest


def test_an_unknown_cron_tz_refuses_the_lines_after_it_until_the_next_one():
    imported, manifest = _read("CRON_TZ=Eur\x1b[31mope\n0 3 * * * /usr/bin/a\nCRON_TZ=UTC\n0 4 * * * /usr/bin/b\n")
    assert _problems(imported) == [
        "line 1: CRON_TZ=Eur\\x1b[31mope is not a time zone jobgen knows",
        "line 2: it runs in CRON_TZ=Eur\\x1b[31mope (line 1), which is not a time zone jobgen knows: when it runs is unknown",
    ]
    assert list(yaml.safe_load(manifest)["jobs"]) == ["ctl-b-l4"]


def test_a_line_longer_than_a_command_can_be_is_refused_with_its_length():
    imported, _ = _read("0 2 * * * /usr/bin/" + "x" * 70000 + "\n")
    assert _problems(imported) == ["line 1: the line is 70,019 bytes long; a command jobgen runs is at most 65,536 bytes"]


def test_a_message_quotes_at_most_300_characters_of_a_line():
    imported, _ = _read("@" + "y" * 5000 + " /bin/true\n")
    (message,) = _problems(imported)
    assert re.fullmatch(r"line 1: unknown nickname '@y+\.\.\. \(4,708 more characters\)", message), message
    assert len(message) == len("line 1: ") + 400 + len("... (4,708 more characters)")


def test_jobs_past_the_manifest_limit_are_refused_one_by_one():
    line = "0 0 * * * /usr/bin/echo " + "z" * 60000 + "\n"  # some 180 KB of manifest each
    imported, manifest = _read(line * 8)
    assert len(manifest.encode()) <= 1024 * 1024
    kept = len(yaml.safe_load(manifest)["jobs"])
    assert kept == 5 and _problems(imported) == [
        f"line {n}: the manifest would be larger than 1 MiB, jobgen's limit for one manifest: import the crontab in parts"
        for n in range(kept + 1, 9)]


def test_only_newline_ends_a_line_and_only_space_and_tab_separate_fields():
    """U+00A0 is no blank and U+2028, U+0085 no line break to cron (it splits lines at '\\n',
    fields at space and tab): Python's split() and splitlines() would say otherwise."""
    imported, manifest = _read("0\u00a00 * * * * /usr/bin/nbsp\n0 0 * * * /usr/bin/a\u2028b\u0085c\n0 5 * * * /usr/bin/crlf\r\n")
    assert _problems(imported) == [
        "line 1: '0\\xa00 * * * *': a cron schedule has 5 fields (minute hour day month weekday), got 6",
        "line 2: the command contains U+2028 (a control character or line break), which a unit file cannot carry"]
    jobs = yaml.safe_load(manifest)["jobs"]
    assert [j["command"] for j in jobs.values()] == [["/usr/bin/crlf"]]
