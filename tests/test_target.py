"""Target systemd versions: reading targets, and what each target may use."""

from __future__ import annotations

import pytest

from jobgen.compiler.directive_table import LAST_RELEASE
from jobgen.compiler.target import (
    PRESETS,
    SupportRow,
    Target,
    _plain_clause,
    parse_systemctl_version,
    parse_target,
    supported_directives,
)

# --- presets ------------------------------------------------------------

PRESET_RELEASES = [
    ("debian-11", 247),
    ("debian-12", 252),
    ("debian-13", 257),
    ("ubuntu-20.04", 245),
    ("ubuntu-22.04", 249),
    ("ubuntu-24.04", 255),
    ("rhel-8", 239),
    ("rhel-9", 252),
]


@pytest.mark.parametrize("name,release", PRESET_RELEASES)
def test_preset(name, release):
    assert parse_target(name) == Target(release, release, name)
    assert str(release) in PRESETS[name][1]  # the citation names the package version


def test_every_preset_is_tested():
    assert sorted(PRESETS) == sorted(name for name, _ in PRESET_RELEASES)


# --- reading targets ----------------------------------------------------

# (text, min, max, normalised text)
TARGETS = [
    ("252", 252, 252, "252"),
    ("252.38-1~deb12u1", 252, 252, "252"),
    ("249.11-0ubuntu3", 249, 249, "249"),
    ("252-46.el9_4", 252, 252, "252"),
    (">=252", 252, None, ">=252"),
    (">=252,<258", 252, 257, ">=252,<258"),
    (" >= 252 , < 258 ", 252, 257, ">=252,<258"),
    (">252,<=257", 253, 257, ">252,<=257"),
    ("==257", 257, 257, "==257"),
    (">=247,==252", 252, 252, ">=247,==252"),
    ("Debian-12", 252, 252, "debian-12"),
    ("262", 262, 262, "262"),  # newer than the table: allowed, keys not yet removed
]


@pytest.mark.parametrize("text,low,high,normalised", TARGETS)
def test_parse_target(text, low, high, normalised):
    assert parse_target(text) == Target(low, high, normalised)


PRESET_NAMES = ("one of debian-11, debian-12, debian-13, rhel-8, rhel-9, "
                "ubuntu-20.04, ubuntu-22.04, ubuntu-24.04")

# (text, exact ValueError message)
TARGET_ERRORS = [
    ("", "empty systemd target; expected a version like '252', a range like '>=252,<258', "
         f"or a preset ({PRESET_NAMES})"),
    ("debain-12", "unknown systemd target 'debain-12'; expected a version like '252', "
                  f"a range like '>=252,<258', or a preset ({PRESET_NAMES})"),
    ("latest", "unknown systemd target 'latest'; expected a version like '252', "
               f"a range like '>=252,<258', or a preset ({PRESET_NAMES})"),
    (">=258,<252", "systemd target '>=258,<252' matches no release (it needs >= 258 and <= 251)"),
    (">=252,<252", "systemd target '>=252,<252' matches no release (it needs >= 252 and <= 251)"),
    ("<258", "systemd target '<258' has no lower bound; add one, e.g. '>=252,<258'"),
    ("229", "systemd target '229' reaches below systemd 230, the oldest release "
            "jobgen's directive table covers"),
    (">=219", "systemd target '>=219' reaches below systemd 230, the oldest release "
              "jobgen's directive table covers"),
    (">=252,foo", "cannot read 'foo' in systemd target '>=252,foo'; expected clauses like "
                  "'>=252', '<258' or '==257' joined by ','"),
    (">=252,", "cannot read '' in systemd target '>=252,'; expected clauses like "
               "'>=252', '<258' or '==257' joined by ','"),
    (">=", "cannot read '>=' in systemd target '>='; expected clauses like "
           "'>=252', '<258' or '==257' joined by ','"),
    ("~=252", "operator '~=' in systemd target '~=252' is not supported; use >=, >, <=, < or =="),
    (">=252,!=255", "operator '!=' in systemd target '>=252,!=255' is not supported; "
                    "use >=, >, <=, < or =="),
    (">=252.38", "'252.38' in systemd target '>=252.38' is not a systemd major release; "
                 "write a whole number such as 252"),
]


@pytest.mark.parametrize("text,message", TARGET_ERRORS)
def test_parse_target_error(text, message):
    with pytest.raises(ValueError) as caught:
        parse_target(text)
    assert str(caught.value) == message


# (text, describe())
DESCRIPTIONS = [
    ("252", "systemd 252"),
    (">=252", "systemd >=252 (252 ... newest)"),
    (">=252,<258", "systemd >=252,<258 (252 ... 257)"),
    ("==257", "systemd ==257 (257)"),
    ("debian-12", "systemd 252 (preset debian-12: Debian 12 bookworm: systemd 252.39-1~deb12u2)"),
]


@pytest.mark.parametrize("text,description", DESCRIPTIONS)
def test_describe(text, description):
    assert parse_target(text).describe() == description


# --- what a target may use ----------------------------------------------

# (target, section, directive, allowed)
ALLOWED = [
    ("257", "Timer", "DeferReactivation", True),
    ("256", "Timer", "DeferReactivation", False),
    (">=257", "Timer", "DeferReactivation", True),
    (">=252", "Timer", "DeferReactivation", False),
    (">=252,<258", "Timer", "DeferReactivation", False),  # 252..256 lack it
    (">=257,<258", "Timer", "DeferReactivation", True),
    ("debian-12", "Timer", "DeferReactivation", False),
    ("debian-13", "Timer", "DeferReactivation", True),
    ("257", "Timer", "RandomizedOffsetSec", False),
    ("258", "Timer", "RandomizedOffsetSec", True),
    ("debian-11", "Timer", "FixedRandomDelay", True),
    ("ubuntu-20.04", "Timer", "FixedRandomDelay", False),
    ("ubuntu-22.04", "Unit", "OnSuccess", True),
    ("248", "Unit", "OnSuccess", False),
    ("rhel-8", "Service", "ExecCondition", False),
    ("243", "Service", "ExecCondition", True),
    ("243", "Service", "OOMPolicy", True),
    ("247", "Service", "LoadCredential", True),
    ("debian-12", "Service", "RestartSteps", False),
    ("ubuntu-24.04", "Service", "RestartSteps", True),
    ("ubuntu-24.04", "Service", "RestartMaxDelaySec", True),
    # Deprecated: fine on a closed range below the deprecation, never on an
    # open range (it includes the releases that only warn).
    ("252", "Service", "CPUShares", True),
    (">=252,<258", "Service", "CPUShares", True),
    (">=252,<259", "Service", "CPUShares", False),
    (">=252", "Service", "CPUShares", False),
    (">=252", "Service", "CPUWeight", True),
    (">=252", "Service", "MemoryLimit", False),
    (">=252", "Service", "MemoryMax", True),
    # Removed in 247.
    ("246", "Unit", "ConditionNull", True),
    (">=230,<247", "Unit", "ConditionNull", True),
    (">=230", "Unit", "ConditionNull", False),
    # Unknown keys are never allowed.
    (">=252", "Service", "NoSuchKey", False),
    (">=252", "Timer", "ExecStart", False),
]


@pytest.mark.parametrize("text,section,directive,allowed", ALLOWED)
def test_has(text, section, directive, allowed):
    assert parse_target(text).has(section, directive) is allowed


# (target, section, directive, exact reason)
REASONS = [
    (">=252", "Timer", "DeferReactivation", "needs systemd >= 257; target is >=252"),
    (">=252,<258", "Timer", "DeferReactivation", "needs systemd >= 257; target is >=252,<258"),
    ("debian-12", "Timer", "DeferReactivation", "needs systemd >= 257; target is debian-12 (systemd 252)"),
    (">=252", "Service", "CPUShares",
     "is ignored with a warning from systemd 258 on; target >=252 includes 258"),
    ("258", "Service", "CPUShares", "is ignored with a warning from systemd 258 on; target is 258"),
    (">=230", "Unit", "ConditionNull", "was removed in systemd 247; target >=230 includes 247"),
    (">=252", "Unit", "ConditionNull", "was removed in systemd 247; target is >=252"),
    (">=252", "Service", "NoSuchKey", f"[Service] NoSuchKey= is not accepted by any systemd 230..{LAST_RELEASE}"),
    (">=257", "Timer", "DeferReactivation", None),
]


@pytest.mark.parametrize("text,section,directive,reason", REASONS)
def test_lacking(text, section, directive, reason):
    assert parse_target(text).lacking(section, directive) == reason


def test_first_release():
    target = parse_target(">=252")
    assert target.first_release("Timer", "DeferReactivation") == 257
    assert target.first_release("Service", "NoSuchKey") is None


# (target, section, directive, value, exact reason or None)
VALUES = [
    ("239", "Service", "Type", "exec", "Type=exec needs systemd >= 240; target is 239"),
    ("rhel-8", "Service", "Type", "exec", "Type=exec needs systemd >= 240; target is rhel-8 (systemd 239)"),
    ("240", "Service", "Type", "exec", None),
    ("243", "Service", "Restart", "on-failure with Type=oneshot",
     "Restart=on-failure with Type=oneshot needs systemd >= 244; target is 243"),
    ("ubuntu-20.04", "Service", "Restart", "on-failure with Type=oneshot", None),
    ("234", "Timer", "OnCalendar", "time zone", "OnCalendar=time zone needs systemd >= 235; target is 234"),
    (">=235", "Timer", "OnCalendar", "time zone", None),
    ("debian-13", "Service", "ExecStart", "prefix |",
     "ExecStart=prefix | needs systemd >= 258; target is debian-13 (systemd 257)"),
    ("242", "Service", "ExecStart", "prefix :", None),
    ("241", "Service", "ExecStart", "prefix :", "ExecStart=prefix : needs systemd >= 242; target is 241"),
    ("230", "Service", "KillMode", "mixed", None),
    (">=252", "Service", "PrivateTmp", "disconnected",
     "PrivateTmp=disconnected needs systemd >= 257; target is >=252"),
    (">=252", "Service", "Type", "oneshot", None),        # not gated: as old as Type=
    (">=252", "Timer", "DeferReactivation", "yes",        # the directive's own gate comes first
     "needs systemd >= 257; target is >=252"),
]


@pytest.mark.parametrize("text,section,directive,value,reason", VALUES)
def test_lacking_value(text, section, directive, value, reason):
    target = parse_target(text)
    assert target.lacking_value(section, directive, value) == reason
    assert target.has_value(section, directive, value) is (reason is None)


# --- systemctl --version ------------------------------------------------

SYSTEMCTL = [
    ("systemd 252 (252.38-1~deb12u1)\n+PAM +AUDIT +SELINUX\n", 252),
    ("systemd 257 (257.13-1~deb13u1)\n", 257),
    ("systemd 249 (249.11-0ubuntu3.12)\n", 249),
    ("systemd 239 (239-82.el8)\n", 239),
    ("systemd 245 (245.4-4ubuntu3.24)", 245),
    ("systemd 262\n", 262),
]


@pytest.mark.parametrize("output,release", SYSTEMCTL)
def test_parse_systemctl_version(output, release):
    assert parse_systemctl_version(output) == release


@pytest.mark.parametrize("output,message", [
    ("", "cannot read a systemd version from 'systemctl --version' output ''"),
    ("bash: systemctl: command not found\n",
     "cannot read a systemd version from 'systemctl --version' output 'bash: systemctl: command not found'"),
])
def test_parse_systemctl_version_error(output, message):
    with pytest.raises(ValueError) as caught:
        parse_systemctl_version(output)
    assert str(caught.value) == message


# --- jobgen directives --systemd N -----------------------------------------

def test_supported_directives():
    names = [("Timer", "DeferReactivation"), ("Timer", "OnCalendar"), ("Service", "CPUShares")]
    assert supported_directives(parse_target(">=252"), names) == [
        SupportRow("Timer", "DeferReactivation", 257, "gated"),
        SupportRow("Timer", "OnCalendar", 230, "ok"),
        SupportRow("Service", "CPUShares", 230, "deprecated"),
    ]
    assert supported_directives(parse_target("257"), names) == [
        SupportRow("Timer", "DeferReactivation", 257, "ok"),
        SupportRow("Timer", "OnCalendar", 230, "ok"),
        SupportRow("Service", "CPUShares", 230, "ok"),
    ]


def test_supported_directives_refuses_an_unknown_name():
    with pytest.raises(ValueError, match=r"\[Service\] NoSuchKey= is not in the directive table"):
        supported_directives(parse_target("252"), [("Service", "NoSuchKey")])


# A range is a PEP 440 specifier set (packaging): jobgen's bounds admit exactly the major
# releases packaging's SpecifierSet contains.
@pytest.mark.parametrize("text", [t for t, *_ in TARGETS if t[0] in "<>= "])
def test_range_bounds_agree_with_packaging(text):
    from packaging.specifiers import SpecifierSet

    target = parse_target(text)
    specifiers = SpecifierSet(text.replace(" ", ""))
    for release in range(225, 300):
        inside = target.min <= release and (target.max is None or release <= target.max)
        assert inside is specifiers.contains(str(release)), release


@pytest.mark.parametrize("text, message", [
    ("==252.*", "'252.*' in systemd target '==252.*' is not a systemd major release; write a whole number such as 252"),
    (">=0252", "'0252' in systemd target '>=0252' is not a systemd major release; write a whole number such as 252"),
    ("===252", "operator '===' in systemd target '===252' is not supported; use >=, >, <=, < or =="),
])
def test_specifier_forms_a_target_does_not_take(text, message):
    with pytest.raises(ValueError) as caught:
        parse_target(text)
    assert str(caught.value) == message


# A clause of the plain form (an operator and a whole number) is read without importing
# packaging, as packaging's Specifier reads it; every other form is left to packaging.
@pytest.mark.parametrize("clause, plain", [
    (">=252", (">=", 252)),
    ("<258", ("<", 258)),
    ("> 252", (">", 252)),
    ("<=\t257", ("<=", 257)),
    ("==257", ("==", 257)),
    ("===252", None),
    ("==0252", None),
    (">=v252", None),
    ("==252.*", None),
    (">=252.0", None),
    ("~=252", None),
    ("!=252", None),
    (">=２５２", None),  # fullwidth digits: isdigit(), not a version
    (">=", None),
    ("252", None),
])
def test_plain_clauses_read_as_packaging_reads_them(clause, plain):
    from packaging.specifiers import Specifier

    assert _plain_clause(clause) == plain
    if plain is not None:
        spec = Specifier(clause)
        assert (spec.operator, spec.version) == (plain[0], str(plain[1]))
