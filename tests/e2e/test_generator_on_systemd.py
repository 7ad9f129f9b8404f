"""jobgen-generator on real systemd 252 and 257: manifests in /etc/jobgen/ become running
timers at daemon-reload and at boot, and a broken manifest beside them is reported in the
journal with its position, not fatal.

jobgen is installed in the container from this worktree's wheel (/opt/jobgen, with
/usr/bin/jobgen-generator), and the generator is enabled the way the README says:
a link in /etc/systemd/system-generators/.
"""

from __future__ import annotations

import io
import tarfile
import time

import pytest
from container import Container, HarnessError, format_journal

from jobgen.compiler.names import LOCK_DIR
from jobgen.host import gencache

pytestmark = pytest.mark.e2e

GENERATOR_LINK = "/etc/systemd/system-generators/jobgen-generator"
IDENT = "jobgen-generator"

# No target: the generator targets the systemd it runs under. The job checks from inside
# that it runs under its own lock: a second flock on the same file must fail.
GOOD = """\
jobgen: 1
jobs:
  gen-tick:
    description: a job generated from /etc/jobgen
    command: [/bin/sh, -c, 'if /usr/bin/flock --nonblock "$0" true; then echo lock-free; exit 1; fi; echo lock-held', "{lock}"]
    schedule: {{every: 5s}}
    accuracy: 1s
  gen-burst:
    command: [/bin/true]
    schedule: {{every: 1s}}
    accuracy: 1s
"""

# Line 6, column 14: the value of 'overlap'.
BROKEN = """\
jobgen: 1
jobs:
  gen-broken:
    command: [/bin/true]
    schedule: "*:0/5"
    overlap: sometimes
"""
BROKEN_ERROR = (
    "/etc/jobgen/broken.yaml:6:14: error: job 'gen-broken': 'overlap': must be one of skip, wait, allow, queue; got 'sometimes'"
)


@pytest.fixture
def generated(systemd_jobgen, scenario):
    """The generator enabled, a good and a broken manifest in /etc/jobgen, daemon-reload.
    Afterwards the manifests and the link are removed and systemd reloaded again, so the
    other scenarios of the session see no generated units."""
    c = systemd_jobgen
    # The README's installation command, as an administrator types it.
    c.run("/bin/sh", "-c", f'mkdir -p {GENERATOR_LINK.rsplit("/", 1)[0]} && ln -s "$(command -v jobgen-generator)" {GENERATOR_LINK}')
    c.write_file("/etc/jobgen/good.yaml", GOOD.format(lock=f"{LOCK_DIR}/gen-tick.lock"))
    c.write_file("/etc/jobgen/broken.yaml", BROKEN)
    scenario.units += ["gen-tick.timer", "gen-tick.service", "gen-burst.timer", "gen-burst.service"]
    c.systemctl("daemon-reload")
    yield c
    c.systemctl("stop", "gen-tick.timer", "gen-tick.service", "gen-burst.timer", "gen-burst.service", check=False)
    c.run("rm", "-rf", "/etc/jobgen", GENERATOR_LINK)
    c.systemctl("daemon-reload")


def _show(c, unit: str, *props: str) -> dict[str, str]:
    out = c.systemctl("show", unit, *(f"--property={p}" for p in props)).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_a_manifest_in_etc_jobgen_becomes_an_enabled_timer_that_runs_under_its_lock(generated, scenario):
    c = generated
    timer = _show(c, "gen-tick.timer", "LoadState", "FragmentPath", "SourcePath", "WantedBy", "UnitFileState")
    assert timer["LoadState"] == "loaded", timer
    assert timer["FragmentPath"] == "/run/systemd/generator/gen-tick.timer"
    assert timer["SourcePath"] == "/etc/jobgen/good.yaml"
    # Enabled the way [Install] would: timers.target wants it, so every boot starts it.
    assert "timers.target" in timer["WantedBy"].split(), timer
    assert timer["UnitFileState"] == "generated"
    assert c.run("readlink", "/run/systemd/generator/timers.target.wants/gen-tick.timer").stdout.strip() == "../gen-tick.timer"
    # The manifest names no target: the units target the systemd that runs them.
    header = c.read_file("/run/systemd/generator/gen-tick.timer").decode()
    assert f"Target: systemd {c.release}." in header.splitlines()[1]

    # After a reload systemd starts nothing new by itself (systemd.generator(7)): start the
    # timer, as the README says (a boot does it through timers.target.wants).
    c.systemctl("start", "gen-tick.timer")
    outcomes = scenario.wait_outcomes("gen-tick", count=1, timeout=90)
    assert outcomes[0] == "success", scenario.journal_text("gen-tick.service")
    runs = scenario.runs("gen-tick.service")
    assert any("lock-held" in m for r in runs for m in r.messages()), scenario.journal_text("gen-tick.service")
    # The lock file was made by the generated jobgen-locks.service before the run.
    assert c.run("test", "-f", f"{LOCK_DIR}/gen-tick.lock", check=False).returncode == 0
    locks = _show(c, "jobgen-locks.service", "LoadState", "Result", "FragmentPath")
    assert locks == {"LoadState": "loaded", "Result": "success", "FragmentPath": "/run/systemd/generator/jobgen-locks.service"}

    # By hand, from the manifest in /etc/jobgen: the same lock file (timer stopped first, so
    # no timer run can hold the lock meanwhile).
    c.systemctl("stop", "gen-tick.timer")
    scenario.wait_for(lambda: c.systemctl("is-active", "gen-tick.service", check=False).stdout.strip(),
                      lambda state: state not in ("active", "activating"), 60, "gen-tick.service to finish")
    manual = c.run("jobgen", "run", "/etc/jobgen/good.yaml", "gen-tick", check=False)
    assert (manual.returncode, manual.stdout) == (0, "lock-held\n"), manual.stderr


def test_a_broken_manifest_is_reported_in_the_journal_with_its_position_and_skipped(generated, scenario):
    c = generated
    lines = scenario.wait_for(
        lambda: c.journal(f"SYSLOG_IDENTIFIER={IDENT}"),
        lambda entries: any(e.get("MESSAGE") == BROKEN_ERROR for e in entries),
        60,
        "the generator's error line for broken.yaml",
    )
    errors = [e for e in lines if e.get("MESSAGE") == BROKEN_ERROR]
    assert {e.get("PRIORITY") for e in errors} == {"3"}
    # Once per generator run, not twice (stderr and the journal are not both collected).
    per_run: dict[str, int] = {}
    for e in errors:
        per_run[e.get("_PID", "?")] = per_run.get(e.get("_PID", "?"), 0) + 1
    assert set(per_run.values()) == {1}, per_run
    assert any("/etc/jobgen/broken.yaml skipped" in e.get("MESSAGE", "") for e in lines)
    # Its units do not exist; the good manifest's do.
    assert _show(c, "gen-broken.timer", "LoadState")["LoadState"] == "not-found"
    assert _show(c, "gen-tick.timer", "LoadState")["LoadState"] == "loaded"
    # The generator did not fail (systemd logs "... failed with exit status N" otherwise).
    failed = [e for e in c.journal("--grep=jobgen-generator failed")]
    assert failed == [], failed


def test_the_lock_service_runs_before_every_job_start_without_hitting_the_start_limit(generated, scenario):
    # jobgen-locks.service runs again for each job start (so a job added by a reload gets
    # its lock file). systemd refuses a unit started more than 5 times in 10 s by default
    # (DefaultStartLimitBurst=); a job every second must not make it fail.
    c = generated
    c.systemctl("start", "gen-burst.timer")
    scenario.wait_outcomes("gen-burst", count=8, timeout=120)
    c.systemctl("stop", "gen-burst.timer")
    lines = [e.get("MESSAGE", "") for e in c.unit_journal("jobgen-locks.service")]
    assert not [m for m in lines if "start-limit" in m or "too quickly" in m], lines
    assert _show(c, "jobgen-locks.service", "Result")["Result"] == "success"
    assert set(e["JOBGEN_OUTCOME"] for e in scenario.outcomes("gen-burst")) == {"success"}


CACHED = """\
jobgen: 1
jobs:
  gen-cached:
    command: [/bin/echo, {word}]
    schedule: daily
"""


def _entries(c) -> list[str]:
    """Folder, inode, mode and owner of every cache entry (find -printf: one line each)."""
    found = c.run("find", *gencache.FOLDERS, "-name", f"*{gencache.SUFFIX}", "-printf", "%h %i %m %u\n", check=False).stdout
    return sorted(found.splitlines())


def test_the_second_daemon_reload_is_served_from_the_compiled_cache(systemd_jobgen, scenario):
    """The first daemon-reload compiles and stores one entry (root's, 0600, in a 0700 folder
    the generator made): in /var/cache/jobgen/generator on 252; on 257, which runs
    generators with all but /run read-only, in /run/jobgen-generator. The second reload
    finds it: the entry is not written again (same inode; a miss renames a new file into
    place) and systemd loads the same bytes. An edited manifest is a miss again."""
    c = systemd_jobgen
    expected = gencache.RUN_FOLDER if int(c.release) >= 257 else gencache.FOLDER
    c.run("rm", "-rf", gencache.FOLDER.rsplit("/", 1)[0], gencache.RUN_FOLDER)
    c.run("/bin/sh", "-c", f'mkdir -p {GENERATOR_LINK.rsplit("/", 1)[0]} && ln -sf "$(command -v jobgen-generator)" {GENERATOR_LINK}')
    c.write_file("/etc/jobgen/cached.yaml", CACHED.format(word="first"))
    scenario.units += ["gen-cached.timer", "gen-cached.service"]
    unit = "/run/systemd/generator/gen-cached.service"
    try:
        c.systemctl("daemon-reload")
        [first] = _entries(c)
        assert first.split()[0] == expected and first.split()[2:] == ["600", "root"], first
        assert c.run("stat", "-c", "%a %U", expected).stdout.split() == ["700", "root"]
        compiled = c.read_file(unit)

        c.systemctl("daemon-reload")
        assert _entries(c) == [first]  # read, not written again: a hit
        assert c.read_file(unit) == compiled  # systemd emptied the folder; the hit wrote it
        assert _show(c, "gen-cached.timer", "LoadState")["LoadState"] == "loaded"

        c.write_file("/etc/jobgen/cached.yaml", CACHED.format(word="second"))
        c.systemctl("daemon-reload")
        assert len(_entries(c)) == 2  # a miss, stored beside the first
        assert b"/bin/echo second" in c.read_file(unit)
        # Nothing went to the journal: no note, no error.
        assert [e.get("MESSAGE") for e in c.journal(f"SYSLOG_IDENTIFIER={IDENT}", "--grep=cache")] == []
    finally:
        c.run("rm", "-rf", "/etc/jobgen", GENERATOR_LINK, gencache.FOLDER.rsplit("/", 1)[0], gencache.RUN_FOLDER)
        c.systemctl("daemon-reload")


def test_at_boot_the_generated_timer_starts_by_itself_and_runs(systemd_jobgen, tmp_path):
    """A fresh boot with jobgen, the generator link and the manifests already in place (bound
    read-only into a second container of the same release): the generator runs in the
    early-boot environment, timers.target.wants starts the timer with no `systemctl start`,
    and the job runs under its lock; the broken manifest costs nothing but its own units,
    and its error reaches the journal although neither /dev/kmsg nor journald was there."""
    etc = tmp_path / "etc-jobgen"
    etc.mkdir()
    (etc / "good.yaml").write_text(GOOD.format(lock=f"{LOCK_DIR}/gen-tick.lock"))
    (etc / "broken.yaml").write_text(BROKEN)
    c = _boot_with_manifests(systemd_jobgen, tmp_path, etc)
    try:
        timer = _show(c, "gen-tick.timer", "ActiveState", "FragmentPath")
        assert timer["ActiveState"] == "active", timer  # nobody started it: the boot did
        assert timer["FragmentPath"] == "/run/systemd/generator/gen-tick.timer"
        assert _show(c, "gen-broken.timer", "LoadState")["LoadState"] == "not-found"
        deadline = time.monotonic() + 90
        while not (outcomes := c.journal("SYSLOG_IDENTIFIER=jobgen", "JOBGEN_JOB=gen-tick")):
            assert time.monotonic() < deadline, format_journal(c.journal("-b"))
            time.sleep(0.2)
        assert outcomes[0]["JOBGEN_OUTCOME"] == "success", format_journal(c.unit_journal("gen-tick.service"))
        assert any(e.get("MESSAGE") == "lock-held" for e in c.unit_journal("gen-tick.service"))
        assert f"Target: systemd {c.release}." in c.read_file("/run/systemd/generator/gen-tick.timer").decode()
        # No /dev/kmsg in a container and no journald yet when generators first run: the
        # problems reach the journal through the generated report unit, with their priority.
        reported = c.journal(f"SYSLOG_IDENTIFIER={IDENT}")
        assert [(e.get("MESSAGE"), e.get("PRIORITY")) for e in reported][:2] == [
            (BROKEN_ERROR, "3"),
            (f"{IDENT}: /etc/jobgen/broken.yaml skipped: none of its units were generated; fix it, then `systemctl daemon-reload`", "3"),
        ], format_journal(c.journal("-b"))
    finally:
        c.halt()


def test_hostile_manifests_in_etc_jobgen_do_not_stall_the_boot(systemd_jobgen, tmp_path, monkeypatch):
    """1,000 never-elapsing calendars and 3,000 slow ones in /etc/jobgen beside an ordinary
    manifest (tests/test_generator.py hostile_manifests: unbounded, the first manifest's
    search alone took longer than the 30 s deadline on this machine). The generator keeps to
    its own deadline at boot and at daemon-reload: the boot reaches multi-user.target, the
    ordinary timer is active, and every manifest not generated is reported in the journal."""
    import container as harness
    from test_generator import hostile_manifests

    etc = tmp_path / "etc-jobgen"
    hostile_manifests(etc, never=1000, slow_files=3)
    # The boot waits for the generator (up to its 30 s deadline) on a loaded machine.
    monkeypatch.setattr(harness, "BOOT_TIMEOUT", 240.0)
    monkeypatch.setattr(harness, "HALT_TIMEOUT", 180.0)  # and stopping thousands of timers takes a while too
    c = _boot_with_manifests(systemd_jobgen, tmp_path, etc)
    try:
        assert c.systemctl("is-active", "multi-user.target", check=False).stdout.strip() == "active"
        timer = _show(c, "ordinary.timer", "ActiveState", "FragmentPath")
        assert timer == {"ActiveState": "active", "FragmentPath": "/run/systemd/generator/ordinary.timer"}, timer
        assert _show(c, "never-0.timer", "LoadState")["LoadState"] == "not-found"
        _all_reported(c, "/etc/jobgen", "at boot")
        # The generator alone, by hand in the booted container, into a scratch folder.
        started = time.monotonic()
        by_hand = c.run("/usr/bin/env", "JOBGEN_MANIFEST_DIRS=/etc/jobgen", "/opt/jobgen/bin/jobgen-generator", "/tmp/by-hand",
                        check=False, timeout=120)
        generator_seconds = time.monotonic() - started
        assert by_hand.returncode == 0, by_hand.stderr[-2000:]
        assert c.run("test", "-f", "/tmp/by-hand/ordinary.timer", check=False).returncode == 0
        # And at daemon-reload (systemd waits for generators here too): timed.
        started = time.monotonic()
        c.systemctl("daemon-reload", timeout=300)
        reload_seconds = time.monotonic() - started
        print(f"\nsystemd {c.release}: boot with the hostile manifests {c.boot_seconds:.1f} s, daemon-reload {reload_seconds:.1f} s, "
              f"the generator by hand {generator_seconds:.1f} s (its deadline 30 s)")
        assert _show(c, "ordinary.timer", "ActiveState")["ActiveState"] == "active"
        _all_reported(c, "/etc/jobgen", "after daemon-reload")
    finally:
        c.halt()


def _boot_with_manifests(systemd_jobgen, tmp_path, etc) -> Container:
    """A second container of the session's release, booted with jobgen as installed in the
    session's container (copied out), the generator link and the manifests of ``etc``
    bound read-only into place, so the generator runs in the early-boot environment."""
    venv = tmp_path / "opt-jobgen"
    venv.mkdir()
    data = systemd_jobgen.run("tar", "-C", "/opt/jobgen", "-c", ".", binary=True).stdout
    tarfile.open(fileobj=io.BytesIO(data)).extractall(venv)
    gens = tmp_path / "generators"
    gens.mkdir()
    (gens / "jobgen-generator").symlink_to("/opt/jobgen/bin/jobgen-generator")
    binds = [f"--bind-ro={venv}:/opt/jobgen", f"--bind-ro={etc}:/etc/jobgen", f"--bind-ro={gens}:{GENERATOR_LINK.rsplit('/', 1)[0]}"]
    c = Container(systemd_jobgen.release, extra_nspawn_args=tuple(binds))
    try:
        c.boot()
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    return c


def _all_reported(c, folder: str, when: str) -> None:
    """Each slow manifest is generated whole or named in the journal as left out; the
    never-elapsing one is skipped with its errors."""
    lines = [e.get("MESSAGE", "") for e in c.journal(f"SYSLOG_IDENTIFIER={IDENT}")]
    assert f"{IDENT}: {folder}/a-never.yaml skipped: none of its units were generated; fix it, then `systemctl daemon-reload`" in lines, \
        (when, lines[-20:])
    for k in range(3):
        loaded = _show(c, f"slow{k}-999.timer", "LoadState")["LoadState"] == "loaded"
        left = any(m.startswith(f"{IDENT}: {folder}/b-slow-{k}.yaml left out: the generator reached its 30 s deadline") for m in lines)
        assert loaded or left, (when, k, lines[-20:])
