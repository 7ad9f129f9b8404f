"""`mail_on_failure: ADDRESS`: OnFailure= to jobgen's mail template, and what the template runs.

The rendered units are the golden case tests/cases/mail-on-failure.yaml (judged by real
systemd-analyze in tests/test_verify.py); a bad address is tests/errors/mail-on-failure-*.yaml.
Here: the instance escaping against the real systemd-escape, the template's command as real
systemd parses it (%I resolved) run against a sendmail that keeps what it is given, and the
line it logs when the host has none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from jobgen.compiler import load, notify, pipeline, validate
from jobgen.compiler.diagnostics import ManifestError
from jobgen.compiler.target import parse_target
from support.sdanalyze import missing_reason, versioned_analyzer
from support.cli import Ran, jobgen

UNIT = "nightly-backup.service"
ADDRESS = "ops@example.com"


@pytest.mark.parametrize("text", [f"{UNIT}:{ADDRESS}", "a.b:c_d-e/f", ".hidden:x", "é:root", "x y:z"])
def test_the_instance_is_escaped_as_systemd_escape_does(text):
    real = subprocess.run(["systemd-escape", "--", text], capture_output=True, text=True, check=True).stdout.strip()
    assert notify.unit_escape(text) == real


def test_the_instance_unescapes_to_unit_and_address():
    mail = notify.mail_unit(UNIT, ADDRESS)
    assert mail == "jobgen-mail@nightly\\x2dbackup.service:ops\\x40example.com.service"
    instance = mail.removeprefix("jobgen-mail@").removesuffix(".service")
    real = subprocess.run(["systemd-escape", "--unescape", "--", instance], capture_output=True, text=True, check=True)
    assert real.stdout.strip() == f"{UNIT}:{ADDRESS}"


@pytest.mark.parametrize("address", ["ops@example.com", "root", "first.last+cron@mail.example.org"])
def test_addresses_jobgen_mails_to(address):
    assert notify.address_problem(address) is None


@pytest.mark.parametrize("address", [
    "-oQ/tmp@x",              # an option to sendmail
    "a@b,c@d",                # cron's list: one address per job
    "ops@example.com\nBcc: x",  # a header
    "100%@x",                 # a unit specifier
    "ops@-bad.example",
    "",
])  # fmt: skip
def test_addresses_jobgen_refuses(address):
    assert notify.address_problem(address) == f"'{address}' is not {notify.ADDRESS_RULE}"


def _build(tmp_path: Path, job: str, name: str = "nightly-backup") -> dict[str, bytes]:
    path = tmp_path / "app.yaml"
    path.write_text("jobgen: 1\ntarget: {systemd: '252'}\njobs:\n" + f"  {name}:\n" + textwrap.indent(textwrap.dedent(job), "    "))
    return pipeline.build(str(path), parse_target("252")).files


def test_the_template_is_written_once_and_only_when_a_job_mails(tmp_path):
    files = _build(tmp_path, f"command: [/bin/true]\nschedule: daily\nmail_on_failure: {ADDRESS}\n")
    assert notify.MAIL_TEMPLATE in files
    assert f"OnFailure={notify.mail_unit(UNIT, ADDRESS)}\n" in files[UNIT].decode()
    assert notify.MAIL_TEMPLATE not in _build(tmp_path, "command: [/bin/true]\nschedule: daily\n")


def test_a_unit_name_systemd_would_refuse_is_an_error(tmp_path):
    name = "j" * 200
    with pytest.raises(ManifestError) as exc:
        _build(tmp_path, f"command: [/bin/true]\nschedule: daily\nmail_on_failure: {'a' * 40}@example.com\n", name)
    [d] = [d for d in exc.value.diagnostics if d.severity == "error"]
    assert d.message.startswith(f"job '{name}': 'mail_on_failure': the unit that mails the failure, jobgen-mail@{name}.service:")
    assert d.message.endswith("would be 284 characters; systemd refuses unit names over 255 (shorten the job name or the address)")


# ----------------------------------------------------------------------------- the template's command


def _fake(bin_dir: Path, name: str, body: str) -> None:
    (bin_dir / name).write_text("#!/bin/sh\n" + body)
    (bin_dir / name).chmod(0o755)


def _mail_command(tmp_path: Path, release: int) -> list[str]:
    """The template's ExecStart, for this job's instance, as that systemd release parses it."""
    analyzer = versioned_analyzer(release)
    if analyzer is None:
        pytest.skip(missing_reason(release))
    files = _build(tmp_path, f"command: [/bin/true]\nschedule: daily\nmail_on_failure: {ADDRESS}\n")
    units = tmp_path / "units"
    units.mkdir()
    # systemd-analyze verify cannot take a unit file whose name holds ':' ("Couldn't process
    # aliases"); an instance named 'x' shows where %I lands, and the instance's unescaping is
    # systemd-escape's (test_the_instance_unescapes_to_unit_and_address).
    instance = units / notify.MAIL_TEMPLATE.replace("@", "@x")
    instance.write_bytes(files[notify.MAIL_TEMPLATE])
    [argv] = analyzer.exec_argv(instance)["ExecStart"]
    assert argv[-1] == "x"  # %I: one argument, never shell text
    argv = [w.replace("$$", "$") for w in argv]  # the dump shows '$' as '$$' (tests/test_escape.py)
    return [*argv[:-1], f"{UNIT}:{ADDRESS}"]


@pytest.mark.parametrize("release", [252, 257])
def test_the_template_mails_status_and_journal_through_sendmail(tmp_path, release):
    argv = _mail_command(tmp_path, release)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "mail"
    _fake(bin_dir, "sendmail", f'echo "argv: $*" > {out}; cat >> {out}\n')
    _fake(bin_dir, "systemctl", 'echo "systemctl $*"\n')
    _fake(bin_dir, "journalctl", 'echo "journalctl $*"\n')
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stderr) == (0, "")
    host = os.uname().nodename
    assert out.read_text() == (
        f"argv: -i {ADDRESS}\n"
        f"To: {ADDRESS}\n"
        f"Subject: jobgen: {UNIT} failed on {host}\n"
        "\n"
        f"systemctl status --no-pager --full --lines=0 -- {UNIT}\n"
        "\n"
        f"journalctl --no-pager --lines=50 --unit={UNIT}\n"
    )


@pytest.mark.parametrize("release", [252, 257])
def test_without_sendmail_the_template_logs_one_line_and_succeeds(tmp_path, release):
    argv = _mail_command(tmp_path, release)
    empty = tmp_path / "bin"
    empty.mkdir()
    for tool in ("uname",):
        os.symlink(shutil.which(tool), empty / tool)
    r = subprocess.run(argv, env={"PATH": str(empty)}, capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout) == (0, "")
    assert r.stderr == f"jobgen-mail: {UNIT} failed; no sendmail on this host, so no mail to {ADDRESS}\n"


def test_the_key_is_for_jobs_and_validated_where_it_is_written(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("jobgen: 1\njobs:\n  j: {command: [/bin/true], schedule: daily, mail_on_failure: 'a@b,c@d'}\n")
    with pytest.raises(ManifestError) as exc:
        validate.validate(load.load_file(str(path)), str(path))
    assert [str(d) for d in exc.value.diagnostics] == [
        f"{path}:3:63: error: job 'j': 'mail_on_failure': 'a@b,c@d' is not {notify.ADDRESS_RULE}"]


def test_a_queue_jobs_drainer_mails_under_its_own_name(tmp_path):
    files = _build(tmp_path, "command: [/bin/true]\nschedule: daily\noverlap: queue\nlock: {scope: host}\nmail_on_failure: root\n", "imp")
    on_failure = {name: [line for line in data.decode().splitlines() if line.startswith("OnFailure=")]
                  for name, data in files.items() if name.endswith(".service") and "@" not in name}
    assert on_failure == {
        "imp.service": [f"OnFailure={notify.mail_unit('imp.service', 'root')}"],
        "imp-drain.service": [f"OnFailure={notify.mail_unit('imp-drain.service', 'root')}"],
    }


def test_the_generator_takes_the_shared_template_from_every_manifest(tmp_path):
    # Two manifests in /etc/jobgen that both mail: one template unit, neither manifest refused.
    from jobgen.host import generator

    for name in ("a", "b"):
        (tmp_path / f"{name}.yaml").write_text(
            f"jobgen: 1\ntarget: {{systemd: '252'}}\njobs:\n  {name}-job: {{command: [/bin/true], schedule: daily, mail_on_failure: root}}\n")
    outcome = generator.generate(sorted(tmp_path.glob("*.yaml")), str(tmp_path / "out"), 252)
    assert outcome.skipped == [] and [d for d in outcome.diagnostics if d.severity == "error"] == []
    assert notify.MAIL_TEMPLATE in outcome.files
    assert {"a-job.service", "b-job.service"} <= set(outcome.files)


@pytest.mark.parametrize("layout", ["flat", "etc", "usr", "debian"])
def test_every_layout_places_the_template(tmp_path, layout):
    from jobgen.compiler import layout as layouts

    files = _build(tmp_path, "command: [/bin/true]\nschedule: daily\nmail_on_failure: root\n")
    package = "shopjobs" if layout == "debian" else None
    placed = layouts.arrange(layouts.LAYOUTS[layout], files, package)
    [template] = [p for p in placed if p.endswith(notify.MAIL_TEMPLATE)]
    assert template == layouts.place(layouts.LAYOUTS[layout], notify.MAIL_TEMPLATE, package)
    if layout == "debian":  # installed, never enabled or started (a template)
        assert b"\tdh_installsystemd -pshopjobs --name=jobgen-mail@\n" in placed["jobgen.mk"]


def _apply(manifest: Path, root: Path) -> Ran:
    return jobgen("apply", str(manifest), "--root", str(root))


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="needs systemctl (systemd package) for --root")
def test_apply_shares_the_template_between_manifests_and_never_removes_it(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    job = "jobgen: 1\ntarget: {{systemd: '252'}}\njobs:\n  {name}: {{command: [/bin/true], schedule: daily{mail}}}\n"
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(job.format(name="a-job", mail=", mail_on_failure: root"))
    b.write_text(job.format(name="b-job", mail=", mail_on_failure: ops@example.com"))
    template = root / "etc/systemd/system" / notify.MAIL_TEMPLATE
    assert _apply(a, root).returncode == 0
    written = template.read_bytes()
    r = _apply(b, root)  # the same template from another manifest: not another manifest's file
    assert r.returncode == 0, r.stderr
    assert template.read_bytes() == written
    # a stops mailing: a's apply leaves the template that b's job still names.
    a.write_text(job.format(name="a-job", mail=""))
    assert _apply(a, root).returncode == 0
    assert template.read_bytes() == written
    assert "OnFailure=" not in (root / "etc/systemd/system/a-job.service").read_text()
