"""`jobgen apply` without a running systemd: into an image root (--root, real `systemctl
--root`), the refusals, and the order of the calls the pure planner chooses. The same
command on a booted systemd 252 and 257 is in tests/e2e/test_apply.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobgen.compiler import header, layout
from jobgen.host import apply as host
from support.cli import jobgen

V1 = """\
jobgen: 1
target: {systemd: 252}
jobs:
  tick:
    command: [/bin/true]
    schedule: hourly
  tock:
    command: [/bin/true]
    schedule: daily
workers:
  queue:
    command: [/bin/sleep, infinity]
    stop_timeout: 5s
    instances: 2
"""
V2 = V1.replace("  tock:\n    command: [/bin/true]\n    schedule: daily\n", "")  # tock removed

needs_systemctl = pytest.mark.skipif(subprocess.run(["which", "systemctl"], capture_output=True).returncode != 0, reason="needs systemctl (systemd package) for --root")


def apply_json(manifest: Path, root: Path, *extra: str, env: dict | None = None) -> tuple[int, dict]:
    r = jobgen("apply", str(manifest), "--root", str(root), "--format", "json", *extra, env=env)
    return r.returncode, json.loads(r.stdout)


def snapshot(root: Path) -> dict[str, str]:
    """Every file and link under root: content or link target."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_text()
    return out


@pytest.fixture
def shop(tmp_path) -> Path:
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "shop.yaml"
    path.write_text(V1)
    (tmp_path / "root").mkdir()
    return path


@needs_systemctl
def test_root_apply_writes_enables_by_links_and_a_second_apply_does_nothing(shop, tmp_path):
    root = tmp_path / "root"
    code, doc = apply_json(shop, root)
    assert code == 0 and doc["ok"] and doc["changed"], doc
    units = root / "etc/systemd/system"
    assert {f["path"]: f["action"] for f in doc["files"]} == {
        f"{units}/queue.target": "create",
        f"{units}/queue@.service": "create",
        f"{units}/tick.service": "create",
        f"{units}/tick.timer": "create",
        f"{units}/tock.service": "create",
        f"{units}/tock.timer": "create",
        f"{root}/etc/tmpfiles.d/jobgen-shop.conf": "create",
    }
    assert [a["argv"] for a in doc["actions"]] == [
        ["systemctl", f"--root={root}", "enable", "queue.target"],
        ["systemctl", f"--root={root}", "enable", "tick.timer"],
        ["systemctl", f"--root={root}", "enable", "tock.timer"],
    ]
    # What `systemctl enable` makes on a booted host: the [Install] WantedBy= links.
    assert os.readlink(units / "timers.target.wants/tick.timer") == "/etc/systemd/system/tick.timer"
    assert os.readlink(units / "multi-user.target.wants/queue.target") == "/etc/systemd/system/queue.target"

    before = snapshot(root)
    code, again = apply_json(shop, root)
    assert (code, again["changed"], again["actions"]) == (0, False, [])
    assert {f["action"] for f in again["files"]} == {"identical"}
    assert snapshot(root) == before


@needs_systemctl
def test_check_and_diff_list_everything_and_change_nothing(shop, tmp_path):
    root = tmp_path / "root"
    code, doc = apply_json(shop, root, "--check", "--diff")
    assert code == 1 and doc["check"] and doc["changed"]
    assert "+++ b/etc/systemd/system/tick.timer\n" in doc["diff"] and "+OnCalendar=*-*-* *:00:00\n" in doc["diff"]
    assert any(a["argv"][-2:] == ["enable", "tick.timer"] for a in doc["actions"])
    assert snapshot(root) == {}


@needs_systemctl
def test_a_removed_job_is_disabled_before_its_files_go(shop, tmp_path):
    root = tmp_path / "root"
    assert apply_json(shop, root)[0] == 0
    shop.write_text(V2)
    code, doc = apply_json(shop, root)
    assert code == 0, doc
    removed = sorted(Path(f["path"]).name for f in doc["files"] if f["action"] == "remove")
    assert removed == ["tock.service", "tock.timer"]
    assert [a["argv"] for a in doc["actions"]] == [["systemctl", f"--root={root}", "disable", "tock.timer"]]
    assert not os.path.lexists(root / "etc/systemd/system/timers.target.wants/tock.timer")
    assert os.path.lexists(root / "etc/systemd/system/timers.target.wants/tick.timer")


@needs_systemctl
def test_usr_layout_installs_vendor_units(shop, tmp_path):
    root = tmp_path / "root"
    code, doc = apply_json(shop, root, "--layout", "usr")
    assert code == 0, doc
    assert (root / "usr/lib/systemd/system/tick.timer").is_file()
    assert (root / "usr/lib/tmpfiles.d/jobgen-shop.conf").is_file()
    assert os.readlink(root / "etc/systemd/system/timers.target.wants/tick.timer") == "/usr/lib/systemd/system/tick.timer"


@pytest.mark.parametrize(
    "existing, why",
    [
        ("[Unit]\nDescription=the administrator's own tick\n", "exists and jobgen did not write it"),
        ("# Generated by jobgen from other.yaml. Do not edit: change the manifest and re-run\n", "exists and jobgen wrote it from other.yaml, not shop.yaml"),
    ],
)
def test_a_file_jobgen_did_not_write_is_never_overwritten(shop, tmp_path, existing, why):
    root = tmp_path / "root"
    theirs = root / "etc/systemd/system/tick.timer"
    theirs.parent.mkdir(parents=True)
    theirs.write_text(existing)
    code, doc = apply_json(shop, root)
    assert (code, doc["ok"]) == (4, False)
    assert doc["errors"] == [f"{theirs} {why}: move it away or rename the job", "nothing changed"]
    assert snapshot(root) == {"etc/systemd/system/tick.timer": existing}


def test_a_masked_unit_is_refused(shop, tmp_path):
    root = tmp_path / "root"
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "tick.timer").symlink_to("/dev/null")
    code, doc = apply_json(shop, root)
    assert code == 4
    assert doc["errors"][0] == f"{units}/tick.timer is masked (a symbolic link to /dev/null): unmask it or drop the job"
    assert os.readlink(units / "tick.timer") == "/dev/null" and not (units / "tick.service").exists()


@needs_systemctl
def test_the_json_answer_says_its_exit_code_and_what_it_means(shop, tmp_path):
    """The Ansible module relays `outcome` as the task's message: jobgen's words, one place."""
    root = tmp_path / "root"
    answers = [
        apply_json(shop, root, "--stop-timeout", "-1"),
        apply_json(shop, root, "--check"),
        apply_json(shop, root),
    ]
    (root / "etc/systemd/system/tick.timer").unlink()
    (root / "etc/systemd/system/tick.timer").symlink_to("/dev/null")
    answers.append(apply_json(shop, root))
    assert [(code, doc["exit_code"], doc["outcome"]) for code, doc in answers] == [
        (2, 2, "invalid manifest, usage or target (with --strict: a warning); nothing written"),
        (1, 1, "--check: something would change"),
        (0, 0, "ok"),
        (4, 4, "not root, no running systemd, or a file jobgen did not write; nothing changed"),
    ]


LOCKED = V1.replace("    schedule: hourly\n", "    schedule: hourly\n    lock: host\n", 1)  # tick: a tmpfiles.d snippet too
LEAVES = "it leads out of the root (to {to}); jobgen neither reads nor writes through it"


@pytest.mark.parametrize(
    "link",
    ["etc/systemd", "etc/tmpfiles.d", "etc/systemd/system/timers.target.wants", "etc/systemd/system/multi-user.target.wants"],
)
def test_a_folder_that_leads_out_of_the_root_is_refused_and_nothing_is_written_anywhere(shop, tmp_path, link):
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / link).parent.mkdir(parents=True, exist_ok=True)
    (root / link).symlink_to(elsewhere)
    shop.write_text(LOCKED)
    before = snapshot(root)
    code, doc = apply_json(shop, root)
    assert (code, doc["ok"]) == (4, False)
    assert doc["errors"] == [f"cannot write {root / link}: {LEAVES.format(to=elsewhere)}", "nothing changed"]
    assert list(elsewhere.iterdir()) == [] and snapshot(root) == before


def test_an_absolute_link_is_resolved_as_this_host_sees_it_and_refused(shop, tmp_path):
    """/etc/tmpfiles.d -> /srv/tmpfiles.d in an image would point inside it once booted;
    seen from here it points at this host's /srv: refused, never written through."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/tmpfiles.d").symlink_to("/srv/jobgen-test-nowhere/tmpfiles.d")
    code, doc = apply_json(shop, root)
    assert code == 4
    assert doc["errors"] == [f"cannot write {root}/etc/tmpfiles.d: {LEAVES.format(to='/srv/jobgen-test-nowhere/tmpfiles.d')}", "nothing changed"]
    assert not os.path.lexists("/srv/jobgen-test-nowhere")


def test_a_unit_file_linked_out_of_the_root_is_refused_text_and_exit_code(shop, tmp_path):
    root, victim = tmp_path / "root", tmp_path / "victim.timer"
    victim.write_text("theirs\n")
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    (units / "tick.timer").symlink_to(victim)
    r = jobgen("apply", str(shop), "--root", str(root))
    assert r.returncode == 4
    assert r.stderr == f"jobgen: error: {units}/tick.timer is a symbolic link (to {victim}), not a file jobgen wrote\njobgen: error: nothing changed\n"
    assert victim.read_text() == "theirs\n" and sorted(p.name for p in units.iterdir()) == ["tick.timer"]


def test_render_refuses_the_same_folder_with_the_same_check_even_before_it_is_made(shop, tmp_path):
    """IMG/etc -> elsewhere, IMG/etc/systemd not made yet: it would be made through the link."""
    root, elsewhere = tmp_path / "root", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "etc").symlink_to(elsewhere)
    r = jobgen("render", str(shop), "-o", str(root), "--layout", "etc")
    assert r.returncode == 73
    assert r.stderr == f"jobgen: error: cannot write {root}/etc: it leads out of the output folder (to {elsewhere}); jobgen neither reads nor writes through it\n"
    assert list(elsewhere.iterdir()) == []


@needs_systemctl
def test_a_link_that_stays_inside_the_root_is_followed(shop, tmp_path):
    root = tmp_path / "root"
    (root / "usr/lib/tmpfiles.d").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/tmpfiles.d").symlink_to("../usr/lib/tmpfiles.d")
    shop.write_text(LOCKED)
    code, doc = apply_json(shop, root)
    assert code == 0, doc
    assert (root / "usr/lib/tmpfiles.d/jobgen-shop.conf").is_file()


def test_root_without_a_target_systemd_is_refused(tmp_path):
    (tmp_path / "m.yaml").write_text(V1.replace("target: {systemd: 252}\n", ""))
    r = jobgen("apply", str(tmp_path / "m.yaml"), "--root", str(tmp_path))
    assert r.returncode == 2
    assert "jobgen: error: --root: give --systemd VERSION (the image's systemd) or target: in the manifest" in r.stderr


@pytest.mark.skipif(os.path.isdir("/run/systemd/system"), reason="this host runs systemd")
def test_without_a_running_systemd_apply_refuses_and_names_root(shop):
    r = jobgen("apply", str(shop))
    assert r.returncode == 4
    assert r.stderr.endswith("jobgen: error: systemd is not running on this host (no /run/systemd/system); to fill an image root use --root DIR\n")



# Root without capabilities (the bounding set emptied before jobgen is executed): folder
# modes hold for it as for any user.
NO_CAPS = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"] if os.geteuid() == 0 else []


@needs_systemctl
@pytest.mark.parametrize("mode, refused", [
    (0o311, ["{units} cannot be read (Permission denied)"]),  # not listable
    (0o611, ["{units}/queue.target cannot be read (Permission denied)"]),  # listable, its files not reachable
], ids=["folder", "files"])
def test_a_folder_apply_may_not_read_is_refused_and_nothing_changes(shop, tmp_path, mode, refused):
    """The layout's folders are read for files jobgen wrote before (to remove or keep): one it
    may not list, or whose files it may not open, ended in an internal error (exit 70)."""
    root = tmp_path / "root"
    assert jobgen("apply", str(shop), "--root", str(root), "-q").returncode == 0
    units = root / "etc" / "systemd" / "system"
    (units / "stray.conf").write_text("# not a unit, not jobgen's\n")
    before = snapshot(root)
    units.chmod(mode)
    try:
        r = jobgen("apply", str(shop), "--root", str(root), prefix=NO_CAPS)
    finally:
        units.chmod(0o755)
    assert (r.returncode, r.stdout) == (4, "")
    lines = r.stderr.splitlines()
    assert lines[-1] == "jobgen: error: nothing changed"
    assert lines[0] == "jobgen: error: " + refused[0].format(units=units)
    assert snapshot(root) == before

@pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody")
def test_not_root_is_refused():
    where = host.Where(Path("/"), layout.LAYOUTS["etc"], image=False)
    r = subprocess.run(
        ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
         "import sys; from jobgen.host import apply as h; from jobgen.compiler import layout; from pathlib import Path;"
         "print(h.host_problem(h.Where(Path('/'), layout.LAYOUTS['etc'], image=False), check=False))"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path(host.__file__).parents[2])},
    )  # fmt: skip
    assert r.stdout.strip() == "installing units needs root (run as root, or use --check to see what would change)", r.stderr
    assert where.systemctl("enable", "x.timer") == ("systemctl", "enable", "x.timer")


# --------------------------------------------------------------------------- the planner


def files_of(text: str) -> dict[str, bytes]:
    from jobgen.compiler import pipeline

    return layout.arrange(layout.LAYOUTS["etc"], pipeline.build("shop.yaml", text=text).files)


def test_removed_job_running_now_stop_timer_wait_run_disable_then_delete():
    where = host.Where(Path("/"), layout.LAYOUTS["etc"], image=False)
    old, new = files_of(V1), files_of(V2)
    state = host.UnitState(
        enabled={"tick.timer": "enabled", "tock.timer": "enabled", "queue.target": "enabled"},
        active={"tick.timer": "active", "tock.timer": "active", "tock.service": "activating", "queue.target": "active"},
    )
    plan = host.plan_apply(where, new, old, state)
    assert [(s.argv, s.wait_for) for s in plan.before] == [
        (("systemctl", "stop", "tock.timer"), None),
        (("systemctl", "stop", "tock.service"), "tock.service"),  # after waiting up to --stop-timeout
        (("systemctl", "disable", "tock.timer"), None),
    ]
    assert [s.argv for s in plan.after] == [("systemctl", "daemon-reload"), ("systemd-tmpfiles", "--create", "/etc/tmpfiles.d/jobgen-shop.conf")]
    assert {f.path: f.action for f in plan.files if f.changes_anything} == {
        "etc/systemd/system/tock.service": "remove",
        "etc/systemd/system/tock.timer": "remove",
        "etc/tmpfiles.d/jobgen-shop.conf": "update",
    }


def test_a_daemon_reload_an_earlier_apply_failed_to_do_is_done_by_the_next():
    """The files are identical (the earlier apply wrote them) but systemd still runs what it
    loaded before: the reload is owed, and the apply is not `nothing to do`."""
    where = host.Where(Path("/"), layout.LAYOUTS["etc"], image=False)
    files = files_of(V1)
    up = host.UnitState(
        enabled={"tick.timer": "enabled", "tock.timer": "enabled", "queue.target": "enabled"},
        active={"tick.timer": "active", "tock.timer": "active", "queue.target": "active"},
    )
    assert host.plan_apply(where, files, files, up).steps == []
    assert "etc/systemd/system/queue@.service" in files  # a template is not asked about
    assert host.units_loaded_from(files, files) == ["queue.target", "tick.service", "tick.timer", "tock.service", "tock.timer"]
    shown = "Id=tick.service\nNeedDaemonReload=no\n\nNeedDaemonReload=yes\nId=tick.timer\n\nId=tock.timer\nNeedDaemonReload=yes\n"
    up.stale = host.needing_reload(shown)
    plan = host.plan_apply(where, files, files, up)
    assert [(s.argv, s.why) for s in plan.steps] == [
        (("systemctl", "daemon-reload"), "systemd has not loaded tick.timer, tock.timer as on disk (NeedDaemonReload)"),
    ]
    assert plan.changed and {f.action for f in plan.files} == {"identical"}


def test_changed_worker_is_restarted_only_when_running_and_asked():
    where = host.Where(Path("/"), layout.LAYOUTS["etc"], image=False)
    old = files_of(V1)
    new = files_of(V1.replace("stop_timeout: 5s", "stop_timeout: 9s"))
    up = host.UnitState(
        enabled={"tick.timer": "enabled", "tock.timer": "enabled", "queue.target": "enabled"},
        active={"tick.timer": "active", "tock.timer": "active", "queue.target": "active"},
    )
    assert [s.argv for s in host.plan_apply(where, new, old, up).after] == [
        ("systemctl", "daemon-reload"),
        ("systemctl", "restart", "queue.target"),
    ]
    assert [s.argv for s in host.plan_apply(where, new, old, up, restart="never").after] == [("systemctl", "daemon-reload")]
    # Nothing changed and everything enabled and running: no call at all.
    assert host.plan_apply(where, old, old, up).steps == []


# --------------------------------------------------------------------------- the options apply shares with render


WARNS = Path(__file__).parent / "errors" / "warn-restart-always-unlimited.yaml"


def test_strict_makes_a_warning_fail_and_changes_nothing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    warning = jobgen("check", str(WARNS)).stderr.splitlines()
    assert len(warning) == 1 and ": warning: " in warning[0]
    r = jobgen("apply", str(WARNS), "--root", str(root), "--strict")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [*warning, "jobgen: error: 1 warning with --strict; nothing changed"]
    assert r.stdout == "" and snapshot(root) == {}


@needs_systemctl
def test_without_strict_the_warning_is_shown_and_apply_goes_ahead(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    r = jobgen("apply", str(WARNS), "--root", str(root))
    assert r.returncode == 0 and ": warning: " in r.stderr
    assert (root / "etc/systemd/system/mailer.service").is_file()


@needs_systemctl
def test_quiet_prints_only_problems_and_still_applies(shop, tmp_path):
    root = tmp_path / "root"
    shop.write_text(V1.replace("target: {systemd: 252}\n", "target: {systemd: '>=252'}\n"))
    loud = jobgen("apply", str(shop), "--root", str(root), "--check")
    assert loud.stdout and loud.returncode == 1
    for _ in range(2):  # applies, then nothing to do: both silent
        r = jobgen("apply", str(shop), "--root", str(root), "-q")
        assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert (root / "etc/systemd/system/timers.target.wants/tick.timer").is_symlink()


@needs_systemctl
def test_target_preset_names_the_image_systemd(shop, tmp_path):
    root = tmp_path / "root"
    shop.write_text(V1.replace("target: {systemd: 252}\n", ""))
    code, doc = apply_json(shop, root, "--target", "debian-12")
    assert code == 0, doc
    assert not [d for d in doc["diagnostics"] if "no target systemd given" in d["message"]]
    both = jobgen("apply", str(shop), "--root", str(root), "--target", "debian-12", "--systemd", "252")
    assert (both.returncode, both.stderr) == (2, "jobgen: error: give --systemd or --target, not both\n")


@pytest.mark.parametrize("kind, why", [
    ("missing", "does not exist (give the image's root folder; apply does not make it)"),
    ("file", "not a folder"),
])  # fmt: skip
def test_a_root_that_is_not_a_folder_says_which(shop, tmp_path, kind, why):
    root = tmp_path / "img"
    if kind == "file":
        root.write_text("")
    r = jobgen("apply", str(shop), "--root", str(root))
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"jobgen: error: --root {root}: {why}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m", "root", *(["img"] if kind == "file" else [])])


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to nobody")
def test_a_root_this_user_cannot_read_says_so(tmp_path):
    root = tmp_path / "img"  # under pytest's 0700 folder: nobody cannot reach it
    root.mkdir()
    r = jobgen("apply", "m.yaml", "--root", str(root), prefix=["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"],
               cwd="/", env={**os.environ, "PYTHONPATH": str(Path(host.__file__).parents[2])})
    assert (r.returncode, r.stderr) == (2, f"jobgen: error: --root {root}: not readable (permission denied)\n")


# --------------------------------------------------------------------------- the holder the units exec


HOLDERS = """\
jobgen: 1
target: {systemd: 252}
jobs:
  sync:
    command: [/bin/true]
    schedule: hourly
    timeout: 1h
    lock: {scope: cluster, backend: "redis://127.0.0.1:6399", name: "shop:sync"}
  mail:
    command: [/bin/true]
    schedule: hourly
    overlap: queue
    lock: host
  tick:
    command: [/bin/true]
    schedule: hourly
    lock: host
"""


def missing(manifest: Path, holder: str, where: str) -> list[str]:
    """The two warnings: at sync's lock: key and at mail's overlap: key (tick runs flock only)."""
    rest = f"its units run {holder} (--holder), which does not exist {where}: they would fail to start (status=203/EXEC); give --holder the path of jobgen there"
    return [f"{manifest}:8:5: warning: job 'sync': {rest}", f"{manifest}:12:5: warning: job 'mail': {rest}"]


@needs_systemctl
def test_apply_into_a_root_warns_at_each_job_whose_holder_is_missing_there(shop, tmp_path):
    root = tmp_path / "root"
    shop.write_text(HOLDERS)
    r = jobgen("apply", str(shop), "--root", str(root), "-q")
    assert r.returncode == 0
    assert r.stderr.splitlines() == missing(shop, "/usr/bin/jobgen", f"in {root}")
    assert "ExecStart=/usr/bin/jobgen lock " in (root / "etc/systemd/system/sync.service").read_text()
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/jobgen").symlink_to("/opt/jobgen/bin/jobgen")  # the image's link: not resolved here
    again = jobgen("apply", str(shop), "--root", str(root), "-q")
    assert (again.returncode, again.stderr) == (0, "")


def test_strict_makes_a_missing_holder_fail_and_changes_nothing(shop, tmp_path):
    root = tmp_path / "root"
    shop.write_text(HOLDERS)
    r = jobgen("apply", str(shop), "--root", str(root), "--holder", "/opt/nowhere/jobgen", "--strict")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [*missing(shop, "/opt/nowhere/jobgen", f"in {root}"), "jobgen: error: 2 warnings with --strict; nothing changed"]
    assert snapshot(root) == {}


def test_render_warns_only_when_this_host_loads_the_units(shop, tmp_path):
    """A dry run of a root tree into / (nothing is written) is judged by this host's files;
    a render into any other folder is for another host or an image and is not."""
    shop.write_text(HOLDERS)
    here = jobgen("render", str(shop), "-o", "/", "--layout", "etc", "--holder", "/opt/nowhere/jobgen", "--check", "-q")
    assert here.returncode == 1
    assert [line for line in here.stderr.splitlines() if "--holder" in line] == missing(shop, "/opt/nowhere/jobgen", "on this host")
    strict = jobgen("render", str(shop), "-o", "/", "--layout", "etc", "--holder", "/opt/nowhere/jobgen", "--check", "--strict")
    assert strict.returncode == 2 and strict.stderr.splitlines()[-1] == "jobgen: 2 warnings with --strict; nothing written"
    present = jobgen("render", str(shop), "-o", "/", "--layout", "etc", "--holder", sys.executable, "--check", "-q")
    assert (present.returncode, present.stderr) == (1, "")
    elsewhere = jobgen("render", str(shop), "-o", str(tmp_path / "review"), "--holder", "/opt/nowhere/jobgen", "-q")
    assert (elsewhere.returncode, elsewhere.stderr) == (0, "")


def test_the_running_jobgen_is_found_as_the_generator_finds_it(tmp_path):
    """pipx, a virtualenv under /opt, a link in /usr/local/bin: the units get the real path."""
    real = tmp_path / "opt/jobgen/bin/jobgen"
    real.parent.mkdir(parents=True)
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    link = tmp_path / "usr/local/bin/jobgen"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    from jobgen.runtime import spawn

    assert spawn.running_jobgen(str(link)) == str(real)
    assert spawn.running_jobgen(str(Path(host.__file__).parents[1] / "__main__.py")) is None  # python -m jobgen
    assert spawn.console_script(str(Path(host.__file__).parents[1] / "__main__.py")) == "/usr/bin/jobgen"


# --- several manifests: render's rules (compiler/merge.py) ---------------------------------------

@needs_systemctl
def test_the_same_manifest_named_twice_is_one_manifest_as_in_render(shop, tmp_path):
    root = tmp_path / "root"
    again = tmp_path / "m" / ".." / "m" / "shop.yaml"
    r = jobgen("apply", str(shop), str(again), "--root", str(root), "--quiet")
    assert (r.returncode, r.stderr) == (0, "")
    assert (root / "etc/systemd/system/tick.timer").read_text().startswith("# Generated by jobgen from shop.yaml.")
    rendered = jobgen("render", str(shop), str(again), "-o", str(tmp_path / "out"), "--quiet")
    assert (rendered.returncode, rendered.stderr) == (0, "")


def test_two_manifests_of_one_file_name_are_refused_naming_both(shop, tmp_path):
    (tmp_path / "other").mkdir()
    other = tmp_path / "other" / "shop.yaml"
    other.write_text(V2)
    root = tmp_path / "root"
    r = jobgen("apply", str(shop), str(other), "--root", str(root), "--systemd", "252")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        f"jobgen: error: {shop} and {other} have the same file name; rename one "
        "(generated files name their manifest by file name); nothing changed"
    ]
    assert snapshot(root) == {}


def test_two_manifests_claiming_one_unit_change_nothing_and_name_both(shop, tmp_path):
    other = tmp_path / "m" / "other.yaml"
    other.write_text(V1.replace("[/bin/true]", "[/bin/false]", 1))
    root = tmp_path / "root"
    r = jobgen("apply", str(shop), str(other), "--root", str(root), "--systemd", "252")
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"jobgen: error: queue.target is generated by both {shop} and {other}; nothing changed"
    assert snapshot(root) == {}


# --------------------------------------------------------------------------- a root that cannot take the files


@pytest.fixture
def mount_tmpfs():
    """mount(8) a small tmpfs (root only); every mount is undone after the test."""
    mounted: list[Path] = []

    def mount(where: Path, options: str) -> None:
        where.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
        mounted.append(where)

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", str(where)], check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")
@needs_systemctl
@pytest.mark.parametrize("case, bad, reason", [
    # Units fit, the snippet's folder is read-only: before, the units were left without
    # the snippet that makes their lock files, and apply ended 'internal error' (70).
    ("read-only snippet folder", "etc/tmpfiles.d/jobgen-shop.conf", "Read-only file system"),
    ("full disk", "etc/systemd/system/queue.target", "No space left on device"),
])  # fmt: skip
def test_a_root_that_cannot_take_the_files_is_one_line_73_and_nothing_written(shop, tmp_path, mount_tmpfs, case, bad, reason):
    root = tmp_path / "root"
    if case == "full disk":
        mount_tmpfs(root, "size=64k")
        (root / "fill").write_bytes(b"\0" * 64 * 1024)  # the tmpfs holds exactly this
    else:
        (root / "etc").mkdir()
        mount_tmpfs(root / "etc/tmpfiles.d", "ro,size=64k")
    shop.write_text(LOCKED)
    before = snapshot(root)
    r = jobgen("apply", str(shop), "--root", str(root), "-q")  # -q: no notes, the error alone
    assert (r.returncode, r.stdout) == (73, "")
    assert r.stderr == f"jobgen: error: cannot write {root}/{bad}: {reason}; the installed files are left as they were\n"
    assert snapshot(root) == before


@pytest.mark.parametrize("target", ["etc", "nowhere"])  # a link to itself (ELOOP), a link to nothing
def test_a_folder_link_that_leads_nowhere_is_refused_once_and_nothing_written(shop, tmp_path, target):
    root = tmp_path / "root"
    (root / "etc").symlink_to(target)
    r = jobgen("apply", str(shop), "--root", str(root))
    assert (r.returncode, r.stdout) == (4, "")
    assert r.stderr == f"jobgen: error: cannot write {root}/etc: it is a symbolic link (to {target}) that leads to no folder\njobgen: error: nothing changed\n"
    assert sorted(p.name for p in root.iterdir()) == ["etc"] and not os.path.exists(root / "etc")


def test_without_systemctl_a_root_apply_is_refused_before_writing_and_check_still_answers(shop, tmp_path):
    """Files that are never enabled are an image whose timers never start: refused (4)."""
    root, bare = tmp_path / "root", {**os.environ, "PATH": str(tmp_path / "no-bin")}
    r = jobgen("apply", str(shop), "--root", str(root), env=bare)
    assert (r.returncode, r.stdout) == (4, "")
    assert r.stderr == f"jobgen: error: systemctl not found: apply --root enables the units with `systemctl --root={root} enable` (install systemd, or use --check)\n"
    assert list(root.iterdir()) == []
    assert jobgen("apply", str(shop), "--root", str(root), "--check", env=bare).returncode == 1


def test_a_systemctl_that_cannot_be_started_is_a_named_failure_not_a_crash(shop, tmp_path):
    """Found on PATH but not startable (its interpreter is gone): each call is a failed
    step, named, exit 3, as a systemctl that fails; the files are installed."""
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/nonexistent/sh\n")
    (bin_dir / "systemctl").chmod(0o755)
    code, doc = apply_json(shop, root, env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert (code, doc["ok"]) == (3, False)
    assert doc["errors"] == [f"`systemctl --root={root} enable {unit}` failed (new {what}): cannot run {bin_dir}/systemctl: No such file or directory"
                             for unit, what in (("queue.target", "worker"), ("tick.timer", "timer"), ("tock.timer", "timer"))]
    assert (root / "etc/systemd/system/tick.timer").is_file()


@needs_systemctl
@pytest.mark.parametrize("first_line", ["[Unit]\n", None])  # None: jobgen's header for shop.yaml
def test_a_huge_file_beside_the_units_is_judged_by_its_first_line_not_read_whole(shop, tmp_path, first_line):
    """A stray 3 GiB *.service in the unit folder: apply read it whole (MemoryError under a
    2 GiB address-space limit: 'internal error', 70). Only a file that starts with jobgen's
    header is read whole, and one larger than jobgen ever writes is left alone."""
    root = tmp_path / "root"
    units = root / "etc/systemd/system"
    units.mkdir(parents=True)
    stray = units / "stray.service"
    with open(stray, "wb") as f:
        f.write((first_line or header.line("shop.yaml") + "\n").encode())
        f.truncate(3 << 30)
    r = jobgen("apply", str(shop), "--root", str(root), "-q", prefix=["prlimit", f"--as={2 << 30}"])
    assert (r.returncode, r.stderr) == (0, "")
    assert stray.stat().st_size == 3 << 30 and (units / "tick.timer").is_file()


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_a_stop_timeout_that_is_not_0_or_more_seconds_is_usage_and_nothing_written(shop, tmp_path, value):
    """NaN passed the `< 0` check and made every wait end at once: a removed job's run in
    progress would be stopped without being waited for."""
    root = tmp_path / "root"
    r = jobgen("apply", str(shop), "--root", str(root), "--stop-timeout", value)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "jobgen: error: --stop-timeout must be 0 or more seconds\n")
    assert list(root.iterdir()) == []


# --------------------------------------------------------------------------- one apply at a time

GATE_SYSTEMCTL = """\
#!/bin/sh
# The first `enable` of all holds its apply here, after its files are written, until the
# test lets it go; every other call is the real systemctl's at once.
case " $* " in
  *" enable "*) if mkdir "$GATE/taken" 2>/dev/null; then echo in > "$GATE/entered"; read go < "$GATE/release"; fi ;;
esac
exec /usr/bin/systemctl "$@"
"""


def _started(*args: str, env: dict) -> subprocess.Popen:
    from support.cli import JOBGEN, PLAIN

    return subprocess.Popen([*JOBGEN, *args], env={**env, **PLAIN}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def unnoted(stderr: str) -> list[str]:
    """stderr without the manifest's notes (DeferReactivation= emulated on 252)."""
    return [line for line in stderr.splitlines() if ": note: " not in line]


def _litter(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".jobgen*"))


@needs_systemctl
def test_two_applies_at_once_run_one_after_the_other_and_the_second_finds_nothing_to_do(shop, tmp_path):
    root, gate, bin_dir = tmp_path / "root", tmp_path / "gate", tmp_path / "bin"
    gate.mkdir(), bin_dir.mkdir()
    os.mkfifo(gate / "entered"), os.mkfifo(gate / "release")
    (bin_dir / "systemctl").write_text(GATE_SYSTEMCTL)
    (bin_dir / "systemctl").chmod(0o755)
    env = {**os.environ, "GATE": str(gate), "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    first = _started("apply", str(shop), "--root", str(root), env=env)
    second = None
    try:
        with open(gate / "entered") as entered:  # the first apply is inside its first `systemctl enable`
            assert entered.read() == "in\n"
        second = _started("apply", str(shop), "--root", str(root), env=env)
        # It says once that it waits, and has changed nothing yet.
        assert second.stderr.readline() == f"jobgen: waiting for another apply to {root}\n"
        with open(gate / "release", "w") as release:
            release.write("go\n")
        out1, err1 = first.communicate(timeout=120)
        out2, err2 = second.communicate(timeout=120)
    finally:
        # Whatever failed, the stand-in is not left blocked (ENXIO: it is not waiting).
        try:
            fd = os.open(gate / "release", os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            pass
        else:
            os.write(fd, b"go\n")
            os.close(fd)
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert (first.returncode, unnoted(err1)) == (0, [])
    assert "create    " in out1 and f"ran       systemctl --root={root} enable tick.timer" in out1
    # It planned from what the first one left: every file identical, every unit enabled.
    assert (second.returncode, unnoted(err2)) == (0, [])  # the waiting line was the only one
    assert out2.splitlines()[-1] == "nothing to do" and not any(line.startswith(("create", "update", "ran")) for line in out2.splitlines())
    assert _litter(root) == []


@needs_systemctl
def test_an_apply_killed_after_its_commit_point_is_completed_by_the_next(shop, tmp_path):
    """What an apply killed between its journal and its renames leaves: the journal, the
    temporary file it names, and its lock file (the kill skipped the removal). --check
    says so and touches nothing; the next apply completes it first, then finds the rest
    identical."""
    root, other = tmp_path / "root", tmp_path / "other"
    assert jobgen("apply", str(shop), "--root", str(root)).returncode == 0
    daily = V1.replace("schedule: hourly", "schedule: daily")
    shop.write_text(daily)
    other.mkdir()
    assert jobgen("apply", str(shop), "--root", str(other)).returncode == 0
    new_timer = (other / "etc/systemd/system/tick.timer").read_bytes()
    etc, tmp = root / "etc", ".jobgen-tmp.0123abcd0"
    (etc / "systemd/system" / tmp).write_bytes(new_timer)
    (etc / ".jobgen-journal").write_text(json.dumps({"renames": [[f"systemd/system/{tmp}", "systemd/system/tick.timer"]], "removes": []}))
    (etc / ".jobgen.lock").write_bytes(b"")
    before = snapshot(root)

    r = jobgen("apply", str(shop), "--root", str(root), "--check")
    assert r.returncode == 1
    assert [line for line in r.stderr.splitlines() if line.startswith("jobgen:")] == [
        f"jobgen: note: {etc}: an apply was interrupted after its commit point; the next apply completes it"]
    assert snapshot(root) == before

    r = jobgen("apply", str(shop), "--root", str(root))
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if line.startswith("jobgen:")] == [f"jobgen: note: {etc}: completed an interrupted apply (1 files)"]
    assert r.stdout.splitlines()[-1] == "nothing to do"
    assert (etc / "systemd/system/tick.timer").read_bytes() == new_timer
    assert _litter(root) == []


def test_a_lock_file_that_is_a_symbolic_link_is_never_followed(shop, tmp_path):
    root, victim = tmp_path / "root", tmp_path / "victim"
    victim.write_text("theirs\n")
    (root / "etc").mkdir()
    (root / "etc/.jobgen.lock").symlink_to(victim)
    before = snapshot(root)
    r = jobgen("apply", str(shop), "--root", str(root))
    assert (r.returncode, r.stdout) == (73, "")
    assert unnoted(r.stderr) == [f"jobgen: error: cannot write {root}/etc/.jobgen.lock: it is a symbolic link (to {victim}); "
                                 "jobgen writes only regular files and never through a link; the installed files are left as they were"]
    assert victim.read_text() == "theirs\n" and snapshot(root) == before
