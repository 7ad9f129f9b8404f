"""Which systemd will read the units: target parsing and version gates.

Pure: no I/O.  The facts come from directive_table (generated from systemd's
own parser tables by tools/gen_directives.py) and from VALUE_GATES below.

A target is a range of systemd major releases.  A directive or value is
allowed only if *every* release in the range accepts it without a warning:
introduced at or before the lowest release, and neither removed nor reduced to
a warning at or before the highest one.  An open range (``>=252``) includes
every future release, so a key that newer systemd only warns about is not
allowed for it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Iterable, Mapping, NamedTuple

from jobgen.compiler import timespec

from jobgen.compiler.directive_table import DIRECTIVES, FIRST_RELEASE, LAST_RELEASE, Directive

# Distribution presets: name -> (systemd major, citation).  The citation is the
# distribution's systemd package; the major is what its unit-file parser is.
PRESETS: dict[str, tuple[int, str]] = {
    # Debian: https://packages.debian.org/<suite>/systemd
    "debian-11": (247, "Debian 11 bullseye: systemd 247.3-7+deb11u5"),
    "debian-12": (252, "Debian 12 bookworm: systemd 252.39-1~deb12u2"),
    "debian-13": (257, "Debian 13 trixie: systemd 257.13-1~deb13u1"),
    # Ubuntu: https://launchpad.net/ubuntu/+source/systemd (release pocket)
    "ubuntu-20.04": (245, "Ubuntu 20.04 focal: systemd 245.4-4ubuntu3"),
    "ubuntu-22.04": (249, "Ubuntu 22.04 jammy: systemd 249.11-0ubuntu3"),
    "ubuntu-24.04": (255, "Ubuntu 24.04 noble: systemd 255.4-1ubuntu8"),
    # RHEL: systemd-239-*.el8 for all of 8.x; 9.0 and 9.1 shipped
    # systemd-250-*.el9, 9.2 and later systemd-252-*.el9.  The preset means a
    # current 9.x; pin "250" for 9.0/9.1 hosts.
    "rhel-8": (239, "RHEL 8: systemd-239-*.el8"),
    "rhel-9": (252, "RHEL 9.2+: systemd-252-*.el9 (9.0/9.1: systemd-250)"),
}

# Values whose acceptance changed after the directive itself appeared, for the
# directives jobgen writes (plan.EMITTED): plan._Unit.set asks every row of every
# value it writes (tests/test_gates.py reaches each row through set).  Each `since` is measured from
# systemd's sources (tests/test_directive_table.py checks every row against
# directive_table.VALUES, which tools/gen_directives.py probes per release).
# A value not listed here is accepted wherever its directive is.


class ValueGate(NamedTuple):
    section: str
    directive: str
    value: str
    since: int
    citation: str
    # How a written value is recognised as this gate's (a name in VALUE_MATCHERS).
    match: str = "exact"


# What plan._Unit.set asks of every value it writes: does this row apply to `text`
# (the value's text; for Exec*= lines jobgen's own prefix), given what the unit already
# set (`unit`: directive -> text)?
VALUE_MATCHERS: dict[str, Callable[[ValueGate, str, Mapping[str, str]], bool]] = {
    "exact": lambda g, text, unit: text == g.value,
    # "prefix !" is not "prefix !!": each prefix character is one gate.
    "exec prefix": lambda g, text, unit: (
        "!!" in text if g.value == "prefix !!" else g.value.removeprefix("prefix ") in text.replace("!!", "")
    ),
    "calendar time zone": lambda g, text, unit: timespec.parse_calendar(text).timezone is not None,
    "calendar ~": lambda g, text, unit: "~" in text,
    "restart of a oneshot": lambda g, text, unit: text != "no" and unit.get("Type") == "oneshot",
}
# The matchers above that read `unit`: a value they judge depends on the rest of the unit,
# so its answer cannot be worked out once and reused for every unit (plan._block).
MATCHERS_READING_UNIT = frozenset({"restart of a oneshot"})


VALUE_GATES: tuple[ValueGate, ...] = (
    ValueGate("Service", "Type", "exec", 240, "src/core/service.c@v240 service_type_table"),
    # service_verify() refused every Restart= but "no" for oneshot before 244.
    ValueGate("Service", "Restart", "on-failure with Type=oneshot", 244,
              "src/core/service.c@v244 service_verify()", "restart of a oneshot"),
    # kill_mode_table has "mixed" since 209 (NEWS), older than the table.
    ValueGate("Service", "KillMode", "mixed", FIRST_RELEASE, "src/core/kill.c@v230 kill_mode_table"),
    # config_parse_exec(): command-line prefixes (systemd.service(5) "Command lines").
    ValueGate("Service", "ExecStart", "prefix +", 231, "src/core/load-fragment.c@v231 config_parse_exec()", "exec prefix"),
    ValueGate("Service", "ExecStart", "prefix !", 235, "src/core/load-fragment.c@v235 config_parse_exec()", "exec prefix"),
    ValueGate("Service", "ExecStart", "prefix !!", 235, "src/core/load-fragment.c@v235 config_parse_exec()", "exec prefix"),
    ValueGate("Service", "ExecStart", "prefix :", 242, "src/core/load-fragment.c@v242 config_parse_exec()", "exec prefix"),
    ValueGate("Service", "ExecStart", "prefix |", 258, "src/core/load-fragment.c@v258 config_parse_exec()", "exec prefix"),
    ValueGate("Service", "ProtectSystem", "strict", 232, "src/core/namespace.c@v232 protect_system_table"),
    ValueGate("Service", "ProtectHome", "tmpfs", 238, "src/core/namespace.c@v238 protect_home_table"),
    ValueGate("Service", "PrivateTmp", "disconnected", 257, "src/core/namespace.c@v257 private_tmp_table"),
    ValueGate("Service", "PrivateUsers", "self", 257, "src/core/namespace.c@v257 private_users_table"),
    ValueGate("Service", "ProtectControlGroups", "strict", 257,
              "src/core/namespace.c@v257 protect_control_groups_table"),
    # calendarspec.c: "... Europe/Berlin" suffix, and "~" counting days from
    # the end of the month.
    ValueGate("Timer", "OnCalendar", "time zone", 235, "src/basic/calendarspec.c@v235 calendar_spec_from_string()",
              "calendar time zone"),
    ValueGate("Timer", "OnCalendar", "~ (from end of month)", 233,
              "src/basic/calendarspec.c@v233 calendar_spec_from_string()", "calendar ~"),
)

_DIRECTIVES: dict[tuple[str, str], Directive] = {(d.section, d.name): d for d in DIRECTIVES}
_VALUE_GATES: dict[tuple[str, str, str], ValueGate] = {
    (g.section, g.directive, g.value): g for g in VALUE_GATES
}
_GATES_BY_DIRECTIVE: dict[tuple[str, str], list[ValueGate]] = {}
for _gate in VALUE_GATES:
    _GATES_BY_DIRECTIVE.setdefault((_gate.section, _gate.directive), []).append(_gate)

# Patterns that are not on every path are compiled at their first use (re's own cache):
# _CLAUSE explains a clause packaging cannot read, _SYSTEMCTL_VERSION reads `--systemd auto`.
_CLAUSE = r"(?P<op>===|>=|<=|==|!=|~=|>|<)?\s*(?P<version>[^<>=!~\s].*)"
# A distribution version string: major, then anything after . ~ + - or space
# ("252.38-1~deb12u1", "249.11-0ubuntu3", "252-46.el9_4").
_PACKAGE_VERSION = re.compile(r"(?P<major>[0-9]+)(?:[.~+\-].*)?")
_EXPECTED = "expected a version like '252', a range like '>=252,<258', or a preset"


class Target(NamedTuple):
    """A range of systemd major releases: min..max inclusive (max None = open).

    A named tuple (immutable, compared and hashed field by field) rather than a frozen
    dataclass, whose six generated methods are executed at every start."""

    min: int
    max: int | None
    text: str

    @property
    def preset(self) -> str | None:
        return self.text if self.text in PRESETS else None

    @property
    def label(self) -> str:
        """How messages name the target: ">=252", "252", "debian-12 (systemd 252)"."""
        return f"{self.text} (systemd {self.min})" if self.preset else self.text

    def describe(self) -> str:
        if self.preset:
            return f"systemd {self.min} (preset {self.text}: {PRESETS[self.text][1]})"
        if self.text.isdigit():
            return f"systemd {self.text}"
        upper = "newest" if self.max is None else str(self.max)
        span = str(self.min) if self.min == self.max else f"{self.min} ... {upper}"
        return f"systemd {self.text} ({span})"

    def _reaches(self, release: int | None) -> bool:
        """True if some release in the range is `release` or later."""
        return release is not None and (self.max is None or release <= self.max)

    def first_release(self, section: str, directive: str) -> int | None:
        row = _DIRECTIVES.get((section, directive))
        return row.since if row else None

    def lacking(self, section: str, directive: str) -> str | None:
        """Why the directive is not allowed for this target, or None if it is."""
        return _lacking(self, section, directive)

    def _lacking(self, section: str, directive: str) -> str | None:
        row = _DIRECTIVES.get((section, directive))
        if row is None:
            return (f"[{section}] {directive}= is not accepted by any systemd "
                    f"{FIRST_RELEASE}..{LAST_RELEASE}")
        if row.since > self.min:
            return f"needs systemd >= {row.since}; target is {self.label}"
        if self._reaches(row.removed):
            return f"was removed in systemd {row.removed}; {self._against(row.removed)}"
        if self._reaches(row.deprecated):
            return (f"is ignored with a warning from systemd {row.deprecated} on; "
                    f"{self._against(row.deprecated)}")
        return None

    def _against(self, release: int) -> str:
        if release <= self.min:
            return f"target is {self.label}"
        return f"target {self.label} includes {release}"

    def has(self, section: str, directive: str) -> bool:
        return self.lacking(section, directive) is None

    def lacking_value(self, section: str, directive: str, value: str) -> str | None:
        """Why `directive=value` is not allowed, or None.  Values not in
        VALUE_GATES are allowed wherever the directive is."""
        if reason := self.lacking(section, directive):
            return reason
        gate = _VALUE_GATES.get((section, directive, value))
        if gate is not None and gate.since > self.min:
            return f"{directive}={value} needs systemd >= {gate.since}; target is {self.label}"
        return None

    def has_value(self, section: str, directive: str, value: str) -> bool:
        return self.lacking_value(section, directive, value) is None

    def lacking_values(
        self, section: str, directive: str, text: str, unit: Mapping[str, str] = {}
    ) -> list[tuple[ValueGate, str]]:
        """Every value gate that `directive=text` meets (VALUE_MATCHERS) and this target
        lacks, with the reason; [] when the value is fine. `unit`: what the same unit
        already set (directive -> text), for gates that depend on another directive.
        The one question plan._Unit.set asks of each value it writes."""
        return [
            (gate, f"{directive}={gate.value} needs systemd >= {gate.since}; target is {self.label}")
            for gate in self.value_gates_lacked(section, directive)
            if VALUE_MATCHERS[gate.match](gate, text, unit)
        ]

    def value_gates_lacked(self, section: str, directive: str) -> tuple[ValueGate, ...]:
        """The rows of VALUE_GATES for the directive that this target lacks: where there
        are none (most directives, on most targets), no value of it needs a look."""
        return _gates_above(self.min, section, directive)


@lru_cache(maxsize=None)
def _lacking(target: Target, section: str, directive: str) -> str | None:
    # A plan asks this for every directive of every unit: 1,000 jobs ask the same
    # few dozen questions 27,000 times. Targets are frozen, so the answer is too.
    return target._lacking(section, directive)


@lru_cache(maxsize=None)
def _gates_above(release: int, section: str, directive: str) -> tuple[ValueGate, ...]:
    # Every Exec*= line is read by the one config_parse_exec(): ExecStart='s rows hold for all.
    rows = _GATES_BY_DIRECTIVE.get((section, "ExecStart" if directive.startswith("Exec") else directive), ())
    return tuple(gate for gate in rows if gate.since > release)


def parse_target(text: str) -> Target:
    """Read a target: "252", "252.38-1~deb12u1", ">=252", ">=252,<258",
    "==257" or a preset name.  Raises ValueError with a message that names
    the problem (the caller adds file:line:col)."""
    stripped = text.strip()
    if not stripped:
        raise ValueError(f"empty systemd target; {_EXPECTED} ({_preset_list()})")
    if stripped.lower() in PRESETS:
        name = stripped.lower()
        release = PRESETS[name][0]
        return Target(release, release, name)
    if m := _PACKAGE_VERSION.fullmatch(stripped):
        release = int(m["major"])
        _check_known(release, stripped)
        return Target(release, release, str(release))
    if stripped[0] not in "<>=!~":
        raise ValueError(f"unknown systemd target {stripped!r}; {_EXPECTED} ({_preset_list()})")
    low, high = 0, None
    canonical = []
    for clause in stripped.split(","):
        op, release = _clause(clause.strip(), stripped)
        canonical.append(f"{op}{release}")
        if op in (">=", "=="):
            low = max(low, release)
        if op == ">":
            low = max(low, release + 1)
        if op in ("<=", "=="):
            high = release if high is None else min(high, release)
        if op == "<":
            high = release - 1 if high is None else min(high, release - 1)
    if high is not None and high < low:
        raise ValueError(f"systemd target {stripped!r} matches no release "
                         f"(it needs >= {low} and <= {high})")
    if low == 0:
        raise ValueError(f"systemd target {stripped!r} has no lower bound; "
                         f"add one, e.g. '>=252,{stripped}'")
    _check_known(low, stripped)
    return Target(low, high, ",".join(canonical))


# Range clauses are PEP 440 version specifiers (packaging.specifiers), of which a target
# uses the comparisons that bound a range of major releases. ~= and != would make holes
# or depend on minor versions systemd's unit-file parser never changes at.
_OPERATORS = (">=", "<=", "==", ">", "<")


def _clause(clause: str, whole: str) -> tuple[str, int]:
    if (plain := _plain_clause(clause)) is not None:
        return plain
    # Imported here: a release ("252", what the generator passes for the running systemd),
    # a preset or a range of plain clauses (">=252", the default target) never needs
    # packaging (some 10 ms at every render and boot).
    from packaging.specifiers import InvalidSpecifier, Specifier

    try:
        spec = Specifier(clause)
    except InvalidSpecifier:
        m = re.fullmatch(_CLAUSE, clause)
        if not clause or not m or not m["op"] or m["op"] in _OPERATORS:
            raise ValueError(f"cannot read {clause!r} in systemd target {whole!r}; "
                             "expected clauses like '>=252', '<258' or '==257' joined by ','") from None
        spec = None
        op = m["op"]
    else:
        op = spec.operator
    if op not in _OPERATORS:
        raise ValueError(f"operator {op!r} in systemd target {whole!r} is not supported; "
                         "use >=, >, <=, < or ==")
    version = spec.version if spec is not None else ""
    if not _is_major(version):
        raise ValueError(f"{version!r} in systemd target {whole!r} is not a systemd major "
                         "release; write a whole number such as 252")
    return op, int(version)


def _plain_clause(clause: str) -> tuple[str, int] | None:
    """(operator, release) of a clause that is one of _OPERATORS and a whole number written
    as such (">=252", "< 258"), what packaging's Specifier reads it as; None for anything
    else, which _clause hands to packaging (and its messages)."""
    op = next((o for o in _OPERATORS if clause.startswith(o)), None)
    if op is None:
        return None
    # Specifier strips the whitespace between operator and version as str.strip does.
    version = clause[len(op):].strip()
    if not (version.isascii() and version.isdigit()) or str(int(version)) != version:
        return None  # '0252', '252.*', '=252' (of '===252'), 'v252', '': packaging decides
    return op, int(version)


def _is_major(version: str) -> bool:
    """'252': a PEP 440 version that is one whole number, written as such."""
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(version)
    except InvalidVersion:  # '252.*' is a valid specifier, not a version
        return False
    return str(parsed) == version and len(parsed.release) == 1


def _check_known(release: int, whole: str) -> None:
    if release < FIRST_RELEASE:
        raise ValueError(f"systemd target {whole!r} reaches below systemd {FIRST_RELEASE}, "
                         "the oldest release jobgen's directive table covers")


def _preset_list() -> str:
    return "one of " + ", ".join(sorted(PRESETS))


_SYSTEMCTL_VERSION = r"systemd (?P<major>[0-9]+)(?:[ .(~+\-]|$)"


def parse_systemctl_version(output: str) -> int:
    """The major release from `systemctl --version` output, whose first line
    reads "systemd 252 (252.38-1~deb12u1)"."""
    first = output.strip().splitlines()[0] if output.strip() else ""
    m = re.match(_SYSTEMCTL_VERSION, first)
    if not m:
        raise ValueError(f"cannot read a systemd version from 'systemctl --version' output {first!r}")
    return int(m["major"])


class SupportRow(NamedTuple):
    section: str
    directive: str
    since: int
    status: str  # "ok" | "gated" | "deprecated"


def supported_directives(target: Target, names: Iterable[tuple[str, str]]) -> list[SupportRow]:
    """For `jobgen directives`: each (section, directive) with its first
    release and whether the target may use it ("ok"), lacks it in part of the
    range ("gated"), or reaches a release that removed it or only warns
    ("deprecated")."""
    rows = []
    for section, directive in names:
        row = _DIRECTIVES.get((section, directive))
        if row is None:
            raise ValueError(f"[{section}] {directive}= is not in the directive table")
        if row.since > target.min:
            status = "gated"
        elif target._reaches(row.removed) or target._reaches(row.deprecated):
            status = "deprecated"
        else:
            status = "ok"
        rows.append(SupportRow(section, directive, row.since, status))
    return rows


__all__ = [
    "PRESETS", "VALUE_GATES", "SupportRow", "Target", "ValueGate",
    "parse_systemctl_version", "parse_target", "supported_directives",
]
