"""A command written as one string: its words, and the shell syntax in it that nobody performs.

`command: "/usr/bin/du -sh /srv/app"` is split into words as a POSIX shell splits them
(whitespace separates; '...' is literal; in "..." a backslash escapes only $ ` " \\; outside
quotes it escapes any character), and then *no shell runs it*. Neither does systemd:
systemd.service(5) "COMMAND LINES" understands "only the meta-characters and expansions
described" there; "redirection using <, <<, > and >>, pipes using |, running programs in the
background using &, and other elements of shell syntax are not supported", and "shell
command lines are not directly supported" (its example: ExecStart=sh -c 'dmesg | tac').
systemd's own `$FOO`/`${FOO}` expands the unit's environment, not the shell's, and jobgen
does not use it: escape.py writes every `$` as `$$`, so a word reaches the program as written.

So a string holding shell syntax would silently run something other than it reads
(`$HOME` as those five characters, `*.log` as a file named so). The rule, for every reader
of a command string:

* validate.py refuses such a string `command:` with the pieces named, and shows both ways
  to say what was meant: `[/bin/sh, -c, "..."]` for the shell, a list for the words as
  written;
* `jobgen import-crontab` (tools/crontab.py), where cron itself ran `$SHELL -c`, keeps the
  shell for such a line and makes a plain line an argv list.

What counts as shell syntax is ``SYNTAX`` below and ``read``, one scanner for both.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# What a shell does with each kind of piece, as a message names it. POSIX sh (dash, the
# /bin/sh of Debian) and bash alike, except brace expansion (bash's, and cron's SHELL may be
# bash).
SYNTAX: dict[str, str] = {
    "|": "a pipe",
    "||": "an or-list",
    "&&": "an and-list",
    "&": "a background job",
    ";": "a command separator",
    "redirection": "a redirection",
    "subshell": "a subshell",
    "$": "a shell variable",
    "$(": "a command substitution",
    "`": "a command substitution",
    "$'": "bash's $'...' quoting",
    "~": "the home directory",
    "pattern": "a file name pattern",
    "#": "a comment",
    "braces": "brace expansion",
}

_BLANK = " \t\n"
_OPERATOR_CHARS = "|&;<>()"
# After '$', what makes it an expansion (a '$' before anything else is a literal '$' in sh):
# a name, a positional or special parameter, '{', '(', and bash's $'...' / $"...".
_EXPANDS = re.compile(r"[A-Za-z_0-9{(@*#?$!'\"-]")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*|[0-9@*#?$!-]")
_BRACES = re.compile(r"\{[^{}\s]*(?:,|\.\.)[^{}\s]*\}")
# A redirection written with its file descriptors: 2>&1, 2>/dev/null, >&2, 1>>log.
_REDIRECTION = re.compile(r"[0-9]*(?:>>|>&|<&|<<|<>|>\||>|<)(?:[0-9]+-?|-)?")


class Piece(NamedTuple):
    text: str  # as written: '$HOME', '*.log', '2>&1'
    what: str  # SYNTAX's name for it


class Reading(NamedTuple):
    words: tuple[str, ...]  # the words a shell would split, every character kept literally
    syntax: tuple[Piece, ...]  # the shell syntax in it, in order, each piece once


def read(text: str) -> Reading:
    """Split ``text`` by sh's quoting rules and find the shell syntax in it.

    Raises ValueError (a sentence) for an unclosed quote or a trailing backslash."""
    return _Scanner(text).run()


class _Scanner:
    def __init__(self, text: str):
        self.text = text
        self.words: list[str] = []
        self.word: list[str] | None = None  # None between words
        self.start = 0  # where the current word starts in text
        self.found: dict[str, Piece] = {}

    def run(self) -> Reading:
        text, i, n = self.text, 0, len(self.text)
        while i < n:
            c = text[i]
            if c in _BLANK:
                self.end_word()
                i += 1
                continue
            first = self.word is None
            if first:
                self.word, self.start = [], i
            if c == "\\":
                if i + 1 == n:
                    raise ValueError("a backslash ends the command, with nothing after it to escape")
                self.word.append(text[i + 1])
                i += 2
            elif c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise ValueError(f"the quote (') at character {i + 1} is not closed")
                self.word.append(text[i + 1 : end])
                i = end + 1
            elif c == '"':
                i = self.double_quoted(i)
            else:
                k = self.unquoted(i, first)  # the characters it read, kept literally in the word
                self.word.append(text[i : i + k])
                i += k
        self.end_word()
        return Reading(tuple(self.words), tuple(self.found.values()))

    def end_word(self) -> None:
        if self.word is not None:
            self.words.append("".join(self.word))
            self.word = None

    def raw_word(self) -> str:
        """The current word as written (for a message), up to the next blank."""
        return re.match(r"\S*", self.text[self.start :]).group()

    def note(self, text: str, kind: str) -> None:
        self.found.setdefault(text, Piece(text, SYNTAX[kind]))

    def double_quoted(self, i: int) -> int:
        text, n = self.text, len(self.text)
        j = i + 1
        while j < n and text[j] != '"':
            c = text[j]
            if c == "\\" and j + 1 < n and text[j + 1] in '$`"\\':
                self.word.append(text[j + 1])
                j += 2
                continue
            k = self.substitution(j, quoted=True) if c in "$`" else 1  # expanded inside double quotes too
            self.word.append(text[j : j + k])
            j += k
        if j >= n:
            raise ValueError(f'the quote (") at character {i + 1} is not closed')
        return j + 1

    def unquoted(self, i: int, first: bool) -> int:
        text, c = self.text, self.text[i]
        if c in _OPERATOR_CHARS:
            return self.operator(i)
        if c in "$`":
            return self.substitution(i)
        if c == "~" and first:
            self.note(re.match(r"~[^/\s]*", text[i:]).group(), "~")
        elif c == "#" and first:
            self.note(self.raw_word(), "#")
        elif c in "*?" or (c == "[" and "]" in self.raw_word()[i - self.start :]):
            self.note(self.raw_word(), "pattern")
        elif c == "{" and _BRACES.match(text, i):
            self.note(self.raw_word(), "braces")
        return 1

    def substitution(self, i: int, quoted: bool = False) -> int:
        """Note the '$' or '`' piece at ``i``; -> how many characters to take as they are
        (a `...`, $(...) or ${...} whole: what is inside is the shell's, not words)."""
        text = self.text
        if text[i] == "`":
            end = text.find("`", i + 1)
            piece = text[i : end + 1] if end > 0 else text[i:]
            self.note(piece, "`")
            return len(piece)
        if i + 1 >= len(text) or not _EXPANDS.match(text, i + 1) or (quoted and text[i + 1] in "'\""):
            return 1  # a '$' before anything else is a literal '$' in sh ("$" too)
        nxt = text[i + 1]
        if nxt in "{(":
            end = text.find("}" if nxt == "{" else ")", i + 2)
            piece = text[i : end + 1] if end > 0 else text[i:]
            self.note(piece, "$(" if nxt == "(" else "$")
            return len(piece)
        if nxt in "'\"":
            self.note("$" + nxt, "$'")
        else:
            self.note("$" + _NAME.match(text, i + 1).group(), "$")
        return 1

    def operator(self, i: int) -> int:
        """Note the operator at ``i``; -> how many characters it takes."""
        text = self.text
        if text[i] in "<>":
            # Shown with its file descriptors, as written ('2>&1'): digits that are the whole
            # word so far are the descriptor.
            before = text[self.start : i]
            start = self.start if before.isdigit() and before.isascii() else i
            m = _REDIRECTION.match(text, start)
            self.note(m.group(), "redirection")
            return m.end() - i
        if text[i] in "()":
            self.note(text[i], "subshell")
            return 1
        pair = text[i : i + 2]
        if pair in ("||", "&&"):
            self.note(pair, pair)
            return 2
        self.note(text[i], text[i])
        return 1
