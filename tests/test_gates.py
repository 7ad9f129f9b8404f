"""Version gates, feature by feature: (manifest feature, target) -> what jobgen does.

  allowed   the directive is written
  fallback  the documented fallback is written, and a note says so
  error     a positioned error names the job, the key and the release needed

Ranges count: a directive is allowed only if every release in the range has it.
"""

from pathlib import Path

import pytest

from jobgen.compiler import pipeline, plan
from jobgen.compiler.diagnostics import ManifestError, Pos
from jobgen.compiler.directive_table import FIRST_RELEASE
from jobgen.compiler.plan import Exec, Raw
from jobgen.compiler.target import VALUE_GATES, parse_target
from support.cli import jobgen

POS = Pos("m.yaml", 1, 1)

JOB = "jobgen: 1\njobs:\n  j:\n    command: [/bin/true]\n    schedule: daily\n"
WORKER = "jobgen: 1\nworkers:\n  w:\n    command: [/bin/true]\n    stop_timeout: 10s\n"

# feature: (manifest, directive line it asks for, file it lands in)
FEATURES = {
    "defer (overlap: skip)": (JOB, "DeferReactivation=yes", "j.timer"),
    "randomized_offset": (JOB + "    randomized_offset: 5min\n", "RandomizedOffsetSec=5min", "j.timer"),
    "fixed_random_delay": (JOB + "    randomized_delay: 1min\n    fixed_random_delay: true\n", "FixedRandomDelay=yes", "j.timer"),
    "on_success": (JOB + "    on_success: ok.service\n", "OnSuccess=ok.service", "j.service"),
    "timezone": (JOB + "    timezone: Europe/Berlin\n", "OnCalendar=*-*-* 00:00:00 Europe/Berlin", "j.timer"),
    "credential": (JOB + "    lock: {scope: cluster, name: x, backend: 'redis://h/0', credential: 'p:/etc/p'}\n",
                   "LoadCredential=p:/etc/p", "j.service"),
    "type: exec": (WORKER, "Type=exec", "w.service"),
    "restart backoff": (WORKER + "    restart_steps: 3\n    restart_max_delay: 1min\n", "RestartSteps=3", "w.service"),
    "hardening strict (ProtectProc)": (JOB + "    hardening: strict\n", "ProtectProc=invisible", "j.service"),
    # Values are gated where they are written, like directives (target.VALUE_GATES):
    "hardening strict (ProtectSystem=strict)": (JOB + "    hardening: strict\n", "ProtectSystem=strict", "j.service"),
    "calendar ~ (from end of month)": (JOB.replace("daily", "'*-*~01'"), "OnCalendar=*-*~01 00:00:00", "j.timer"),
}

CASES = [
    # feature, target, expected
    ("defer (overlap: skip)", "257", "allowed"),
    ("defer (overlap: skip)", ">=257,<262", "allowed"),
    ("defer (overlap: skip)", ">=252", "fallback"),
    ("defer (overlap: skip)", ">=252,<258", "fallback"),
    ("randomized_offset", "258", "allowed"),
    ("randomized_offset", ">=257", "error"),
    ("randomized_offset", "debian-13", "error"),
    ("fixed_random_delay", "247", "allowed"),
    ("fixed_random_delay", "245", "error"),
    ("on_success", "249", "allowed"),
    ("on_success", "ubuntu-22.04", "allowed"),
    ("on_success", ">=247,<250", "error"),
    ("timezone", "235", "allowed"),
    ("timezone", "234", "error"),
    ("credential", "247", "allowed"),
    ("credential", "ubuntu-20.04", "error"),
    ("type: exec", "240", "allowed"),
    ("type: exec", "239", "fallback"),
    ("restart backoff", "254", "allowed"),
    ("restart backoff", ">=252,<258", "fallback"),
    ("hardening strict (ProtectProc)", "247", "allowed"),
    ("hardening strict (ProtectProc)", "245", "fallback"),
    ("hardening strict (ProtectSystem=strict)", "232", "allowed"),
    ("hardening strict (ProtectSystem=strict)", "231", "fallback"),
    ("calendar ~ (from end of month)", "233", "allowed"),
    ("calendar ~ (from end of month)", "230", "error"),
]


def outcome(feature: str, target: str) -> str:
    text, line, filename = FEATURES[feature]
    try:
        result = pipeline.build("m.yaml", parse_target(target), text=text)
    except ManifestError as exc:
        (error,) = [d for d in exc.diagnostics if d.severity == "error"]
        assert error.message.startswith(("job 'j': ", "worker 'w': ")) and "needs systemd >=" in error.message
        return "error"
    unit = result.files[filename].decode()
    if line in unit.splitlines():
        return "allowed"
    assert any(d.severity == "note" for d in result.diagnostics), "a fallback must be reported"
    return "fallback"


@pytest.mark.parametrize("feature,target,expected", CASES, ids=[f"{f}@{t}" for f, t, _ in CASES])
def test_gate(feature: str, target: str, expected: str) -> None:
    assert outcome(feature, target) == expected


# --------------------------------------------------------------------------- value gates
# Every row of target.VALUE_GATES is asked by plan._Unit.set, the single point where a
# directive is written: one value per row that meets it (and what the unit set before).

VALUE_SAMPLES = {
    ("Service", "Type", "exec"): [Raw("exec")],
    ("Service", "Restart", "on-failure with Type=oneshot"): [("Service", "Type", Raw("oneshot")), Raw("on-failure")],
    ("Service", "KillMode", "mixed"): [Raw("mixed")],
    ("Service", "ExecStart", "prefix +"): [Exec(("/bin/true",), "+")],
    ("Service", "ExecStart", "prefix !"): [Exec(("/bin/true",), "!")],
    ("Service", "ExecStart", "prefix !!"): [Exec(("/bin/true",), "!!")],
    ("Service", "ExecStart", "prefix :"): [Exec(("/bin/true",), ":")],
    ("Service", "ExecStart", "prefix |"): [Exec(("/bin/true",), "|")],
    ("Service", "ProtectSystem", "strict"): [Raw("strict")],
    ("Service", "ProtectHome", "tmpfs"): [Raw("tmpfs")],
    ("Service", "PrivateTmp", "disconnected"): [Raw("disconnected")],
    ("Service", "PrivateUsers", "self"): [Raw("self")],
    ("Service", "ProtectControlGroups", "strict"): [Raw("strict")],
    ("Timer", "OnCalendar", "time zone"): [Raw("*-*-* 02:00:00 Europe/Berlin")],
    ("Timer", "OnCalendar", "~ (from end of month)"): [Raw("*-*~01 00:00:00")],
}


def set_through_unit(target: str, gate) -> tuple[list, list]:
    """Set the sample through _Unit.set; return what the unit holds and the diagnostics."""
    ctx = plan._Context(parse_target(target), plan.DEFAULT_HOLDER, POS)
    ctx.what = "job 'j'"
    unit = plan._Unit(ctx, "j.service", "service")
    *before, value = VALUE_SAMPLES[(gate.section, gate.directive, gate.value)]
    for section, key, earlier in before:
        unit.set(section, key, earlier)
    unit.set(gate.section, gate.directive, value, POS, "feature")
    return unit.sections.get(gate.section, []), ctx.diags + ctx.notes()


@pytest.mark.parametrize("gate", VALUE_GATES, ids=lambda g: f"{g.directive}={g.value}@{g.since}")
def test_every_value_gate_is_asked_by_set(gate) -> None:
    *_, sample = VALUE_SAMPLES[(gate.section, gate.directive, gate.value)]
    rows, diags = set_through_unit(str(gate.since), gate)
    assert (gate.directive, sample) in rows and diags == [], "allowed from its first release"
    if gate.since == FIRST_RELEASE:
        return  # no older release in the table to be refused on
    rows, diags = set_through_unit(str(gate.since - 1), gate)
    assert (gate.directive, sample) not in rows, "the value was written although the target lacks it"
    (diag,) = diags
    assert f"{gate.directive}={gate.value} needs systemd >= {gate.since}; target is {gate.since - 1}" in diag.message
    fallback = plan.VALUE_FALLBACKS.get((gate.section, gate.directive, gate.value))
    if fallback is None:
        assert diag.severity == "error" and diag.message.startswith("job 'j': 'feature' ")
    else:
        assert diag.severity == "note" and (gate.directive, Raw(fallback)) in rows


def test_values_are_gated_only_in_set() -> None:
    """No call site outside _Unit.set can write a value past its gate, or ask on its own."""
    source = Path(plan.__file__).read_text()
    assert "lacking_value(" not in source
    assert source.count("lacking_values(") == 1
    assert source.count(".sections.setdefault(") == 1  # the one place a directive is stored


VALUE_GATE_ERRORS = [
    # (target, manifest lines, the one error)
    ("230", "    schedule: '*-*~01'\n",
     "m.yaml:4:5: error: job 'j': 'schedule' OnCalendar=~ (from end of month) needs systemd >= 233; target is 230"),
    ("234", "    schedule: daily\n    timezone: Europe/Berlin\n",
     "m.yaml:5:5: error: job 'j': 'timezone' OnCalendar=time zone needs systemd >= 235; target is 234"),
]


@pytest.mark.parametrize("target, lines, message", VALUE_GATE_ERRORS)
def test_value_gate_errors_are_positioned(target: str, lines: str, message: str) -> None:
    text = "jobgen: 1\njobs:\n  j:\n" + lines + "    command: [/bin/true]\n"
    with pytest.raises(ManifestError) as exc:
        pipeline.build("m.yaml", parse_target(target), text=text)
    assert [str(d) for d in exc.value.diagnostics if d.severity == "error"] == [message]


def test_strict_hardening_on_231_falls_back_to_protect_system_full() -> None:
    result = pipeline.build("m.yaml", parse_target("231"), text=JOB + "    hardening: strict\n")
    service = result.files["j.service"].decode().splitlines()
    assert "ProtectSystem=full" in service and "ProtectSystem=strict" not in service
    assert not any(line.startswith("ReadWritePaths=") for line in service)  # only strict needs them
    assert "m.yaml:6:5: note: ProtectSystem=strict needs systemd >= 232; target is 231: ProtectSystem=full" in [
        str(d) for d in result.diagnostics
    ]


def test_one_note_per_fallback_per_manifest(tmp_path: Path) -> None:
    """1,000 skip jobs on 252 share one fallback (the DeferReactivation emulation): one line."""
    jobs = "".join(f"  j{i:04}:\n    command: [/bin/true]\n    schedule: daily\n" for i in range(1000))
    manifest = tmp_path / "many.yaml"
    manifest.write_text("jobgen: 1\ntarget: {systemd: '252'}\njobs:\n" + jobs)
    result = jobgen("check", str(manifest))
    assert result.returncode == 0, result.stderr
    notes = [line for line in (result.stdout + result.stderr).splitlines() if ": note: " in line]
    assert notes == [
        f"{manifest}:4:3: note: DeferReactivation= needs systemd >= 257; target is 252: "
        "emulated with ExecCondition= (README: Overrun) (and 999 more in this manifest)"
    ]


# --------------------------------------------------------------------------- blocks asked once
# The hardening profile's gates are asked once per target (plan._block) and the answer is
# written into every job's unit: it must be exactly what set, row by row, writes and notes.


def _row_by_row(target: str, rows) -> tuple[list, list[str]]:
    ctx = plan._Context(parse_target(target), plan.DEFAULT_HOLDER, POS)
    unit = plan._Unit(ctx, "j.service", "service")
    for section, key, value in rows:
        unit.set(section, key, value, POS)
    assert ctx.diags == []
    return unit.sections.get("Service", []), [d.message for d in ctx.notes()]


@pytest.mark.parametrize("target", [str(FIRST_RELEASE), "231", "239", "245", "247", "252", "257", ">=252", "debian-12"])
@pytest.mark.parametrize("profile", ["none", "default", "strict"])
def test_a_hardening_block_is_what_set_writes_row_by_row(target, profile) -> None:
    rows = plan._hardening_rows(profile)
    block = plan._block(parse_target(target), rows)
    ctx = plan._Context(parse_target(target), plan.DEFAULT_HOLDER, POS)
    unit = plan._Unit(ctx, "j.service", "service")
    unit.set_block(block, POS)
    assert (unit.sections.get("Service", []), [d.message for d in ctx.notes()]) == _row_by_row(target, rows)


def test_old_targets_get_the_strict_profile_with_fallbacks_noted_once_per_manifest(tmp_path) -> None:
    # 231 lacks ProtectSystem=strict (232) and many strict directives: each is left out
    # with one note for the manifest, however many jobs ask, at the first job's key.
    jobs = "".join(f"  j{i}:\n    command: [/bin/true]\n    schedule: daily\n    hardening: strict\n" for i in range(3))
    path = tmp_path / "m.yaml"
    path.write_text(f"jobgen: 1\ntarget: {{systemd: '231'}}\njobs:\n{jobs}")
    result = pipeline.build(str(path))
    notes = [d.message for d in result.diagnostics]
    assert "ProtectSystem=strict needs systemd >= 232; target is 231: ProtectSystem=full (and 2 more in this manifest)" in notes
    assert {str(d.pos) for d in result.diagnostics if "ProtectSystem" in d.message} == {f"{path}:7:5"}  # the first job's hardening key
    services = [f for name, f in result.files.items() if name.endswith(".service")]
    assert len(services) == 3 and all(b"ProtectSystem=full\n" in f and b"ProtectSystem=strict" not in f for f in services)


def test_a_block_notes_a_fallback_as_often_as_set_does() -> None:
    # Two rows of one directive the target lacks: two notes of it, as row by row.
    rows = (("Service", "ProtectProc", Raw("invisible")), ("Service", "ProtectProc", Raw("noaccess")))
    block = plan._block(parse_target("245"), rows)
    assert block.rows == () and len(block.notes) == 2
    ctx = plan._Context(parse_target("245"), plan.DEFAULT_HOLDER, POS)
    plan._Unit(ctx, "j.service", "service").set_block(block, POS)
    assert [d.message for d in ctx.notes()] == _row_by_row("245", rows)[1]
    assert ctx.notes()[0].message.endswith("(and 1 more in this manifest)")


def test_a_block_whose_answer_depends_on_the_unit_or_names_the_job_is_asked_per_unit() -> None:
    # Restart='s gate reads the unit's Type= (VALUE_MATCHERS "restart of a oneshot"), and
    # an error names the job: neither can be worked out once for every unit.
    assert plan._block(parse_target("243"), (("Service", "Restart", Raw("on-failure")),)) is None
    assert plan._block(parse_target("257"), (("Service", "ExecStart", Exec(("/bin/true",), "|")),)) is None
    # Where the target has no such gate left, the same rows are one block.
    assert plan._block(parse_target("252"), (("Service", "Restart", Raw("on-failure")),)).rows == (("Service", "Restart", Raw("on-failure")),)
