"""Stage 1: YAML text -> a tree of strings with positions.

The manifest is parsed by PyYAML's composer with *no* implicit type resolution
(``BaseLoader``): ``12:30``, ``yes``, ``0755`` and ``1e3`` stay the strings the user
wrote, and only the schema in validate.py decides what a value means. YAML 1.1's
coercions (sexagesimal numbers, ``no`` -> false, octal) are a classic source of
schedules and modes that silently mean something else.

Duplicate keys are an error (PyYAML keeps the last one silently); merge keys and
explicit tags (``!!str`` too) are refused, so what a reviewer reads is what jobgen sees.
These problems do not stop the reading: the first of two keys is kept, a tag or a merge
key is ignored, and the problems ride on the root mapping (``Map.problems``) so that
validate.py reports them together with its own, every problem in one run. What cannot
be read past (a syntax error, input beyond the limits in limits.py) raises at once.

Every limit is checked before the work it bounds: the file's size before it is parsed,
nesting depth and node count while PyYAML composes (its composer recurses once per
level), value sizes and alias expansion while the tree is converted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import yaml
from yaml.composer import Composer
from yaml.resolver import BaseResolver

from jobgen.compiler import limits
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
    # On the root only: problems load found and read past (see the module docstring).
    problems: tuple[Diagnostic, ...] = field(default=(), compare=False, hash=False)

    def get(self, key: str) -> "Node | None":
        for k, v in self.items:
            if k.value == key:
                return v
        return None


Node = Union[Scalar, Seq, Map]

_NULLS = {"", "~", "null", "Null", "NULL"}
# How a tag is shown: the form the user most likely wrote.
_TAG_PREFIX = "tag:yaml.org,2002:"


def _pos(file: str, mark: yaml.Mark) -> Pos:
    return Pos(file, mark.line + 1, mark.column + 1)


def load_text(text: str, file: str) -> Node:
    """Parse ``text``; raise ManifestError for what cannot be read past.

    The root mapping carries the other problems in ``problems`` (validate reports them)."""
    if len(text) > limits.MANIFEST_BYTES or len(text.encode("utf-8", "surrogatepass")) > limits.MANIFEST_BYTES:
        raise ManifestError([_too_large(file)])
    loader = None
    try:
        loader = _Loader(text, file)  # the reader checks every character here
        root = loader.get_single_node()
    except _Limit as exc:
        raise ManifestError([exc.diagnostic]) from None
    except yaml.MarkedYAMLError as exc:
        raise ManifestError([_syntax_error(exc, file)]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow in a file
        raise ManifestError([_bad_character(text, exc.position, file)]) from None
    except UnicodeEncodeError as exc:  # a lone surrogate in text given as str (a file cannot hold one)
        raise ManifestError([_bad_character(text, exc.start, file)]) from None
    except yaml.YAMLError as exc:  # anything else PyYAML raises: one line, at the top
        raise ManifestError([Diagnostic(Pos(file, 1, 1), ERROR, "invalid YAML: " + " ".join(str(exc).split()))]) from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        raise ManifestError(
            [Diagnostic(Pos(file, 1, 1), ERROR, "the manifest is empty (it needs at least 'jobgen: 1' and a 'jobs:' section)")]
        )
    converter = _Converter(file, loader.tagged if loader else {})
    try:
        tree = converter.convert(root, frozenset(), (), 1)
    except _Limit as exc:
        raise ManifestError([exc.diagnostic]) from None
    if converter.diags and not isinstance(tree, Map):
        raise ManifestError(converter.diags)
    if isinstance(tree, Map) and converter.diags:
        tree = Map(tree.items, tree.pos, tree.keys, tuple(converter.diags))
    return tree


_DEPTH_PROBLEM = f"the manifest nests deeper than {limits.DEPTH} levels (a manifest needs 5) (README: Limits)"
# libyaml's terse problems, said the way jobgen says them.
_LIBYAML_PROBLEMS = {
    # libyaml looks ahead while scanning a flow collection and stops at its own limit
    # (1000 levels) before the composer reaches jobgen's: the same problem.
    "exceeded maximum nesting depth": _DEPTH_PROBLEM,
    # YAML "\ud83d\ude00" is two lone UTF-16 halves, not the emoji: no UTF-8 form exists.
    "found invalid Unicode character escape code": "invalid YAML: this escape is half of a UTF-16 surrogate pair "
    "(or no character at all), which has no UTF-8 form; write the character itself (or \\U0001F600 style in double quotes)",
}


def _too_large(file: str) -> Diagnostic:
    return Diagnostic(
        Pos(file, 1, 1),
        ERROR,
        f"the manifest is larger than {limits.MANIFEST_BYTES // 2**20} MiB, jobgen's limit for one manifest; "
        "split it into several manifests (README: Limits)",
    )


def _syntax_error(exc: yaml.MarkedYAMLError, file: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    pos = _pos(file, mark) if mark else Pos(file, 1, 1)
    problem = exc.problem or exc.context or "invalid YAML"
    if problem in _LIBYAML_PROBLEMS:
        return Diagnostic(pos, ERROR, _LIBYAML_PROBLEMS[problem])
    # PyYAML notices a problem where the text stops making sense, often a line after the
    # mistake; its context ("while parsing a flow sequence") says where that construct began.
    if exc.context and exc.problem and exc.context_mark and exc.context_mark.line != mark.line:
        problem += f" ({exc.context} that starts at line {exc.context_mark.line + 1})"
    return Diagnostic(pos, ERROR, f"invalid YAML: {problem}")


def _bad_character(text: str, index: int, file: str) -> Diagnostic:
    before = text[:index]
    line = before.count("\n") + 1
    col = index - (before.rfind("\n") + 1) + 1
    char = text[index]
    return Diagnostic(
        Pos(file, line, col),
        ERROR,
        f"invalid YAML: the character U+{ord(char):04X} is not allowed in a YAML file "
        "(write it as an escape such as \\x07 inside double quotes)",
    )


def read_file(path: str) -> bytes:
    try:
        return limits.read_manifest(path)
    except OSError as exc:
        raise ManifestError([Diagnostic(Pos(path, 1, 1), ERROR, f"cannot read manifest: {exc.strerror}")]) from None


def load_file(path: str) -> Node:
    return load_bytes(read_file(path), path)


def load_bytes(data: bytes, path: str) -> Node:
    if len(data) > limits.MANIFEST_BYTES:
        raise ManifestError([_too_large(path)])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ManifestError([Diagnostic(Pos(path, line, 1), ERROR, "the manifest is not valid UTF-8")]) from None
    return load_text(text, path)


class _Limit(Exception):
    """Input beyond a limit: reading stops here with one positioned problem."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


try:  # libyaml's parser, in C: about ten times faster than PyYAML's own (1 MiB in ~0.3 s)
    from yaml._yaml import CParser as _Parser
except ImportError:  # PyYAML built without libyaml: the same events, slower, worded a little differently
    from yaml.parser import Parser as _Parser  # type: ignore[assignment]
    from yaml.reader import Reader as _Reader
    from yaml.scanner import Scanner as _Scanner

    class _Parser(_Reader, _Scanner, _Parser):  # type: ignore[no-redef]
        def __init__(self, text: str):
            _Reader.__init__(self, text)
            _Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


class _Loader(Composer, _Parser, BaseResolver):
    """BaseLoader's parts (no implicit types: BaseResolver), with PyYAML's composer in
    Python on top of the parser's events, so that composing stops at the nesting and node
    limits before its recursion or memory can run away, and remembers which nodes carried
    an explicit tag: BaseLoader gives ``!!str x`` the same tag as ``x``."""

    def __init__(self, text: str, file: str):
        _Parser.__init__(self, text)
        Composer.__init__(self)
        BaseResolver.__init__(self)
        self.file = file
        self.depth = 0
        self.nodes = 0
        self.tagged: dict[int, str] = {}  # id(yaml node) -> its tag as written

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        event = self.peek_event()
        self.depth += 1
        self.nodes += 1
        if self.depth > limits.DEPTH:
            raise _Limit(Diagnostic(_pos(self.file, event.start_mark), ERROR, _DEPTH_PROBLEM))
        if self.nodes > limits.NODES:
            raise _Limit(self._problem(event, f"the manifest has more than {limits.NODES:,} YAML nodes; split it into several manifests"))
        try:
            node = super().compose_node(parent, index)
        finally:
            self.depth -= 1
        if event.tag is not None:  # '!!str', '!foo' and the bare '!' alike
            self.tagged[id(node)] = event.tag
        return node

    def _problem(self, event: yaml.Event, message: str) -> Diagnostic:
        return Diagnostic(_pos(self.file, event.start_mark), ERROR, f"{message} (README: Limits)")


class _Converter:
    """yaml.Node -> Node, collecting every problem; counts what aliases expand to."""

    def __init__(self, file: str, tagged: dict[int, str]):
        self.file = file
        self.tagged = tagged
        self.diags: list[Diagnostic] = []
        self.nodes = 0
        self.value_bytes = 0

    def error(self, pos: Pos, message: str) -> None:
        self.diags.append(Diagnostic(pos, ERROR, message))

    def convert(self, node: yaml.Node, active: frozenset[int], path: tuple[str, ...], depth: int) -> Node:
        pos = _pos(self.file, node.start_mark)
        self._count(node, pos, depth)
        if (tag := self.tagged.get(id(node))) is not None:
            shown = "!!" + tag.removeprefix(_TAG_PREFIX) if tag.startswith(_TAG_PREFIX) else tag
            self.error(pos, f"YAML tags are not supported here; remove '{shown}' (jobgen reads every value as written and checks it itself)")
        if isinstance(node, yaml.ScalarNode):
            is_null = not node.style and node.value in _NULLS  # plain: None (Python parser) or '' (libyaml)
            return Scalar(node.value, pos, is_null)
        if id(node) in active:  # an alias that contains itself
            self.error(pos, "recursive YAML alias")
            return Scalar("", pos, True)
        active = active | {id(node)}
        if isinstance(node, yaml.SequenceNode):
            return Seq(tuple(self.convert(n, active, path, depth + 1) for n in node.value), pos)
        return self._mapping(node, pos, active, path, depth)

    def _count(self, node: yaml.Node, pos: Pos, depth: int) -> None:
        """Aliases share nodes, so a few lines can stand for an exponential tree or an
        unbounded depth: the limits are checked again on what they expand to."""
        self.nodes += 1
        if self.nodes > limits.NODES:
            raise _Limit(self._limit(pos, f"the manifest expands to more than {limits.NODES:,} YAML nodes through aliases; write it out plainly"))
        if depth > limits.DEPTH:
            raise _Limit(self._limit(pos, f"the manifest nests deeper than {limits.DEPTH} levels through aliases; write it out plainly"))
        if isinstance(node, yaml.ScalarNode):
            size = len(node.value.encode("utf-8", "surrogatepass"))
            if size > limits.VALUE_BYTES:
                raise _Limit(self._limit(pos, f"a value of {size:,} bytes; one value may have at most {limits.VALUE_BYTES:,}"))
            self.value_bytes += size
            if self.value_bytes > limits.TOTAL_VALUE_BYTES:
                raise _Limit(self._limit(pos, f"the manifest's values add up to more than {limits.TOTAL_VALUE_BYTES // (1024 * 1024)} MiB through aliases; write it out plainly"))

    def _limit(self, pos: Pos, message: str) -> Diagnostic:
        return Diagnostic(pos, ERROR, f"{message} (README: Limits)")

    def _mapping(self, node: yaml.MappingNode, pos: Pos, active: frozenset[int], path: tuple[str, ...], depth: int) -> Map:
        items: list[tuple[Scalar, Node]] = []
        seen: dict[str, Scalar] = {}
        for knode, vnode in node.value:
            key = self.convert(knode, active, path, depth + 1)
            if not isinstance(key, Scalar):
                self.error(key.pos, "a mapping key must be a plain string")
                continue
            if key.value == "<<" and not knode.style:
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
            items.append((key, self.convert(vnode, active, path + (key.value,), depth + 1)))
        return Map(tuple(items), pos, seen)
