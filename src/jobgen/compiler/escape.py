"""Escaping for unit files, by systemd's own rules, in one place.

Everything from the manifest reaches a unit file through one of these functions, called
from the templates as filters (render.py), never earlier: argv stays ``list[str]`` up to
here. Rules (systemd.service(5) "COMMAND LINES", systemd.unit(5) "SPECIFIERS",
systemd.exec(5) "Environment="):

* ``%`` starts a specifier in the settings whose parser expands them (specifier_table.py,
  one fact per directive): there a literal one is ``%%``; elsewhere ``%`` is written as is
  (``MemoryMax=50%``: ``50%%`` would reach that parser literally and be refused).
* In Exec*= lines ``$NAME``/``${NAME}`` are expanded from the unit's environment at exec
  time (and an unset bare ``$NAME`` word is dropped): a literal ``$`` is ``$$``.
* Words are split on whitespace; double quotes group, and inside them C escapes
  (``\\\\``, ``\\"``, ``\\n``, ``\\xNN``) are decoded, so any byte but NUL survives.
* A line starting with ``@ - : + ! |`` gets a special meaning (prefixes): the first word
  is always an absolute path here (validate.py), so it cannot start one by accident.
* A newline ends the directive: no raw control character is ever written.

The parsed-back argv is checked against real ``systemd-analyze`` in tests/test_escape.py.
"""

from __future__ import annotations

import functools
import re

from jobgen.compiler import specifier_table

# Characters that need no quoting in an Exec word: nothing systemd or a reader could
# misread (no quotes, backslashes, whitespace, ';', specifier or variable starters).
_BARE_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
# Characters never written raw into a unit file (validate.py refuses them where no
# escape exists: descriptions, paths, Environment= values; exec_word C-escapes them):
# - control characters (C0, DEL, C1) and the Unicode line/paragraph separators: a line
#   break ends the directive;
# - Unicode noncharacters, U+FDD0..U+FDEF and U+xxFFFE/U+xxFFFF of every plane: systemd's
#   utf8_is_valid() (src/basic/utf8.c, unichar_is_valid) calls a line holding one "not
#   UTF-8 clean" and ignores the whole assignment (seen on 252, 257 and 262);
# - lone surrogates (YAML "\ud800"): they have no UTF-8 encoding at all.
_PLANE_ENDS = "".join(rf"\U{plane:04x}fffe\U{plane:04x}ffff" for plane in range(17))
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufdd0-\ufdef" + _PLANE_ENDS + "]")
# CONTROL's characters in the Basic Multilingual Plane (its plane ends included): what
# search_control looks for in text that has no character beyond it.
_CONTROL_BMP = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")


def search_control(text: str) -> re.Match | None:
    """``CONTROL.search(text)``, the same first match. A class that holds characters beyond
    the BMP (the plane ends) is matched by a range scan per character, ten times slower than
    the BMP class's table: every description, argument and path of every job paid it, twice
    (validate, then render). Text with no character beyond the BMP (nearly all) cannot
    hold one of those, and is searched with the BMP class alone."""
    if text.isascii() or max(text) < "\U00010000":
        return _CONTROL_BMP.search(text)
    return CONTROL.search(text)


# Lone surrogates alone: validate.py names them in its message (the one pattern for both).
SURROGATE = re.compile(r"[\ud800-\udfff]")

_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}

# The prefixes systemd.service(5) defines for Exec*= lines; a reviewer can see which
# ones jobgen ever writes (only '-' and '+', from plan.py, never from user input).
EXEC_PREFIXES = frozenset("@-:+!|")


def specifiers(text: str) -> str:
    """Protect ``%`` in a setting that expands specifiers (Description=, paths, ...)."""
    _refuse_control(text)
    return text.replace("%", "%%")


def setting(section: str, directive: str, text: str, own_specifiers: bool = False) -> str:
    """A plain value for [section] directive=, escaped by that directive's own rule.

    ``own_specifiers``: jobgen wrote a specifier on purpose (``%i``, ``%n``) and it must
    stay one, which only a directive that expands specifiers can do.
    """
    _refuse_control(text)
    if not specifier_table.expands(section, directive):
        if own_specifiers:
            raise ValueError(f"{directive}= does not expand specifiers; cannot write {text!r} as one")
        return text
    return text if own_specifiers else text.replace("%", "%%")


def require_expansion(section: str, directive: str) -> None:
    # Exec*= and Environment= quoting below assumes the parser resolves '%' (it always has).
    if not specifier_table.expands(section, directive):
        raise ValueError(f"[{section}] {directive}= is not a setting that expands specifiers")


def _refuse_control(text: str) -> None:
    # validate.py refuses control characters with a positioned message; reaching here
    # with one is a bug in jobgen, and writing it would inject a directive.
    if search_control(text):
        raise ValueError(f"control character in unit file value {text!r}")


def _c_escape(ch: str) -> str:
    if SURROGATE.match(ch):
        # A YAML "\ud83d\ude00" is two lone surrogates, not the emoji: no bytes to write.
        raise ValueError(f"lone surrogate U+{ord(ch):04X} in a command argument")
    if ch in _C_ESCAPES:
        return _C_ESCAPES[ch]
    if CONTROL.match(ch):
        return "".join(f"\\x{b:02x}" for b in ch.encode("utf-8"))
    return ch


# What _c_escape changes: the backslash, the double quote and CONTROL. Everything else is
# copied as it is, so a long constant script (the reporter, the overrun check) is one regex
# pass instead of a Python call per character.
_ESCAPED = re.compile(r'[\\"' + CONTROL.pattern[1:-1] + "]")


def _quoted(text: str) -> str:
    return '"' + _ESCAPED.sub(lambda m: _c_escape(m.group()), text) + '"'


# The same words recur in every unit (the reporter and overrun scripts, flock's options):
# rendered once per process.
@functools.lru_cache(maxsize=8192)
def exec_word(word: str) -> str:
    """One argv element as systemd reads it back unchanged."""
    if "\x00" in word:
        raise ValueError("NUL byte in a command argument")  # argv cannot carry NUL
    word = word.replace("%", "%%").replace("$", "$$")
    if _BARE_WORD.fullmatch(word):
        return word
    return _quoted(word)


def exec_line(argv: list[str] | tuple[str, ...], prefix: str = "") -> str:
    """Render argv for an Exec*= setting; ``prefix`` is jobgen's own ('-', '+', '')."""
    if not argv:
        raise ValueError("empty command")
    if set(prefix) - EXEC_PREFIXES:
        raise ValueError(f"unknown Exec prefix {prefix!r}")
    if not argv[0].startswith("/"):
        raise ValueError(f"command must be an absolute path, got {argv[0]!r}")
    return prefix + " ".join(exec_word(w) for w in argv)


def env_assignment(name: str, value: str) -> str:
    """``Environment="NAME=value"``: quoted word, C escapes, specifiers; no $ expansion
    happens in Environment= (systemd.exec(5)), so '$' stays as is."""
    if "\x00" in value:
        raise ValueError("NUL byte in an environment value")
    return _quoted(f"{name}={value}".replace("%", "%%"))


# A path as one word of a whitespace-separated setting: a tmpfiles.d(5) line's path field, or
# one entry of ReadWritePaths= (systemd.exec(5)). Both read words the same way: a word may be
# double-quoted, and a backslash makes the next character literal ('\"', '\\'). A path that
# needs it is written as one quoted word, so a space stays part of the path and cannot start
# the next field (tmpfiles: mode/user/group/age/argument). systemd-tmpfiles 252 and 257 read
# '\x20' as 'x20': quotes and backslash-before-a-character are what is safe in both.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_@+=:,./-]+")


def path_word(path: str) -> str:
    """One path as one word of a space-separated list (specifiers are the caller's part)."""
    if search_control(path):
        raise ValueError(f"control character in a path {path!r}")  # refused by validate.py
    if _PLAIN_PATH.fullmatch(path):
        return path
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def tmpfiles_path(path: str) -> str:
    """The path field of a tmpfiles.d line. tmpfiles expands '%' specifiers and flock(1) does
    not, so validate.py refuses '%' in a lock path rather than have two readings of it."""
    if "%" in path:
        raise ValueError(f"'%' in a tmpfiles.d path {path!r}")
    return path_word(path)
