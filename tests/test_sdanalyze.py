"""The systemd-analyze oracle (tests/support/sdanalyze.py) on hand-written units.

Every other unit test trusts this oracle, so here it must show that it can say "no": each
behaviour has one input unit and, beside it, what real systemd-analyze answers. Runs against
the host's systemd-analyze and, marked `matrix`, against each release cached by
scripts/fetch-systemd-versions (247 Debian 11, 252 Debian 12, 257 Debian 13, 262 sid).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from support.sdanalyze import (
    QUOTED_DUMP_SINCE,
    RECURSIVE_ERRORS_SINCE,
    OFFLINE_SECURITY_SINCE,
    RELEASES,
    Analyzer,
    Unsupported,
    cached_majors,
    host_analyzer,
    missing_reason,
    split_command_line,
    versioned_analyzer,
)

# systemd v257 NEWS: "New setting DeferReactivation= in timer units". Older releases warn.
DEFER_REACTIVATION_SINCE = 257

# Paths that exist on no test machine; stubs make them executable inside the sandbox only.
# The second one's folder does not exist either (the overlay goes onto /opt).
ABSENT_BINARIES = ["/usr/local/bin/jobgen-absent-probe", "/opt/jobgen-absent-probe/bin/app"]


def _analyzer_params():
    yield pytest.param("host", id="host")
    for major in sorted(set(RELEASES) | set(cached_majors())):
        yield pytest.param(major, id=f"systemd{major}", marks=pytest.mark.matrix)


@pytest.fixture(params=_analyzer_params())
def analyzer(request) -> Analyzer:
    if request.param == "host":
        found = host_analyzer()
        if found is None:
            pytest.skip("no /usr/bin/systemd-analyze: apt-get install systemd")
        return found
    found = versioned_analyzer(request.param)
    if found is None:
        pytest.skip(missing_reason(request.param))
    return found


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


GOOD_SERVICE = """\
[Unit]
Description=Refresh the product catalog

[Service]
Type=oneshot
ExecStart=/bin/true
"""

GOOD_TIMER = """\
[Unit]
Description=Refresh the product catalog every 5 minutes

[Timer]
OnCalendar=*:0/5

[Install]
WantedBy=timers.target
"""


# ---- verify ----------------------------------------------------------------------------------

def test_good_service_and_timer_are_clean(analyzer, tmp_path):
    service = write(tmp_path, "catalog.service", GOOD_SERVICE)
    timer = write(tmp_path, "catalog.timer", GOOD_TIMER)

    result = analyzer.verify([service, timer])

    assert (result.rc, result.lines) == (0, [])


def test_unknown_key_is_reported_with_the_callers_path(analyzer, tmp_path):
    service = write(tmp_path, "catalog.service", GOOD_SERVICE + "Bogus=1\n")  # line 7

    result = analyzer.verify([service])

    # 247: "Unknown key name 'Bogus' in section 'Service', ignoring."
    # 252+: "Unknown key 'Bogus' in section [Service], ignoring."
    assert len(result.lines) == 1, result.lines
    assert result.lines[0].startswith(f"{service}:7: Unknown key")
    assert "'Bogus'" in result.lines[0]
    # Before --recursive-errors (250) a warning exits 0: only the printed line shows it.
    assert result.rc == (1 if analyzer.version >= RECURSIVE_ERRORS_SINCE else 0)


def test_unknown_key_in_a_drop_in_next_to_the_unit_is_seen(analyzer, tmp_path):
    service = write(tmp_path, "catalog.service", GOOD_SERVICE)
    write(tmp_path, "catalog.service.d/50-extra.conf", "[Service]\nBogus=1\n")

    result = analyzer.verify([service])

    assert [line for line in result.lines if "Unknown key" in line and "'Bogus'" in line], result.lines


def test_missing_binary_fails_without_stub(analyzer, tmp_path):
    assert not any(Path(p).exists() for p in ABSENT_BINARIES)
    service = write(tmp_path, "app.service", GOOD_SERVICE.replace(
        "ExecStart=/bin/true", f"ExecStart={ABSENT_BINARIES[0]} run\nExecStopPost={ABSENT_BINARIES[1]}"))

    result = analyzer.verify([service])

    assert result.rc == 1
    assert sorted(result.lines) == sorted(
        f"app.service: Command {p} is not executable: No such file or directory" for p in ABSENT_BINARIES)


def test_missing_binary_passes_with_stub_and_host_stays_untouched(analyzer, tmp_path):
    # /bin/true next to the stubs: the overlay adds files, real ones stay visible (and the host
    # analyzer itself runs from /usr/bin, under a stub overlay when a stub lives there).
    service = write(tmp_path, "app.service", GOOD_SERVICE.replace(
        "ExecStart=/bin/true", f"ExecStartPre=/bin/true\nExecStart={ABSENT_BINARIES[0]} run\n"
                               f"ExecStopPost={ABSENT_BINARIES[1]}\nExecStopPost=/usr/bin/jobgen-absent-probe"))

    result = analyzer.verify([service], stubs=[*ABSENT_BINARIES, "/usr/bin/jobgen-absent-probe"])

    assert (result.rc, result.lines) == (0, [])
    assert not any(Path(p).exists() for p in [*ABSENT_BINARIES, "/usr/bin/jobgen-absent-probe"])


def test_defer_reactivation_is_known_from_257(analyzer, tmp_path):
    service = write(tmp_path, "catalog.service", GOOD_SERVICE)
    timer = write(tmp_path, "catalog.timer", GOOD_TIMER.replace("[Install]", "DeferReactivation=yes\n\n[Install]"))

    result = analyzer.verify([service, timer])

    if analyzer.version >= DEFER_REACTIVATION_SINCE:
        assert (result.rc, result.lines) == (0, [])
    else:
        assert len(result.lines) == 1 and "Unknown key" in result.lines[0], result.lines
        assert "'DeferReactivation'" in result.lines[0]
        assert result.rc == (1 if analyzer.version >= RECURSIVE_ERRORS_SINCE else 0)


def test_verify_leaves_the_host_alone(analyzer, tmp_path):
    # systemd 247 run as root moves the caller's cgroup processes into a new init.scope;
    # the oracle runs it as nobody. /dev/null must keep its mode for non-root processes.
    before = Path("/proc/self/cgroup").read_text()
    service = write(tmp_path, "catalog.service", GOOD_SERVICE)

    analyzer.verify([service])

    assert Path("/proc/self/cgroup").read_text() == before
    null = os.stat("/dev/null")
    assert stat.S_ISCHR(null.st_mode) and stat.S_IMODE(null.st_mode) == 0o666


# ---- exec_argv -------------------------------------------------------------------------------

# One ExecStart line as a unit file spells it, and the argv systemd makes of it (before the
# runtime $VAR expansion: "$HOME" stays literal, "$$" too; "%%" is already one "%"). Not a
# shell: an unquoted "\ " keeps its backslash (no such C escape; systemd keeps it, relaxed).
TRICKY_EXEC = r"""ExecStart=/usr/bin/printf "<%%s>\n" "a b" 'c"d' e\ f "x\"y" \\n $HOME ${HOME} $$X %% 'single $VAR' "" "tab\there" "\x01" "ü€" back\\slash `q` "a;b" #h ~ *"""
TRICKY_ARGV = ["/usr/bin/printf", "<%s>\n", "a b", 'c"d', "e\\ f", 'x"y', "\\n", "$HOME", "${HOME}", "$$X", "%",
               "single $VAR", "", "tab\there", "\x01", "ü€", "back\\slash", "`q`", "a;b", "#h", "~", "*"]


def test_exec_argv_round_trip_of_a_tricky_command(analyzer, tmp_path):
    if analyzer.version < QUOTED_DUMP_SINCE:
        pytest.skip(f"systemd {analyzer.version} prints Command Line: ambiguously (quoted since {QUOTED_DUMP_SINCE})")
    service = write(tmp_path, "argv.service", GOOD_SERVICE.replace("ExecStart=/bin/true", TRICKY_EXEC)
                    + "ExecStart=-/bin/echo second\nExecStopPost=/bin/echo done $$SERVICE_RESULT\n")

    argv = analyzer.exec_argv(service)

    assert argv == {
        "ExecStart": [TRICKY_ARGV, ["/bin/echo", "second"]],  # the "-" prefix is not shown
        "ExecStopPost": [["/bin/echo", "done", "$$SERVICE_RESULT"]],
    }


def test_exec_argv_with_stubbed_binary(analyzer, tmp_path):
    if analyzer.version < QUOTED_DUMP_SINCE:
        pytest.skip(f"exec_argv needs systemd >= {QUOTED_DUMP_SINCE}")
    service = write(tmp_path, "app.service", GOOD_SERVICE.replace(
        "ExecStart=/bin/true", f"ExecStart={ABSENT_BINARIES[0]} 'catalog:refresh' --limit=5"))

    argv = analyzer.exec_argv(service, stubs=ABSENT_BINARIES[:1])

    assert argv == {"ExecStart": [[ABSENT_BINARIES[0], "catalog:refresh", "--limit=5"]]}


@pytest.mark.matrix
def test_exec_argv_refuses_the_ambiguous_dump_of_247(tmp_path):
    old = versioned_analyzer(247)
    if old is None:
        pytest.skip(missing_reason(247))
    service = write(tmp_path, "catalog.service", GOOD_SERVICE)

    with pytest.raises(Unsupported):
        old.exec_argv(service)


# Dump text (quote_command_line() of systemd 252+) -> argv. Control chars come back C-escaped,
# octal for all but \a\b\f\n\r\t\v; UTF-8 is printed raw; '#' and '~' are not special.
@pytest.mark.parametrize(("dump", "argv"), [
    ('/bin/echo plain', ["/bin/echo", "plain"]),
    ('"a b" ""', ["a b", ""]),
    (r'"c\"d" "back\\slash" "\$HOME" "\`q\`"', ['c"d', "back\\slash", "$HOME", "`q`"]),
    (r'"nl\nx" "tab\tx" "\001" "\x01" "\177"', ["nl\nx", "tab\tx", "\x01", "\x01", "\x7f"]),
    ('ü€ #h ~ %', ["ü€", "#h", "~", "%"]),
    ("'a b' c\\ d", ["a b", "c d"]),  # systemd 247 style, best effort
])
def test_split_command_line(dump, argv):
    assert split_command_line(dump) == argv


# ---- calendar, timespan, security --------------------------------------------------------------

def test_calendar_normalizes_and_lists_elapses_from_the_base_time(analyzer):
    result = analyzer.calendar("*:0/20", iterations=3)

    assert result.ok and result.error is None
    assert result.normalized == "*-*-* *:00/20:00"
    assert result.elapses == ["Wed 2025-01-01 00:20:00 UTC", "Wed 2025-01-01 00:40:00 UTC",
                              "Wed 2025-01-01 01:00:00 UTC"]


def test_calendar_in_a_time_zone_is_reported_in_utc(analyzer):
    result = analyzer.calendar("*-*-* 02:30:00 Europe/Berlin", iterations=1)

    assert result.elapses == ["Wed 2025-01-01 01:30:00 UTC"]


def test_calendar_rejects_nonsense(analyzer):
    result = analyzer.calendar("every tuesday-ish")

    assert not result.ok and result.normalized is None and result.elapses == []
    assert "Failed to parse calendar specification" in result.error


@pytest.mark.parametrize(("text", "microseconds"), [
    ("1h 30min", 5_400_000_000),
    ("4min", 240_000_000),
    ("5x", None),
    ("-1s", None),  # passed after "--", so not taken for an option
])
def test_timespan(analyzer, text, microseconds):
    assert analyzer.timespan(text) == microseconds


HARDENED = GOOD_SERVICE + """\
DynamicUser=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
PrivateNetwork=yes
NoNewPrivileges=yes
CapabilityBoundingSet=
RestrictAddressFamilies=AF_UNIX
SystemCallFilter=@system-service
"""


def test_security_scores_hardening_lower(analyzer, tmp_path):
    plain = write(tmp_path / "plain", "catalog.service", GOOD_SERVICE)
    hardened = write(tmp_path / "hardened", "catalog.service", HARDENED)
    if analyzer.version < OFFLINE_SECURITY_SINCE:
        with pytest.raises(Unsupported):
            analyzer.security(plain)
        return

    plain_score, hardened_score = analyzer.security(plain), analyzer.security(hardened)

    # Exact scores shift between releases (252: 9.6, 257: 9.4 for the plain unit).
    assert 9.0 <= plain_score <= 10.0
    assert hardened_score < plain_score - 3


# ---- finding analyzers -------------------------------------------------------------------------

def test_empty_cache_gives_no_analyzer_and_names_the_fetch_script(tmp_path, monkeypatch):
    monkeypatch.setenv("JOBGEN_CACHE", str(tmp_path))

    assert versioned_analyzer(252) is None
    assert cached_majors() == []
    assert "scripts/fetch-systemd-versions" in missing_reason(252)


def test_host_analyzer_reports_its_major_version():
    host = host_analyzer()
    if host is None:
        pytest.skip("no /usr/bin/systemd-analyze: apt-get install systemd")
    assert host.version >= 240
    assert host.calendar("daily").normalized == "*-*-* 00:00:00"
