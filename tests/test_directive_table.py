"""The generated directive table: known facts, shape, and the generator itself.

Facts below were checked by hand against systemd's parser tables; the man
pages' "Added in version" notes disagree for several of them (StateDirectory=
is annotated 211, ConditionMemory= 244, AssertCPUFeature= 218).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.compiler import directive_table as table
from jobgen.compiler.target import VALUE_GATES
from support import sdanalyze

REPO = Path(__file__).resolve().parents[1]


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_directives", REPO / "tools" / "gen_directives.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_directives"] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()
ROWS = {(d.section, d.name): d for d in table.DIRECTIVES}

# (section, directive, first release whose parser accepts it)
FIRST_RELEASES = [
    ("Timer", "DeferReactivation", 257),
    ("Timer", "RandomizedOffsetSec", 258),
    ("Timer", "FixedRandomDelay", 247),
    ("Timer", "OnClockChange", 242),
    ("Timer", "RandomizedDelaySec", 230),   # 229 upstream: older than the table
    ("Unit", "OnSuccess", 249),
    ("Unit", "ConditionMemory", 247),
    ("Unit", "AssertCPUFeature", 251),
    ("Unit", "StartLimitIntervalSec", 230),
    ("Service", "ExecCondition", 243),
    ("Service", "OOMPolicy", 243),
    ("Service", "LoadCredential", 247),
    ("Service", "ExitType", 250),
    ("Service", "RestartSteps", 254),
    ("Service", "RestartMaxDelaySec", 254),
    ("Service", "StateDirectory", 235),
    ("Service", "ProtectHostname", 242),
    ("Service", "ProtectProc", 247),
    ("Service", "CPUWeight", 232),
    ("Service", "MemoryMax", 231),
    ("Service", "NoNewPrivileges", 230),
    ("Install", "WantedBy", 230),
    ("Install", "RequiredBy", 230),
    ("Install", "Alias", 230),
    ("Install", "Also", 230),
    ("Install", "DefaultInstance", 230),
    ("Install", "UpheldBy", 254),
]


@pytest.mark.parametrize("section,directive,since", FIRST_RELEASES)
def test_first_release(section, directive, since):
    assert ROWS[(section, directive)].since == since


# (section, directive, deprecated, removed)
LIFECYCLE = [
    ("Service", "CPUShares", 258, None),
    ("Service", "MemoryLimit", 258, None),
    ("Service", "BlockIOWeight", 258, None),
    ("Service", "StartupCPUShares", 258, None),
    ("Service", "Capabilities", 230, None),      # warn-only before the table starts
    ("Unit", "RequiresOverridable", 230, None),
    ("Unit", "ConditionNull", None, 247),
    ("Service", "MemoryMax", None, None),
    ("Timer", "DeferReactivation", None, None),
]


@pytest.mark.parametrize("section,directive,deprecated,removed", LIFECYCLE)
def test_deprecation_and_removal(section, directive, deprecated, removed):
    row = ROWS[(section, directive)]
    assert (row.deprecated, row.removed) == (deprecated, removed)


def test_exec_context_keys_reach_every_unit_type_that_runs_processes():
    # EXEC_CONTEXT_CONFIG_ITEMS expands into these four sections, KILL_ into
    # them plus Scope, CGROUP_ into them plus Slice and Scope.
    assert {s for (s, n) in ROWS if n == "ExecSearchPath"} == {"Service", "Socket", "Mount", "Swap"}
    assert {s for (s, n) in ROWS if n == "KillMode"} == {"Service", "Socket", "Mount", "Swap", "Scope"}
    assert {s for (s, n) in ROWS if n == "MemoryMax"} == {"Service", "Socket", "Mount", "Swap", "Scope", "Slice"}


def test_build_option_fallbacks_are_not_read_as_deprecations():
    # The table lists SystemCallFilter= twice, the second time as
    # config_parse_warn_compat DISABLED_CONFIGURATION for builds without seccomp.
    assert ROWS[("Service", "SystemCallFilter")].deprecated is None
    assert ROWS[("Service", "PAMName")].deprecated is None


def test_rows_are_sorted_unique_and_consistent():
    keys = [(d.section, d.name) for d in table.DIRECTIVES]
    assert keys == sorted(set(keys))
    for d in table.DIRECTIVES:
        assert table.FIRST_RELEASE <= d.since <= table.LAST_RELEASE, d
        for later in (d.deprecated, d.removed):
            assert later is None or d.since <= later <= table.LAST_RELEASE, d


def test_source_names_the_parser_file_of_that_release():
    assert ROWS[("Timer", "DeferReactivation")].source == "src/core/load-fragment-gperf.gperf.in@v257"
    assert ROWS[("Service", "ExecCondition")].source == "src/core/load-fragment-gperf.gperf.m4@v243"


def test_header_says_how_the_table_was_made():
    doc = table.__doc__
    assert "tools/gen_directives.py" in doc
    assert f"v{table.FIRST_RELEASE} .. v{table.LAST_RELEASE}" in doc
    assert table.SOURCE_REPOSITORY in doc


@pytest.mark.parametrize("gate", VALUE_GATES, ids=lambda g: f"{g.directive}={g.value}")
def test_value_gates_match_the_measured_values(gate):
    """Every hand-written gate in target.VALUE_GATES agrees with the release
    the generator's probe measured in systemd's sources."""
    measured = {(v.section, v.directive, v.value): v for v in table.VALUES}
    row = measured[(gate.section, gate.directive, gate.value)]
    assert gate.since == row.since
    assert gate.citation.split()[0] == row.source


# --- the generator's reading of the two table formats -------------------

M4_SAMPLE = """\
%%
m4_dnl Define the context options only once
m4_define(`EXEC_CONTEXT_CONFIG_ITEMS',
`$1.WorkingDirectory,            config_parse_working_directory,     0,                             offsetof($1, exec_context)
m4_ifdef(`HAVE_PAM',
`$1.PAMName,                     config_parse_unit_string_printf,    0,                             offsetof($1, exec_context.pam_name)',
`$1.PAMName,                     config_parse_warn_compat,           DISABLED_CONFIGURATION,        0')
$1.Capabilities,                 config_parse_warn_compat,           DISABLED_LEGACY,               offsetof($1, exec_context)'
)m4_dnl
Unit.Description,                config_parse_unit_string_printf,    0,                             offsetof(Unit, description)
Unit.RequiresOverridable,        config_parse_obsolete_unit_deps,    UNIT_REQUIRES,                 0
EXEC_CONTEXT_CONFIG_ITEMS(Service)m4_dnl
EXEC_CONTEXT_CONFIG_ITEMS(Socket)m4_dnl
Timer.OnCalendar,                config_parse_timer,                 0,                             0
"""

JINJA_SAMPLE = """\
{# SPDX-License-Identifier: LGPL-2.1-or-later #}
{%- macro KILL_CONTEXT_CONFIG_ITEMS(type) -%}
{{type}}.KillMode,                            config_parse_kill_mode,                             0,                                  offsetof({{type}}, kill_context.kill_mode)
{% if HAVE_SECCOMP %}
{{type}}.SystemCallFilter,                    config_parse_syscall_filter,                        0,                                  offsetof({{type}}, exec_context)
{% else %}
{{type}}.SystemCallFilter,                    config_parse_warn_compat,                           DISABLED_CONFIGURATION,             0
{% endif %}
{%- endmacro -%}
%{
#include <stddef.h>
%}
struct ConfigPerfItem;
%%
{{ KILL_CONTEXT_CONFIG_ITEMS('Scope') }}
Timer.DeferReactivation,                      config_parse_bool,                                  0,                                  offsetof(Timer, defer_reactivation)
Install.UpheldBy,                             NULL,                                               0,                                  0
"""


def _read(sample):
    return {key: entry.warn_only for key, entry in gen.parse_gperf(sample, "sample").items()}


@pytest.mark.parametrize("sample,expected", [
    (M4_SAMPLE, {
        ("Unit", "Description"): False,
        ("Unit", "RequiresOverridable"): True,
        ("Service", "WorkingDirectory"): False,
        ("Service", "PAMName"): False,
        ("Service", "Capabilities"): True,
        ("Socket", "WorkingDirectory"): False,
        ("Socket", "PAMName"): False,
        ("Socket", "Capabilities"): True,
        ("Timer", "OnCalendar"): False,
    }),
    (JINJA_SAMPLE, {
        ("Scope", "KillMode"): False,
        ("Scope", "SystemCallFilter"): False,
        ("Timer", "DeferReactivation"): False,
        ("Install", "UpheldBy"): False,
    }),
], ids=["m4", "jinja"])
def test_generator_expands_macros_and_takes_the_enabled_branch(sample, expected):
    assert _read(sample) == expected


def test_generator_refuses_a_line_it_cannot_read():
    with pytest.raises(SystemExit, match="sample:2: cannot read line"):
        gen.parse_gperf("%%\nUnit.Description config_parse_string 0 0\n", "sample")


def test_history_records_since_deprecated_removed():
    present = {
        250: {("Unit", "A"): False, ("Unit", "B"): False},
        251: {("Unit", "A"): False, ("Unit", "B"): True, ("Unit", "C"): False},
        252: {("Unit", "B"): True, ("Unit", "C"): False},
    }
    rows = {(r.section, r.name): (r.since, r.deprecated, r.removed)
            for r in gen.history([250, 251, 252], present)}
    assert rows == {
        ("Unit", "A"): (250, None, 252),
        ("Unit", "B"): (250, 251, None),
        ("Unit", "C"): (251, None, None),
    }


TABLE_FILE = REPO / "src" / "jobgen" / "compiler" / "directive_table.py"


def test_committed_table_is_what_the_generator_writes():
    """The committed file is, byte for byte, what the generator's render() writes for the
    table's own rows and header facts: the header, its regeneration command and the row
    format cannot drift from tools/gen_directives.py. What the rows say is checked against
    systemd's own sources below."""
    (last_commit,) = re.findall(rf"v{table.LAST_RELEASE} is commit ([0-9a-f]{{40}})", table.__doc__)
    rows = [gen.Row(d.section, d.name, d.since, d.deprecated, d.removed) for d in table.DIRECTIVES]
    values = [tuple(v) for v in table.VALUES]
    written = gen.render(rows, values, table.FIRST_RELEASE, table.LAST_RELEASE, table.SOURCE_REPOSITORY, last_commit)
    assert written == TABLE_FILE.read_text()


# Debian releases whose systemd lies inside the table's range: scripts/fetch-systemd-source
# (part of scripts/test) unpacks each one's upstream source into the cache.
SOURCE_RELEASES = {247: "bullseye", 252: "bookworm", 257: "trixie"}
# The table reads the vNNN tags; Debian ships a stable point release (252.39), which may
# accept a key its vNNN did not. Each such key, with the first point release that has it.
POINT_RELEASE_KEYS = {
    (252, "Scope", "OOMPolicy"): "src/core/load-fragment-gperf.gperf.in@v252.5",  # 253 upstream
}


def _source_tree(release: int) -> Path:
    cache = Path(os.environ.get("JOBGEN_CACHE", Path.home() / ".cache" / "jobgen"))
    tree = cache / "systemd-source" / str(release)
    if not (tree / "version").is_file():
        pytest.skip(f"needs systemd {release}'s source ({SOURCE_RELEASES[release]}): run scripts/fetch-systemd-source")
    return tree


def _alive(since: int, removed: int | None, release: int) -> bool:
    return since <= release and (removed is None or release < removed)


@pytest.mark.parametrize("release", sorted(SOURCE_RELEASES))
def test_committed_table_is_what_the_generator_reads_from_systemds_source(release):
    """At each release whose source Debian ships, the table says exactly what the generator
    reads from that release's parser table and install.c (which keys are accepted, which
    only warn) and which value probes match there."""
    assert table.FIRST_RELEASE <= release <= table.LAST_RELEASE
    tree = _source_tree(release)
    assert (tree / "version").read_text().split(".")[0] == str(release)
    path = gen.gperf_path(release)
    read = gen.release_keys((tree / path).read_text(), (tree / gen.INSTALL_C).read_text(), f"{path}@{release}")
    said = {(d.section, d.name): d.deprecated is not None and d.deprecated <= release
            for d in table.DIRECTIVES if _alive(d.since, d.removed, release)}
    said |= {(section, name): False for (r, section, name) in POINT_RELEASE_KEYS if r == release}
    assert sorted(set(read) - set(said)) == [] and sorted(set(said) - set(read)) == []
    assert {k for k, warn in read.items() if warn} == {k for k, warn in said.items() if warn}
    probed = {(v.section, v.directive, v.value) for v in table.VALUES if _alive(v.since, v.removed, release)}
    assert gen.probe_tree(tree) == probed


def _systemd_git_dir() -> Path | None:
    path = os.environ.get("JOBGEN_SYSTEMD_GIT")
    if path:
        return Path(path)
    cache = Path(os.environ.get("JOBGEN_CACHE", Path.home() / ".cache" / "jobgen"))
    candidate = cache / "systemd.git"
    return candidate if candidate.is_dir() else None


def test_regenerating_from_the_release_tags_gives_the_committed_table():
    """The whole history (every tag v230..v261) needs a git clone of systemd's tags, which
    Debian's source packages do not carry: a check for whoever regenerates the table."""
    git_dir = _systemd_git_dir()
    if git_dir is None:
        pytest.skip("optional: to regenerate the table, git clone --bare https://github.com/yuwata/systemd "
                    "$JOBGEN_CACHE/systemd.git (or set JOBGEN_SYSTEMD_GIT)")
    out = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_directives.py"), "--git-dir", str(git_dir),
         "--first", str(table.FIRST_RELEASE), "--last", str(table.LAST_RELEASE)],
        check=True, capture_output=True, text=True,
    ).stdout
    assert out == TABLE_FILE.read_text()


# --- the table against real systemd ------------------------------------

UNKNOWN_KEY = re.compile(r"(?P<file>[\w.@-]+):\d+: Unknown (?:key|lvalue)")
WARN_ONLY = re.compile(r"(?P<file>[\w.@-]+):\d+: (?:Support for option \w+= has been (?:removed|disabled)"
                       r"|Unit dependency type \w+= is obsolete)")


def _one_unit_per_key(folder: Path) -> dict[str, table.Directive]:
    """A unit file per [Unit]/[Service]/[Install]/[Timer] key in the table,
    so one key's complaint cannot hide another's."""
    (folder / "x.service").write_text("[Service]\nExecStart=/bin/true\n")
    units = {}
    for row in table.DIRECTIVES:
        if row.section == "Timer":
            name = f"t-{row.name}.timer"
            text = f"[Timer]\nOnCalendar=daily\nUnit=x.service\n{row.name}=\n"
        elif row.section in ("Unit", "Service", "Install"):
            name = f"k-{row.section}-{row.name}.service"
            line = f"[{row.section}]\n{row.name}={'x.service' if row.section == 'Unit' else ''}\n"
            service = "[Service]\nExecStart=/bin/true\n"
            text = line + service if row.section == "Unit" else service + line
        else:
            continue
        (folder / name).write_text(text)
        units[name] = row
    return units


@pytest.mark.matrix
@pytest.mark.parametrize("release", sorted(sdanalyze.RELEASES))
def test_real_systemd_agrees_with_the_table(release, tmp_path):
    """Every key the table says `release` lacks is reported "Unknown key" by
    that release's own systemd-analyze, and no other; every key the table says
    it only warns about is warned about, and no other."""
    analyzer = sdanalyze.versioned_analyzer(release)
    if analyzer is None:
        pytest.skip(f"needs Debian's systemd {release}: {sdanalyze.FETCH_HINT}")
    units = _one_unit_per_key(tmp_path)
    paths = sorted(tmp_path.iterdir())
    lines = []
    for start in range(0, len(paths), 200):
        lines += analyzer.verify(paths[start:start + 200]).lines
    unknown = {units[m["file"]] for line in lines if (m := UNKNOWN_KEY.search(line)) and m["file"] in units}
    warned = {units[m["file"]] for line in lines if (m := WARN_ONLY.search(line)) and m["file"] in units}

    def gone(release_or_none):
        return release_or_none is not None and release_or_none <= release

    rows = set(units.values())
    assert unknown == {r for r in rows if r.since > release or gone(r.removed)}
    assert warned == {r for r in rows if gone(r.deprecated) and not gone(r.removed)}


def test_every_emitted_directive_has_one_specifier_fact() -> None:
    """escape.py decides '%' by compiler/specifier_table.py: no emitted directive without a row."""
    from jobgen.compiler.plan import EMITTED
    from jobgen.compiler.specifier_table import SPECIFIERS

    keys = [(row.section, row.directive) for row in SPECIFIERS]
    assert len(keys) == len(set(keys)), "a directive listed twice"
    assert set(EMITTED) <= set(keys), sorted(set(EMITTED) - set(keys))
    assert set(keys) <= set(ROWS), sorted(set(keys) - set(ROWS))  # and each is a real directive
