"""The Ansible module jobgen.jobgen.jobgen_apply, run by real ansible-playbook (ansible-core
from PyPI) against localhost into a temporary image root (`root:` -> `jobgen apply --root`).

One playbook, three runs, as an operator would: `--check --diff` shows the change and changes
nothing; the real run changes; the same run again reports changed=false (no changed_when).
The module's return is read back from a debug task that prints it as JSON.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLECTIONS = ROOT / "ansible"
EXAMPLES = ROOT / "ansible" / "examples"

MANIFEST = """\
jobgen: 1
target:
  systemd: "252"
jobs:
  backup:
    command: [/usr/bin/true]
    schedule: daily
"""

PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: jobs installed into the image root
      jobgen.jobgen.jobgen_apply:
        manifests: ["{{ manifest }}"]
        root: "{{ image_root }}"
EXTRA
      register: jobs
    - name: the module's return, for the test to read
      ansible.builtin.debug:
        msg: "{{ RESULT_MARK }}{{ jobs | to_json }}"
"""
RESULT_MARK = "JOBGEN-RESULT:"


@pytest.fixture
def play(tmp_path: Path):
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text(MANIFEST)
    playbook = tmp_path / "play.yml"
    image = tmp_path / "image"
    image.mkdir()

    def run(*flags: str, args: str = "", manifest: Path | str = manifest, path: str = "") -> tuple[subprocess.CompletedProcess, dict]:
        """ansible-playbook with `flags`; `args`: more module arguments (YAML lines); `path`: before PATH."""
        playbook.write_text(PLAYBOOK.replace("EXTRA\n", "".join(f"        {line}\n" for line in args.splitlines())))
        env = {
            **os.environ,
            # jobgen on the managed host (here: this virtualenv's)
            "PATH": f"{path}{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        }
        argv = [
            Path(sys.executable).parent / "ansible-playbook", "-i", "localhost,", "-c", "local",
            "-e", f"ansible_python_interpreter={sys.executable}",
            "-e", f"manifest={manifest}", "-e", f"image_root={image}", "-e", f"RESULT_MARK={RESULT_MARK}",
            *flags, str(playbook),
        ]  # fmt: skip
        r = subprocess.run([str(a) for a in argv], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        return r, module_result(r.stdout)

    return run, image


def module_result(stdout: str) -> dict:
    """The registered result, from the debug task's `"msg": "JOBGEN-RESULT:{...}"` line."""
    for line in stdout.splitlines():
        if f'"msg": "{RESULT_MARK}' in line:
            return json.loads(json.loads("{" + line.strip() + "}")["msg"][len(RESULT_MARK):])
    return {}


def failure(stdout: str) -> dict:
    """The failed task's result, from Ansible's `fatal: [localhost]: FAILED! => {...}` line."""
    m = re.search(r"^fatal: \[localhost\]: FAILED! => (\{.*\})$", stdout, re.M)
    assert m, stdout
    return json.loads(m.group(1))


def recap(stdout: str) -> dict[str, int]:
    m = re.search(r"^localhost\s+:\s+(.*)$", stdout, re.M)
    assert m, stdout
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))}


def tree_of(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_check_diff_then_apply_then_nothing_to_do(play) -> None:
    run, image = play

    checked, result = run("--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert recap(checked.stdout)["changed"] == 1
    assert result["changed"] is True
    assert {f["action"] for f in result["files"]} == {"create"}
    assert any(f["path"].endswith("etc/systemd/system/backup.timer") for f in result["files"])
    # the enablement it would do, as `systemctl --root=IMAGE enable` does it
    assert [a["argv"][-2:] for a in result["actions"]] == [["enable", "backup.timer"]], result["actions"]
    assert "+[Timer]" in checked.stdout  # the diff of backup.timer, shown by --diff
    assert tree_of(image) == []  # check mode changed nothing

    applied, result = run()
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert recap(applied.stdout)["changed"] == 1
    assert (image / "etc/systemd/system/backup.timer").is_file()
    # enabled the way `systemctl --root enable` does: the [Install] symlink inside the root
    assert (image / "etc/systemd/system/timers.target.wants/backup.timer").is_symlink()
    assert result["ansible_facts"]["jobgen_apply"]["files"] == result["files"]
    installed = tree_of(image)

    again, result = run()
    assert again.returncode == 0, again.stdout + again.stderr
    assert recap(again.stdout)["changed"] == 0
    assert result["changed"] is False and result["actions"] == []
    assert {f["action"] for f in result["files"]} == {"identical"}
    assert tree_of(image) == installed


def test_diff_mode_alone_applies_and_shows_the_diff(play) -> None:
    """In Ansible, diff mode only shows; check mode decides. --diff without --check applies."""
    run, image = play
    applied, result = run("--diff")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert recap(applied.stdout)["changed"] == 1
    assert "+[Timer]" in applied.stdout  # the diff of backup.timer, shown by Ansible
    assert "+++ b/etc/systemd/system/backup.timer" in result["diff"]["prepared"]
    assert (image / "etc/systemd/system/backup.timer").is_file()
    assert (image / "etc/systemd/system/timers.target.wants/backup.timer").is_symlink()
    assert {f["action"] for f in result["files"]} == {"create"}

    again, result = run("--diff")
    assert again.returncode == 0, again.stdout + again.stderr
    assert recap(again.stdout)["changed"] == 0
    assert "diff" not in result and {f["action"] for f in result["files"]} == {"identical"}


def test_invalid_manifest_fails_the_task_with_its_position(play, tmp_path: Path) -> None:
    run, image = play
    (tmp_path / "jobs.yaml").write_text(MANIFEST.replace("schedule:", "schedul:"))
    failed, result = run()
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert recap(failed.stdout)["failed"] == 1
    assert f"{tmp_path / 'jobs.yaml'}:7:5: error: job 'backup': unknown key 'schedul'; did you mean 'schedule'?" in failed.stdout
    assert tree_of(image) == []


def test_a_unit_jobgen_did_not_write_fails_the_task_and_stays(play) -> None:
    run, image = play
    hand_written = image / "etc/systemd/system/backup.service"
    hand_written.parent.mkdir(parents=True)
    hand_written.write_text("[Service]\nExecStart=/bin/true\n")
    failed, result = run()
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert recap(failed.stdout)["failed"] == 1
    assert failure(failed.stdout)["msg"].startswith(
        "jobgen apply exited 4: not root, no running systemd, or a file jobgen did not write; nothing changed\n"
    )
    assert "etc/systemd/system/backup.service exists and jobgen did not write it" in failed.stdout
    assert hand_written.read_text() == "[Service]\nExecStart=/bin/true\n"
    assert tree_of(image) == ["etc", "etc/systemd", "etc/systemd/system", "etc/systemd/system/backup.service"]


def test_a_failed_systemctl_call_fails_the_task_in_jobgen_s_words(play, tmp_path: Path) -> None:
    """What an exit code means is jobgen's answer (`outcome`), relayed, not a table of the module's."""
    run, image = play
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text("#!/bin/sh\necho 'Failed to enable unit: Access denied' >&2\nexit 1\n")
    (fake / "systemctl").chmod(0o755)
    failed, result = run(path=f"{fake}:")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert recap(failed.stdout)["failed"] == 1
    answer = failure(failed.stdout)
    assert answer["msg"].splitlines()[0] == "jobgen apply exited 3: applied, but a unit failed to start or stop (named)"
    assert answer["msg"].splitlines()[-1] == (
        f"`systemctl --root={image} enable backup.timer` failed (new timer): Failed to enable unit: Access denied"
    )
    assert answer["changed"] is True and answer["exit_status"] == 3
    assert (image / "etc/systemd/system/backup.timer").is_file()


def test_an_executable_given_by_name_is_found_on_path(play) -> None:
    run, image = play
    applied, result = run(args="executable: jobgen")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert result["cmd"][0] == str(Path(sys.executable).parent / "jobgen")


def test_stop_timeout_takes_seconds_with_a_fraction_as_jobgen_does(play) -> None:
    run, image = play
    applied, result = run(args="stop_timeout: 0.5")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert result["cmd"][result["cmd"].index("--stop-timeout") + 1] == "0.5"
    assert (image / "etc/systemd/system/backup.timer").is_file()


def test_example_playbook_is_valid() -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_NOCOLOR": "1"}
    for playbook in sorted(EXAMPLES.glob("*.yml")):
        r = subprocess.run(
            [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i", "localhost,", str(playbook)],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr


def test_module_documentation_is_what_ansible_doc_reads() -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_NOCOLOR": "1"}
    r = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "--json", "jobgen.jobgen.jobgen_apply"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)["jobgen.jobgen.jobgen_apply"]["doc"]
    assert set(doc["options"]) == {"manifests", "root", "layout", "restart", "stop_timeout", "systemd", "executable"}
    assert doc["attributes"]["check_mode"]["support"] == doc["attributes"]["diff_mode"]["support"] == "full"


def test_a_usage_error_of_jobgen_is_in_the_message(play) -> None:
    """jobgen answers a run that never got to apply (usage, a bad --systemd) with one `error`."""
    run, image = play
    failed, result = run(args="systemd: banana")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert recap(failed.stdout)["failed"] == 1
    assert "\n--systemd banana: unknown systemd target 'banana'; expected a version like '252'" in failure(failed.stdout)["msg"]
    assert tree_of(image) == []


def test_a_warning_of_jobgen_is_shown_to_the_operator(play, tmp_path: Path) -> None:
    run, image = play
    (tmp_path / "jobs.yaml").write_text(MANIFEST + "    environment:\n      DB_PASSWORD: hunter2\n")
    applied, result = run()
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (
        f"[WARNING]: {tmp_path / 'jobs.yaml'}:9:7: warning: job 'backup': 'environment': DB_PASSWORD looks like a secret"
        in applied.stdout + applied.stderr
    )
    assert "hunter2" not in applied.stdout + applied.stderr


def test_a_manifest_whose_path_starts_with_a_dash_is_a_manifest(play, tmp_path: Path) -> None:
    run, image = play
    (tmp_path / "jobs.yaml").rename(tmp_path / "-jobs.yaml")
    applied, result = run(manifest="-jobs.yaml")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert result["cmd"][-2:] == ["--", "-jobs.yaml"]
    assert (image / "etc/systemd/system/backup.timer").is_file()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("[]", "jobgen apply printed a JSON array, not the object of format 1 this module reads (exit 0)"),
        ("null", "jobgen apply printed a JSON null, not the object of format 1 this module reads (exit 0)"),
        ('{"format": 1, "diagnostics": 5}', "jobgen apply printed 'diagnostics' as a JSON number, not an array (exit 0)"),
        ('{"format": 1, "files": ["x"]}', "jobgen apply printed 'files' with an item that is not an object (exit 0)"),
    ],
)
def test_another_jobgen_answer_is_named_not_a_module_crash(play, tmp_path: Path, answer: str, message: str) -> None:
    """A jobgen other than the one the module reads (older, newer, a wrapper) on the host."""
    run, image = play
    other = tmp_path / "other-jobgen"
    other.write_text(f"#!/bin/sh\ncat <<'EOF'\n{answer}\nEOF\n")
    other.chmod(0o755)
    failed, result = run(args=f"executable: {other}")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert f'"msg": "{message}"' in failed.stdout
    assert "Traceback" not in failed.stdout + failed.stderr


def test_a_missing_executable_is_named(play, tmp_path: Path) -> None:
    run, image = play
    failed, result = run(args=f"executable: {tmp_path / 'no-jobgen'}")
    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert f"executable {tmp_path / 'no-jobgen'}: no such executable file on the managed host (jobgen must be installed there)" in failed.stdout
    assert tree_of(image) == []
