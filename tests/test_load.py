"""YAML 1.1 coercions do not happen: a value reaches the unit as the text the user wrote.

PyYAML's default loader would turn `12:30` into 750 (base-60), `yes` into True, `0755`
into 493 (octal), `3.10` into 3.1 and `~` into None. jobgen loads every scalar as text
(load.py) and lets the schema decide; these tests render real manifests and look at the
bytes of the units, so a loader change that brought coercion back would show here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobgen.compiler import load, pipeline

MANIFEST = """\
jobgen: 1
target: {systemd: ">=252"}
jobs:
  perms:
    description: 0x1F 1e3 .inf
    command: [/usr/bin/chmod, 0755, /srv/app/storage]
    schedule: 12:30
    user: yes
    group: no
    memory_max: 0755M
    persistent: on
    environment:
      FLAG: off
      MODE: 0644
      VERSION: 3.10
      WHEN: 2001-12-14
      BIG: 1_000
"""


def _render(text: str, tmp_path: Path) -> dict[str, str]:
    result = pipeline.build(str(tmp_path / "coerce.yaml"), text=text)
    return {name: data.decode("utf-8") for name, data in result.files.items()}


def _lines(unit: str) -> set[str]:
    return set(unit.splitlines())


@pytest.fixture
def units(tmp_path: Path) -> dict[str, str]:
    return _render(MANIFEST, tmp_path)


# (unit file, the line as the user wrote the value, what YAML 1.1 would have made of it)
AS_WRITTEN = [
    ("perms.timer", "OnCalendar=*-*-* 12:30:00", "OnCalendar=750"),  # base-60 12:30 == 750
    ("perms.service", "User=yes", "User=True"),
    ("perms.service", "Group=no", "Group=False"),
    ("perms.service", "MemoryMax=0755M", None),  # a bare 0755 is refused: bytes (validate.memory_size)
    ("perms.service", "Description=0x1F 1e3 .inf", None),
    ("perms.service", 'Environment="FLAG=off"', 'Environment="FLAG=False"'),
    ("perms.service", 'Environment="MODE=0644"', 'Environment="MODE=420"'),
    ("perms.service", 'Environment="VERSION=3.10"', 'Environment="VERSION=3.1"'),
    ("perms.service", 'Environment="WHEN=2001-12-14"', None),
    ("perms.service", 'Environment="BIG=1_000"', 'Environment="BIG=1000"'),
    ("perms.timer", "Persistent=yes", None),  # 'on' is a boolean key's true: converted by the schema
]


@pytest.mark.parametrize("unit,written,coerced", AS_WRITTEN, ids=[w for _, w, _ in AS_WRITTEN])
def test_value_reaches_the_unit_as_written(units: dict[str, str], unit: str, written: str, coerced: str | None) -> None:
    assert written in _lines(units[unit])
    if coerced:
        assert coerced not in units[unit]


def test_command_arguments_stay_text(units: dict[str, str]) -> None:
    start = next(line for line in units["perms.service"].splitlines() if line.startswith("ExecStart="))
    # The host lock wraps the job's argv; the argv itself ends the line unchanged.
    assert start.endswith(" /usr/bin/chmod 0755 /srv/app/storage")


def test_quoting_every_scalar_changes_no_byte(tmp_path: Path) -> None:
    """Unquoted and quoted spellings are the same manifest: proof that nothing was coerced."""
    quoted = MANIFEST
    for plain in ("0x1F 1e3 .inf", "0755", "12:30", "yes", "no", "on", "off", "0644", "3.10", "2001-12-14", "1_000"):
        quoted = quoted.replace(f": {plain}\n", f": '{plain}'\n").replace(f" {plain},", f" '{plain}',")
    assert quoted.count("'") >= 20  # every value above was quoted
    assert _render(quoted, tmp_path) == _render(MANIFEST, tmp_path)


@pytest.mark.parametrize(
    "text,value",
    [
        ("v: 12:30", "12:30"),
        ("v: 1:30:00", "1:30:00"),
        ("v: yes", "yes"),
        ("v: No", "No"),
        ("v: 0755", "0755"),
        ("v: 0o17", "0o17"),
        ("v: 1e3", "1e3"),
        ("v: .NaN", ".NaN"),
        ("v: 2001-12-14t21:59:43.10-05:00", "2001-12-14t21:59:43.10-05:00"),
    ],
)
def test_loader_keeps_the_text(text: str, value: str) -> None:
    tree = load.load_text(text + "\n", "t.yaml")
    node = tree.get("v")
    assert isinstance(node, load.Scalar) and node.value == value and not node.is_null


@pytest.mark.parametrize("text,is_null", [("v:", True), ("v: ~", True), ("v: null", True), ("v: ''", False), ('v: "~"', False)])
def test_only_unquoted_null_spellings_are_null(text: str, is_null: bool) -> None:
    node = load.load_text(text + "\n", "t.yaml").get("v")
    assert isinstance(node, load.Scalar) and node.is_null is is_null


def test_positions_point_at_keys_and_values() -> None:
    tree = load.load_text("jobs:\n  backup:\n    timeout: 5x\n", "m.yaml")
    job = tree.get("jobs").get("backup")
    key = job.keys["timeout"]
    assert (key.pos.line, key.pos.col) == (3, 5)
    assert (job.get("timeout").pos.line, job.get("timeout").pos.col) == (3, 14)


def test_get_answers_as_the_items_read_in_order_do() -> None:
    """get looks a key up in the index the reader makes (one step per job, not a scan of
    every job): the same answer as the first matching item, also for a mapping made
    without the index."""
    tree = load.load_text("b: 1\na: 2\nb: 3\nc: {}\n", "m.yaml")
    first = {}
    for key, value in tree.items:
        first.setdefault(key.value, value)
    plain = load.Map(tree.items, tree.pos)
    for name in ("a", "b", "c", "missing"):
        assert tree.get(name) is first.get(name) and plain.get(name) is first.get(name)
    assert tree.get("b").value == "1"


# --------------------------------------------------------------------------- read past, report later


def test_a_duplicate_key_is_kept_once_and_reported_by_validation() -> None:
    """load reads past a duplicate key (the first value is kept) and leaves the problem on
    the root, so validation reports it together with every other problem."""
    tree = load.load_text("jobgen: 1\njobs:\n  a:\n    schedule: daily\n    schedule: hourly\n", "m.yaml")
    assert tree.get("jobs").get("a").get("schedule").value == "daily"
    assert [str(d) for d in tree.problems] == [
        "m.yaml:5:5: error: duplicate key 'schedule' in 'jobs.a' (first defined at line 4); "
        "remove one (most YAML tools silently keep the last)"
    ]


@pytest.mark.parametrize("written,shown", [("!!str x", "!!str"), ("! x", "!"), ("!local x", "!local"), ("!!map {}", "!!map")])
def test_every_explicit_tag_is_refused_even_the_ones_baseloader_would_resolve_alike(written: str, shown: str) -> None:
    tree = load.load_text(f"v: {written}\n", "t.yaml")
    assert [d.message for d in tree.problems] == [
        f"YAML tags are not supported here; remove '{shown}' (jobgen reads every value as written and checks it itself)"
    ]


def test_plain_and_quoted_values_carry_no_tag_problem() -> None:
    assert load.load_text("a: x\nb: 'x'\nc: [x]\nd: {e: x}\n", "t.yaml").problems == ()


@pytest.mark.parametrize(
    "levels,col",
    [
        (40, 35),  # the composer stops at the 33rd level
        # libyaml scans up to 1024 characters ahead for a flow collection's possible key and
        # stops at its own limit (1000 levels) first: the same problem, where it saw it.
        (50_000, 1003),
    ],
)
def test_nesting_is_refused_before_pyyaml_recurses(levels: int, col: int) -> None:
    """PyYAML's composer recursed into RecursionError at a few hundred levels."""
    with pytest.raises(load.ManifestError) as caught:
        load.load_text("v: " + "[" * levels + "]" * levels + "\n", "t.yaml")
    assert [str(d) for d in caught.value.diagnostics] == [
        f"t.yaml:1:{col}: error: the manifest nests deeper than 32 levels (a manifest needs 5) (README: Limits)"
    ]


def test_block_nesting_is_refused_too() -> None:
    text = "".join(" " * i + f"k{i}:\n" for i in range(40)) + " " * 40 + "v\n"
    with pytest.raises(load.ManifestError) as caught:
        load.load_text(text, "t.yaml")
    assert [str(d) for d in caught.value.diagnostics] == [
        "t.yaml:32:32: error: the manifest nests deeper than 32 levels (a manifest needs 5) (README: Limits)"
    ]


# --------------------------------------------------------------------------- both parsers

_BOTH = Path(__file__).with_name("support") / "both_parsers.py"


def test_libyaml_and_pythons_parser_give_the_same_tree_and_problems() -> None:
    """load.py reads libyaml's events where PyYAML has libyaml, PyYAML's own parser's where
    it has not: every example and every manifest under tests/errors gives the same tree
    (values, positions) or the same first problems with either. The Python side runs in
    a process where importing yaml._yaml fails, as on a PyYAML built without libyaml."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    files = sorted(map(str, [*(root / "examples").glob("*.yaml"), *(root / "tests" / "errors").glob("*.yaml")]))
    runs = [subprocess.run([sys.executable, str(_BOTH), mode, *files], capture_output=True, text=True, timeout=300) for mode in ("c", "python")]
    for r in runs:
        assert r.returncode == 0, r.stderr
    c, python = (r.stdout.splitlines() for r in runs)
    assert len(c) == len(files)
    assert c[0].startswith("c ") and python[0].startswith("python ")
    differ = [(a, b) for a, b in zip(c, python) if a.split(" ", 1)[1] != b.split(" ", 1)[1]]
    # The only differences allowed: where libyaml refuses the text as YAML. PyYAML's own
    # parser words a syntax error differently ("worded a little differently", load.py) and
    # passes a "\ud83d" escape on as a lone surrogate, which validate then refuses.
    assert all(": error: invalid YAML: " in a for a, _ in differ), differ[:3]
    assert len(differ) <= 2, differ


# --------------------------------------------------------------------------- tabs

_TAB = "invalid YAML: a tab indents this line, and YAML allows only spaces for indentation; indent with spaces"


@pytest.mark.parametrize(
    ("text", "line", "col"),
    [
        ("jobgen: 1\njobs:\n\tbackup: {}\n", 3, 1),  # a tab alone
        ("jobgen: 1\njobs:\n  backup:\n  \tcommand: x\n", 4, 3),  # spaces, then a tab: placed at the tab
        ("jobgen: 1\njobs:\n  backup:\n    command:\n\t- /bin/true\n", 5, 1),  # a list item
    ],
)
def test_a_tab_in_indentation_is_named_at_the_tab(text: str, line: int, col: int) -> None:
    from jobgen.compiler.diagnostics import ManifestError

    with pytest.raises(ManifestError) as caught:
        load.load_text(text, "m.yaml")
    assert [str(d) for d in caught.value.diagnostics] == [f"m.yaml:{line}:{col}: error: {_TAB}"]
