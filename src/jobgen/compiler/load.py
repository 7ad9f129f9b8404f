"""Stage 1: YAML text -> a tree of strings with positions.

The manifest is parsed by PyYAML's composer with *no* implicit type resolution
(``BaseLoader``): ``12:30``, ``yes``, ``0755`` and ``1e3`` stay the strings the user
wrote, and only the schema in validate.py decides what a value means. YAML 1.1's
coercions (sexagesimal numbers, ``no`` -> false, octal) are a classic source of
schedules and modes that silently mean something else.

Duplicate keys are an error (PyYAML keeps the last one silently); merge keys and
explicit tags are refused, so what a reviewer reads is what jobgen sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import yaml

from jobgen.compiler.diagnostics import ERROR, Diagnostic, ManifestError, Pos


@dataclass(frozen=True)
class Scalar:
    value: str
    pos: Pos
    # An unquoted empty or "~"/"null" scalar is YAML's null: ``key:`` with nothing after.
    is_null: bool = False


@dataclass(frozen=True)
class Seq:
    items: tuple["Node", ...]
    pos: Pos


@dataclass(frozen=True)
class Map:
    # Keys keep their own positions: messages about a key point at the key.
    items: tuple[tuple[Scalar, "Node"], ...]
    pos: Pos
    keys: dict[str, Scalar] = field(default_factory=dict, compare=False, hash=False)

    def get(self, key: str) -> "Node | None":
        for k, v in self.items:
            if k.value == key:
                return v
        return None


Node = Union[Scalar, Seq, Map]

_NULLS = {"", "~", "null", "Null", "NULL"}
_PLAIN_TAGS = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:map",
}


def _pos(file: str, mark: yaml.Mark) -> Pos:
    return Pos(file, mark.line + 1, mark.column + 1)


def load_text(text: str, file: str) -> Node:
    """Parse ``text``; raise ManifestError with every problem found."""
    try:
        root = yaml.compose(text, Loader=yaml.BaseLoader)
    except yaml.MarkedYAMLError as exc:
        raise ManifestError([_syntax_error(exc, file)]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow in a file
        raise ManifestError([_reader_error(exc, text, file)]) from None
    except yaml.YAMLError as exc:  # anything else PyYAML raises: one line, at the top
        raise ManifestError([Diagnostic(Pos(file, 1, 1), ERROR, "invalid YAML: " + " ".join(str(exc).split()))]) from None
    if root is None:
        raise ManifestError(
            [Diagnostic(Pos(file, 1, 1), ERROR, "the manifest is empty (it needs at least 'jobgen: 1' and a 'jobs:' section)")]
        )
    converter = _Converter(file)
    try:
        tree = converter.convert(root, frozenset(), ())
    except _TooBig:
        pass
    if converter.diags:
        raise ManifestError(converter.diags)
    return tree


def _syntax_error(exc: yaml.MarkedYAMLError, file: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    pos = _pos(file, mark) if mark else Pos(file, 1, 1)
    problem = exc.problem or exc.context or "invalid YAML"
    # PyYAML notices a problem where the text stops making sense, often a line after the
    # mistake; its context ("while parsing a flow sequence") says where that construct began.
    if exc.context and exc.problem and exc.context_mark and exc.context_mark.line != mark.line:
        problem += f" ({exc.context} that starts at line {exc.context_mark.line + 1})"
    return Diagnostic(pos, ERROR, f"invalid YAML: {problem}")


def _reader_error(exc: yaml.reader.ReaderError, text: str, file: str) -> Diagnostic:
    before = text[: exc.position]
    line = before.count("\n") + 1
    col = exc.position - (before.rfind("\n") + 1) + 1
    char = exc.character if isinstance(exc.character, str) else chr(exc.character)
    return Diagnostic(
        Pos(file, line, col),
        ERROR,
        f"invalid YAML: the character U+{ord(char):04X} is not allowed in a YAML file "
        "(write it as an escape such as \\x07 inside double quotes)",
    )


def load_file(path: str) -> Node:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ManifestError([Diagnostic(Pos(path, 1, 1), ERROR, f"cannot read manifest: {exc.strerror}")]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ManifestError([Diagnostic(Pos(path, line, 1), ERROR, "the manifest is not valid UTF-8")]) from None
    return load_text(text, path)


# Aliases share nodes, so a few lines can stand for an exponential tree ("billion
# laughs"): converting it would take minutes and gigabytes. No real manifest comes near.
MAX_NODES = 100_000


class _TooBig(Exception):
    pass


class _Converter:
    """yaml.Node -> Node, collecting every problem; counts nodes against MAX_NODES."""

    def __init__(self, file: str):
        self.file = file
        self.diags: list[Diagnostic] = []
        self.nodes = 0

    def error(self, pos: Pos, message: str) -> None:
        self.diags.append(Diagnostic(pos, ERROR, message))

    def convert(self, node: yaml.Node, active: frozenset[int], path: tuple[str, ...]) -> Node:
        pos = _pos(self.file, node.start_mark)
        self.nodes += 1
        if self.nodes > MAX_NODES:
            self.diags = [
                Diagnostic(pos, ERROR, f"the manifest expands to more than {MAX_NODES} YAML nodes through aliases; write it out plainly")
            ]
            raise _TooBig
        # BaseLoader gives untagged nodes their default tag; anything else was written by the user.
        if node.tag not in _PLAIN_TAGS:
            short = node.tag.removeprefix("tag:yaml.org,2002:")
            tag = "!!" + short if short != node.tag else node.tag
            self.error(pos, f"YAML tags are not supported here; remove '{tag}' (jobgen reads every value as written and checks it itself)")
        if isinstance(node, yaml.ScalarNode):
            is_null = node.style is None and node.value in _NULLS
            return Scalar(node.value, pos, is_null)
        if id(node) in active:  # an alias that contains itself
            self.error(pos, "recursive YAML alias")
            return Scalar("", pos, True)
        active = active | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            return Seq(tuple(self.convert(n, active, path) for n in node.value), pos)
        return self._mapping(node, pos, active, path)

    def _mapping(self, node: yaml.MappingNode, pos: Pos, active: frozenset[int], path: tuple[str, ...]) -> Map:
        items: list[tuple[Scalar, Node]] = []
        seen: dict[str, Scalar] = {}
        for knode, vnode in node.value:
            key = self.convert(knode, active, path)
            if not isinstance(key, Scalar):
                self.error(key.pos, "a mapping key must be a plain string")
                continue
            if key.value == "<<" and knode.style is None:
                self.error(key.pos, "YAML merge keys ('<<') are not supported; put keys shared by jobs under 'defaults:'")
                continue
            if key.value in seen:
                where = f" in '{'.'.join(path)}'" if path else ""
                self.error(
                    key.pos,
                    f"duplicate key '{key.value}'{where} (first defined at line {seen[key.value].pos.line}); "
                    "remove one (most YAML tools silently keep the last)",
                )
                continue
            seen[key.value] = key
            items.append((key, self.convert(vnode, active, path + (key.value,))))
        return Map(tuple(items), pos, seen)
