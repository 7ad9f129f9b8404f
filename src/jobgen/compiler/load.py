"""Stage 1: YAML text -> a tree of strings with positions.

The manifest is read from the events of libyaml's parser in C (PyYAML's own parser in
Python where PyYAML was built without libyaml: the same events, slower), straight into
the tree below, in one pass and with *no* implicit type resolution: ``12:30``, ``yes``, ``0755`` and ``1e3`` stay the strings the user
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
nesting depth and node count as each node is read (the reading recurses once per level),
value sizes and alias expansion as the tree is counted with every alias expanded
(``_Builder``).
"""

from __future__ import annotations

from typing import NamedTuple, Union

import yaml
from yaml.composer import ComposerError

from jobgen.compiler import limits
from jobgen.compiler.diagnostics import ERROR, Diagnostic, ManifestError, Pos


# Scalar and Seq: named tuples (immutable, compared and hashed field by field), made for
# every node read, and cheaper to define and to make than frozen dataclasses (diagnostics.py).
class Scalar(NamedTuple):
    value: str
    pos: Pos
    # An unquoted empty or "~"/"null" scalar is YAML's null: ``key:`` with nothing after.
    is_null: bool = False


class Seq(NamedTuple):
    items: tuple["Node", ...]
    pos: Pos


class Map:
    """A mapping node. A plain class, not a dataclass (whose generated methods are
    executed at every start): equal and hashed by its items and position, as before; the
    indexes beside them are left out of both."""

    __slots__ = ("items", "pos", "keys", "problems", "values")

    def __init__(self, items: tuple[tuple[Scalar, "Node"], ...], pos: Pos, keys: dict[str, Scalar] | None = None,
                 problems: tuple[Diagnostic, ...] = (), values: dict[str, "Node"] | None = None):
        # Keys keep their own positions: messages about a key point at the key.
        self.items, self.pos = items, pos
        self.keys = {} if keys is None else keys
        # On the root only: problems load found and read past (see the module docstring).
        self.problems = problems
        # Key -> value, made with ``items`` by the reader: ``get`` on the jobs of a manifest
        # is asked once per job, and a scan of ``items`` made 1,000 jobs cost 500,000 steps.
        self.values = values

    def __eq__(self, other: object) -> bool:
        return (self.items, self.pos) == (other.items, other.pos) if isinstance(other, Map) else NotImplemented

    def __hash__(self) -> int:
        return hash((self.items, self.pos))

    def __repr__(self) -> str:
        return f"Map(items={self.items!r}, pos={self.pos!r})"

    def get(self, key: str) -> "Node | None":
        if self.values is not None:
            return self.values.get(key)
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
    parser = None
    try:
        parser = _Parser(text)  # the reader checks every character here
        builder = _Builder(parser, file)
        tree = builder.document()
    except _Limit as exc:
        raise ManifestError([exc.diagnostic]) from None
    except yaml.MarkedYAMLError as exc:
        raise ManifestError([_syntax_error(exc, file, text)]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow in a file
        raise ManifestError([_bad_character(text, exc.position, file)]) from None
    except UnicodeEncodeError as exc:  # a lone surrogate in text given as str (a file cannot hold one)
        raise ManifestError([_bad_character(text, exc.start, file)]) from None
    except yaml.YAMLError as exc:  # anything else PyYAML raises: one line, at the top
        raise ManifestError([Diagnostic(Pos(file, 1, 1), ERROR, "invalid YAML: " + " ".join(str(exc).split()))]) from None
    finally:
        if parser is not None and hasattr(parser, "dispose"):
            parser.dispose()
    if tree is None:
        raise ManifestError(
            [Diagnostic(Pos(file, 1, 1), ERROR, "the manifest is empty (it needs at least 'jobgen: 1' and a 'jobs:' section)")]
        )
    if builder.diags and not isinstance(tree, Map):
        raise ManifestError(builder.diags)
    if isinstance(tree, Map) and builder.diags:
        tree = Map(tree.items, tree.pos, tree.keys, tuple(builder.diags), tree.values)
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


# What the scanner says when a tab stands where a token would start: libyaml's words, then
# PyYAML's own parser's.
_CANNOT_START = ("found character that cannot start any token", "found character '\\t' that cannot start any token")


def _tab_problem(text: str, index: int) -> str | None:
    """Why a tab at ``index`` is refused, said as YAML's rule, or None if it is no tab.

    YAML 1.1 and 1.2 both: indentation is spaces only ("tabs must not be used in
    indentation"); a scanner meeting one there can only say no token starts with it."""
    if not 0 <= index < len(text) or text[index] != "\t":
        return None
    line_start = text.rfind("\n", 0, index) + 1
    if text[line_start:index].strip(" \t") == "":
        return "invalid YAML: a tab indents this line, and YAML allows only spaces for indentation; indent with spaces"
    # PyYAML's own parser (without libyaml) also refuses a tab after 'key:'.
    return "invalid YAML: this YAML reader (PyYAML without libyaml) does not accept a tab here; use a space"


def _syntax_error(exc: yaml.MarkedYAMLError, file: str, text: str) -> Diagnostic:
    mark = exc.problem_mark or exc.context_mark
    pos = _pos(file, mark) if mark else Pos(file, 1, 1)
    problem = exc.problem or exc.context or "invalid YAML"
    if problem in _LIBYAML_PROBLEMS:
        return Diagnostic(pos, ERROR, _LIBYAML_PROBLEMS[problem])
    if problem in _CANNOT_START and mark is exc.problem_mark and (tab := _tab_problem(text, mark.index)):
        return Diagnostic(pos, ERROR, tab)
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


class _Builder:
    """Parser events -> Node in one pass, collecting every problem.

    Two kinds of check, in the order PyYAML's composer and a converter after it would make
    them (so the same manifest gets the same first problem): what reading must stop at at
    once (the nesting depth and the number of nodes written, before the recursion or the
    memory they bound; an undefined alias, a duplicate anchor, a second document), and
    what is counted over the tree as aliases expand it (nodes, depth, value sizes). The
    first limit the expanded tree crosses is kept and raised once the whole document has
    been read, at the place of the node that crossed it; after it nothing more is expanded,
    so an alias bomb costs at most NODES steps.
    """

    def __init__(self, parser, file: str):
        self.parser, self.file = parser, file
        self.depth = 0  # nesting of the node being read (the root is 1)
        self.written = 0  # nodes as written (an alias is not one)
        self.expanded = 0  # nodes with every alias expanded
        self.value_bytes = 0
        self.pending: Diagnostic | None = None  # the first limit the expanded tree crossed
        self.quiet = 0  # > 0 inside a value that is dropped (of a duplicate key...): read, not reported
        self.diags: list[Diagnostic] = []
        self.anchors: dict[str, "Node | None"] = {}  # None while its node is being read
        self.anchor_marks: dict[str, yaml.Mark] = {}

    def document(self) -> "Node | None":
        get, check = self.parser.get_event, self.parser.check_event
        get()  # StreamStartEvent
        if check(yaml.StreamEndEvent):
            return None
        get()  # DocumentStartEvent
        first = get()
        root = self.node(first, 1, ())
        get()  # DocumentEndEvent
        if not check(yaml.StreamEndEvent):
            raise ComposerError("expected a single document in the stream", first.start_mark, "but found another document", get().start_mark)
        if self.pending is not None:
            raise _Limit(self.pending)
        return root

    def node(self, event: yaml.Event, depth: int, path: tuple[str, ...]) -> "Node":
        kind = type(event)
        if kind is yaml.AliasEvent:
            return self.alias(event, depth)
        self.written += 1
        if depth > limits.DEPTH:
            raise _Limit(Diagnostic(_pos(self.file, event.start_mark), ERROR, _DEPTH_PROBLEM))
        if self.written > limits.NODES:
            raise _Limit(_limit(_pos(self.file, event.start_mark), f"the manifest has more than {limits.NODES:,} YAML nodes; split it into several manifests"))
        mark = event.start_mark
        pos = _pos(self.file, mark)
        anchor = event.anchor
        if anchor is not None:
            if anchor in self.anchor_marks:
                raise ComposerError(f"found duplicate anchor {anchor!r}; first occurrence", self.anchor_marks[anchor], "second occurrence", mark)
            self.anchor_marks[anchor] = mark
            self.anchors[anchor] = None
        if kind is yaml.ScalarEvent:
            value = event.value
            self.count(pos, depth, value)
            node: Node = Scalar(value, pos, not event.style and value in _NULLS)  # plain: style None (Python parser) or '' (libyaml)
        else:
            self.count(pos, depth, None)
            node = self.sequence(pos, depth, path) if kind is yaml.SequenceStartEvent else self.mapping(pos, depth, path)
        if event.tag is not None and not self.quiet:  # '!!str', '!foo' and the bare '!' alike
            tag = event.tag
            shown = "!!" + tag.removeprefix(_TAG_PREFIX) if tag.startswith(_TAG_PREFIX) else tag
            self.diags.append(Diagnostic(pos, ERROR, f"YAML tags are not supported here; remove '{shown}' (jobgen reads every value as written and checks it itself)"))
        if anchor is not None:
            self.anchors[anchor] = node
        return node

    def sequence(self, pos: Pos, depth: int, path: tuple[str, ...]) -> Seq:
        get, items = self.parser.get_event, []
        while type(event := get()) is not yaml.SequenceEndEvent:
            items.append(self.node(event, depth + 1, path))
        return Seq(tuple(items), pos)

    def mapping(self, pos: Pos, depth: int, path: tuple[str, ...]) -> Map:
        get = self.parser.get_event
        items: list[tuple[Scalar, Node]] = []
        seen: dict[str, Scalar] = {}
        values: dict[str, Node] = {}
        while type(event := get()) is not yaml.MappingEndEvent:
            key = self.node(event, depth + 1, path)
            problem = None
            if not isinstance(key, Scalar):
                problem = Diagnostic(key.pos, ERROR, "a mapping key must be a plain string")
            elif key.value == "<<" and type(event) is yaml.ScalarEvent and not event.style:
                problem = Diagnostic(key.pos, ERROR, "YAML merge keys ('<<') are not supported; put keys shared by jobs under 'defaults:'")
            elif key.value in seen:
                where = f" in '{'.'.join(path)}'" if path else ""
                problem = Diagnostic(
                    key.pos,
                    ERROR,
                    f"duplicate key '{key.value}'{where} (first defined at line {seen[key.value].pos.line}); "
                    "remove one (most YAML tools silently keep the last)",
                )
            if problem is None:
                seen[key.value] = key
                value = self.node(get(), depth + 1, path + (key.value,))
                items.append((key, value))
                values[key.value] = value
                continue
            if not self.quiet:
                self.diags.append(problem)
            self.quiet += 1  # the value is read (its anchors may be used later), not judged
            try:
                self.node(get(), depth + 1, path)
            finally:
                self.quiet -= 1
        return Map(tuple(items), pos, seen, values=values)

    def alias(self, event: yaml.Event, depth: int) -> "Node":
        anchor = event.anchor
        if anchor not in self.anchor_marks:
            raise ComposerError(None, None, f"found undefined alias {anchor!r}", event.start_mark)
        node = self.anchors[anchor]
        if node is None:  # an alias inside its own anchor's node
            pos = _pos(self.file, self.anchor_marks[anchor])
            self.count(pos, depth, None)
            if not self.quiet:
                self.diags.append(Diagnostic(pos, ERROR, "recursive YAML alias"))
            return Scalar("", pos, True)
        self.expand(node, depth)
        return node

    def expand(self, node: "Node", depth: int) -> None:
        """Count what an alias stands for, node by node, as if it were written out."""
        if self.pending is not None or self.quiet:
            return
        if isinstance(node, Scalar):
            self.count(node.pos, depth, node.value)
            return
        self.count(node.pos, depth, None)
        children = node.items if isinstance(node, Seq) else [n for pair in node.items for n in pair]
        for child in children:
            self.expand(child, depth + 1)

    def count(self, pos: Pos, depth: int, value: str | None) -> None:
        """Aliases share nodes, so a few lines can stand for an exponential tree or an
        unbounded depth: the limits are checked again on what they expand to."""
        if self.pending is not None or self.quiet:
            return
        self.expanded += 1
        if self.expanded > limits.NODES:
            self.pending = _limit(pos, f"the manifest expands to more than {limits.NODES:,} YAML nodes through aliases; write it out plainly")
        elif depth > limits.DEPTH:
            self.pending = _limit(pos, f"the manifest nests deeper than {limits.DEPTH} levels through aliases; write it out plainly")
        elif value is not None:
            size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
            self.value_bytes += size
            if size > limits.VALUE_BYTES:
                self.pending = _limit(pos, f"a value of {size:,} bytes; one value may have at most {limits.VALUE_BYTES:,}")
            elif self.value_bytes > limits.TOTAL_VALUE_BYTES:
                self.pending = _limit(pos, f"the manifest's values add up to more than {limits.TOTAL_VALUE_BYTES // (1024 * 1024)} MiB through aliases; write it out plainly")


def _limit(pos: Pos, message: str) -> Diagnostic:
    return Diagnostic(pos, ERROR, f"{message} (README: Limits)")
