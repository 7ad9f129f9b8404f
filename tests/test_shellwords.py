"""A command written as one string: split as the shell splits it, and its shell syntax found.

One input per line with what jobgen reads from it. The words of every input without shell
syntax are checked against a real /bin/sh (quote removal is all it does to them), and the
inputs with shell syntax are shown to be ones the shell changes. A string `command:` and
`jobgen import-crontab` follow the same rule (compiler/shellwords.py).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from jobgen.compiler import load, shellwords, validate
from jobgen.compiler.diagnostics import ManifestError
from jobgen.tools import crontab

# (text, the words, the shell syntax found: (piece, what))
PLAIN = [
    ("/usr/bin/php artisan invoices:export --date=yesterday", ["/usr/bin/php", "artisan", "invoices:export", "--date=yesterday"]),
    ("/bin/echo 'a > b' \"c | d\"", ["/bin/echo", "a > b", "c | d"]),  # quoted operators
    ("/bin/echo a\\;b \\$HOME \\~ \\*.log", ["/bin/echo", "a;b", "$HOME", "~", "*.log"]),  # escaped
    ("/bin/echo '$HOME' \"\\$HOME\" \"~\" '*.log'", ["/bin/echo", "$HOME", "$HOME", "~", "*.log"]),  # quoted
    ("/bin/echo \"a\\\\b\" \"c\\d\" 'e\\f'", ["/bin/echo", "a\\b", "c\\d", "e\\f"]),  # backslashes in quotes
    ("/bin/echo price$ $ a~ a#b {} x{y} [", ["/bin/echo", "price$", "$", "a~", "a#b", "{}", "x{y}", "["]),  # literal in sh
    ("/bin/echo \"$\" ''", ["/bin/echo", "$", ""]),
    ("/usr/bin/find /tmp -name '*.tmp' -exec /bin/rm {} +", ["/usr/bin/find", "/tmp", "-name", "*.tmp", "-exec", "/bin/rm", "{}", "+"]),
]

SYNTAX = [
    ("/usr/bin/du -sh $HOME ~ *.log", [("$HOME", "a shell variable"), ("~", "the home directory"), ("*.log", "a file name pattern")]),
    ("/bin/a ${HOME}/x \"$1\" $?", [("${HOME}", "a shell variable"), ("$1", "a shell variable"), ("$?", "a shell variable")]),
    ("/usr/bin/touch \"/srv/$(date -I)\" `id -u`", [("$(date -I)", "a command substitution"), ("`id -u`", "a command substitution")]),
    ("/bin/echo $'\\n'", [("$'", "bash's $'...' quoting")]),
    ("/bin/ls ~app/x file?.txt log[0-9]", [("~app", "the home directory"), ("file?.txt", "a file name pattern"), ("log[0-9]", "a file name pattern")]),
    ("/bin/echo x #note", [("#note", "a comment")]),
    ("/bin/cp /etc/{a,b}.conf {1..3}", [("/etc/{a,b}.conf", "brace expansion"), ("{1..3}", "brace expansion")]),
    ("/bin/x 2>&1 | /bin/y", [("2>&1", "a redirection"), ("|", "a pipe")]),
    ("/bin/x >>/log 2>/dev/null <in", [(">>", "a redirection"), ("2>", "a redirection"), ("<", "a redirection")]),
    ("/bin/a; /bin/b && /bin/c || /bin/d &", [(";", "a command separator"), ("&&", "an and-list"), ("||", "an or-list"), ("&", "a background job")]),
    ("/bin/a (x)", [("(", "a subshell"), (")", "a subshell")]),
]


@pytest.mark.parametrize(("text", "words"), PLAIN, ids=[t for t, _ in PLAIN])
def test_plain_text_is_split_as_the_shell_splits_it(text: str, words: list[str]) -> None:
    reading = shellwords.read(text)
    assert reading.syntax == ()
    assert list(reading.words) == words
    assert _sh_words(text) == words  # the real shell agrees


@pytest.mark.parametrize(("text", "found"), SYNTAX, ids=[t for t, _ in SYNTAX])
def test_shell_syntax_is_found_and_named(text: str, found: list[tuple[str, str]]) -> None:
    assert [(p.text, p.what) for p in shellwords.read(text).syntax] == found


@pytest.mark.parametrize("text", ["/usr/bin/du -sh $HOME ~ *.log", "/bin/a ${HOME}/x", "/bin/echo x #note", "/bin/echo $'a\\tb'"])
def test_what_is_found_is_what_the_shell_changes(text: str) -> None:
    """The pieces are not style: the real shell gives other words than the text reads."""
    assert _sh_words(text, env={"HOME": "/home/app", "PATH": "/usr/bin:/bin"}, shell="bash") != list(shellwords.read(text).words)


@pytest.mark.parametrize(("text", "problem"), [
    ("/bin/echo 'a", "the quote (') at character 11 is not closed"),
    ('/bin/echo "a', 'the quote (") at character 11 is not closed'),
    ("/bin/echo a\\", "a backslash ends the command, with nothing after it to escape"),
])  # fmt: skip
def test_what_cannot_be_split_says_why(text: str, problem: str) -> None:
    with pytest.raises(ValueError) as caught:
        shellwords.read(text)
    assert str(caught.value) == problem


def test_a_string_command_and_import_crontab_follow_one_rule() -> None:
    """The texts validate.py refuses as a string command are the ones import-crontab keeps
    a shell for; the texts it accepts become the same argv in both."""
    for text, words in PLAIN:
        assert _imported(text) == tuple(words)
        assert _string_command(text) == tuple(words)
    for text, _ in SYNTAX:
        assert _imported(text) == ("/bin/sh", "-c", text)
        with pytest.raises(ManifestError) as caught:
            _string_command(text)
        assert "is shell syntax" in caught.value.diagnostics[0].message or "are shell syntax" in caught.value.diagnostics[0].message


def _imported(text: str) -> tuple[str, ...]:
    imported = crontab.read(f"0 3 * * * {text}\n", "crontab", system=False, user="app")
    assert imported.problems == []
    return imported.jobs[0].command


def _string_command(text: str) -> tuple[str, ...]:
    manifest = f"jobgen: 1\ntarget: {{systemd: '252'}}\njobs:\n  j: {{command: {json.dumps(text)}, schedule: daily}}\n"
    model, _ = validate.validate(load.load_text(manifest, "m.yaml"), "m.yaml")
    return model.jobs[0].command


def _sh_words(text: str, env: dict[str, str] | None = None, shell: str = "/bin/sh") -> list[str]:
    """The words the shell passes for ``text``: its arguments set as the shell reads them."""
    script = f"set -- {text}\nprintf '%s\\0' \"$@\""
    out = subprocess.run([shell, "-c", script], capture_output=True, env=env or {"PATH": "/usr/bin:/bin"}, check=True, timeout=30, cwd="/")
    return out.stdout.decode().split("\0")[:-1]
