"""`jobgen run` gives the job the process a unit gets from systemd (systemd.exec(5)):
the job's user with its primary and supplementary groups, an environment built from
scratch (PATH and the locale as the service manager sets them, HOME/USER/LOGNAME/SHELL
from the user, Environment=, then EnvironmentFile=), the working directory (/ without
one), the unit's UMask= (0022 without one), the manager's resource limits, its own
session without the caller's terminal, no_new_privs with hardening, TimeoutStartSec=
with systemd's stop (KillSignal=, SIGKILL after TimeoutStopSec=), the reporter's outcome
word, and the lock file made as the tmpfiles.d snippet makes it.

Each test runs the real `jobgen run` as root for a user the fixture creates with useradd
(and removes); the job reports what it got, and the test compares that with what the
unit's settings say systemd gives.
"""

from __future__ import annotations

import json
import os
import pty
import pwd
import grp
import resource
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from jobgen.compiler import timespec
from jobgen.contract import outcomes
from jobgen.runtime.run import manager_locale, manager_path, parse_env_file
from support.flock import hold
from support.cli import JOBGEN, Ran, jobgen

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (useradd, changing user)")

# Prints what the process got, one fact per line; `env` last (values may hold anything).
REPORT = (
    'echo "uid=$(id -u)"; echo "gid=$(id -g)"; echo "groups=$(id -G)"; echo "umask=$(umask)"; '
    'echo "cwd=$(pwd -P)"; echo "nnp=$(grep NoNewPrivs /proc/self/status | cut -f2)"; '
    'echo "core=$(ulimit -c)"; echo "nofile=$(ulimit -n)"; '
    'echo "sid=$(ps -o sid= -p $$ | tr -d " ")"; echo "pid=$$"; '
    'echo "tty=$(ps -o tty= -p $$ | tr -d " ")"; '
    'if (exec 3<>/dev/tty) 2>/dev/null; then echo "devtty=opened"; else echo "devtty=refused"; fi; '
    "echo ENV; env -0 | tr '\\0' '\\036'"
)


@pytest.fixture
def account():
    """A user with a home, a login shell, its own primary group and one supplementary group."""
    tag = uuid.uuid4().hex[:6]
    user, extra = f"jgrun{tag}", f"jgsup{tag}"
    subprocess.run(["groupadd", extra], check=True)
    subprocess.run(["useradd", "--no-create-home", "--home-dir", f"/home/{user}",
                    "--shell", "/bin/bash", "--user-group", "--groups", extra, user], check=True)
    try:
        yield pwd.getpwnam(user), grp.getgrnam(extra)
    finally:
        subprocess.run(["userdel", user], check=False)
        subprocess.run(["groupdel", extra], check=False)


@pytest.fixture
def workdir():
    """A folder any user may enter (pytest's tmp_path is 0700 root's)."""
    path = Path("/tmp") / f"jobgen-run-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o755)
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def manifest(folder: Path, **job) -> Path:
    base = {"command": ["/bin/sh", "-c", REPORT], "schedule": "daily", "lock": {"scope": "unit"}}
    path = folder / "run.yaml"
    # JSON is YAML: values stay exactly what they are.
    path.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"},
                                "jobs": {"show": {**base, **job}}}))
    return path


def jobgen_run(path: Path, *extra: str, env: dict | None = None) -> Ran:
    return jobgen("run", str(path), "show", *extra, env=env)


def report(stdout: str) -> tuple[dict[str, str], dict[str, str]]:
    head, _, env = stdout.partition("ENV\n")
    facts = dict(line.split("=", 1) for line in head.splitlines())
    variables = dict(item.split("=", 1) for item in env.split("\x1e") if "=" in item)
    variables.pop("PWD", None)  # set by sh itself, not by jobgen or systemd
    return facts, variables


def test_run_gives_the_job_what_systemd_gives_the_unit(account, workdir):
    user, extra = account
    envfile = workdir / "job.env"
    envfile.write_text('FROM_FILE="two words"\nA=from-file\n')
    path = manifest(workdir, user=user.pw_name, working_directory=str(workdir),
                    environment={"A": "from-manifest", "B": "2"},
                    environment_file=str(envfile))
    # The caller's environment must not reach the job.
    res = jobgen_run(path, env={**os.environ, "CALLER_SECRET": "x", "HOME": "/root"})
    assert res.returncode == 0, res.stderr
    facts, env = report(res.stdout)

    # User=, no Group=: the user's primary group; supplementary groups from /etc/group.
    assert facts["uid"] == str(user.pw_uid)
    assert facts["gid"] == str(user.pw_gid)
    assert sorted(facts["groups"].split()) == sorted({str(user.pw_gid), str(extra.gr_gid)})
    assert facts["umask"] == "0022"
    assert facts["cwd"] == str(workdir)
    assert facts["nnp"] == "1"  # hardening: default has NoNewPrivileges=yes
    # Its own session, no controlling terminal.
    assert facts["sid"] == facts["pid"]
    assert facts["tty"] == "?"
    assert facts["devtty"] == "refused"
    # From scratch: manager PATH + locale, the user's login variables, Environment=, then
    # EnvironmentFile= (which wins, systemd.exec(5)).
    assert env == {
        **dict(manager_locale()),
        "PATH": manager_path(),
        "HOME": f"/home/{user.pw_name}",
        "USER": user.pw_name,
        "LOGNAME": user.pw_name,
        "SHELL": "/bin/bash",
        "A": "from-file",
        "B": "2",
        "FROM_FILE": "two words",
    }


def test_group_given_is_the_primary_group(account, workdir):
    user, extra = account
    path = manifest(workdir, user=user.pw_name, group=extra.gr_name)
    res = jobgen_run(path)
    assert res.returncode == 0, res.stderr
    facts, _ = report(res.stdout)
    assert facts["gid"] == str(extra.gr_gid)


def test_hardening_none_has_no_no_new_privs(account, workdir):
    user, _ = account
    res = jobgen_run(manifest(workdir, user=user.pw_name, hardening="none"))
    assert res.returncode == 0, res.stderr
    assert report(res.stdout)[0]["nnp"] == "0"


def test_nobody_gets_no_home_and_no_shell(workdir):
    """systemd synthesizes nobody: no HOME, no SHELL in a service's environment."""
    res = jobgen_run(manifest(workdir, user="nobody"))
    assert res.returncode == 0, res.stderr
    _, env = report(res.stdout)
    assert "HOME" not in env and "SHELL" not in env
    assert env["USER"] == env["LOGNAME"] == "nobody"


def test_missing_user_is_one_line_and_status_217(workdir):
    res = jobgen_run(manifest(workdir, user="no-such-user-jg"))
    assert res.returncode == 217
    assert res.stderr == ("jobgen: error: job 'show': user 'no-such-user-jg' does not exist on "
                          "this host (the unit would fail with status 217/USER)\n")
    assert res.stdout == ""


def test_missing_environment_file_fails_unless_optional(account, workdir):
    user, _ = account
    missing = workdir / "missing.env"
    res = jobgen_run(manifest(workdir, user=user.pw_name, environment_file=str(missing)))
    assert res.returncode == 78
    assert res.stderr == (f"jobgen: error: job 'show': environment file {missing}: No such file "
                          "or directory (the unit would fail the same way; '-/path' makes it "
                          "optional)\n")
    assert res.stdout == ""
    res = jobgen_run(manifest(workdir, user=user.pw_name, environment_file=f"-{missing}"))
    assert res.returncode == 0, res.stderr


def test_working_directory_is_entered_as_the_user(account, workdir):
    """systemd changes directory after dropping privileges: a folder only root may enter
    fails the unit with 200/CHDIR, and `jobgen run` the same way."""
    user, _ = account
    private = workdir / "private"
    private.mkdir(mode=0o700)
    res = jobgen_run(manifest(workdir, user=user.pw_name, working_directory=str(private)))
    assert res.returncode == 200
    assert res.stderr == (f"jobgen: error: job 'show': cannot enter working directory {private} "
                          f"as user '{user.pw_name}' (the unit would fail with status 200/CHDIR)\n")


def test_target_option(workdir):
    res = jobgen_run(manifest(workdir), "--target", "debian-12")
    assert res.returncode == 0, res.stderr
    res = jobgen_run(manifest(workdir), "--target", "debian-99")
    assert res.returncode == 2


def test_job_under_a_terminal_cannot_open_dev_tty(account, workdir):
    """`jobgen run` started from root's terminal (a real pseudo-terminal as its controlling
    tty): the job, running as another user, has no controlling terminal, cannot open
    /dev/tty, and its output still reaches the terminal through jobgen."""
    user, _ = account
    path = manifest(workdir, user=user.pw_name)
    pid, master = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty, as in a login shell
        os.execv(sys.executable, [*JOBGEN, "run", str(path), "show"])
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child side closed
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0, out
    text = out.decode().replace("\r\n", "\n")
    facts, _ = report(text)
    assert facts["uid"] == str(user.pw_uid)
    assert facts["devtty"] == "refused"
    assert facts["tty"] == "?"


# systemd's EnvironmentFile= syntax (env-file.c), one line per behaviour.
ENV_FILE_CASES = [
    ("A=1", [("A", "1")]),
    ("  SPACED = 1  ", [("SPACED", "1")]),  # whitespace around key and value dropped
    ("# comment\n; also\nC=1", [("C", "1")]),
    ('DQ="two words"', [("DQ", "two words")]),
    ("SQ='$HOME \\n'", [("SQ", "$HOME \\n")]),  # single quotes: literal
    ('ESC="a\\"b\\\\c\\$d\\x"', [("ESC", 'a"b\\c$d\\x')]),  # only \" \\ \` \$ escape
    ("BS=a\\ b", [("BS", "a b")]),
    ("CONT=one\\\ntwo", [("CONT", "onetwo")]),  # backslash-newline continues
    ('CAT="x"\'y\'z', [("CAT", "xyz")]),  # parts concatenate
    ("NOEXP=$B", [("NOEXP", "$B")]),  # no expansion
    ("EMPTY=", [("EMPTY", "")]),
    ("no equals sign\nAFTER=2", [("AFTER", "2")]),
    ("1A=x\nexport C=3", []),  # invalid names are ignored
    ("TWICE=1\nTWICE=2", [("TWICE", "1"), ("TWICE", "2")]),  # the later one wins when applied
    ('UNTERM="unterminated', [("UNTERM", "unterminated")]),
]


@pytest.mark.parametrize("text, expected", ENV_FILE_CASES)
def test_environment_file_syntax(text, expected):
    assert parse_env_file(text) == expected


def test_interrupt_reaches_the_job_and_ends_jobgen_run_with_its_status(workdir):
    """Ctrl-C (SIGINT to jobgen run) reaches the job, which has its own session, and
    `jobgen run` ends with the job's status instead of a traceback."""
    job = {"command": ["/bin/sh", "-c", 'trap "echo got-int; exit 9" INT; echo ready; '
                                        "while :; do sleep 0.05; done"]}
    proc = subprocess.Popen([*JOBGEN, "run", str(manifest(workdir, **job)), "show"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # the job runs: an observable fact
    proc.send_signal(2)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 9, err
    assert out == "got-int\n"
    assert "Traceback" not in err


# --- the same job as a real unit (systemd 252 booted in a container, as the host's) ---------

# Variables only a unit has (systemd.exec(5)): its run's id, its journal stream, the pid
# systemd spawned. Everything else must be the same.
UNIT_ONLY = {"INVOCATION_ID", "JOURNAL_STREAM", "SYSTEMD_EXEC_PID"}
LOCALE = {"LANG", "LANGUAGE"} | {v for v in os.environ if v.startswith("LC_")}


@pytest.mark.e2e
def test_run_and_the_unit_give_the_job_the_same_process():
    """One manifest, rendered and started as a unit under real systemd 252 (Debian 12, the
    host's own release) and run with `jobgen run` on the host, with the same user (same
    uid, groups, home and shell) created on both sides: the job reports the same ids,
    groups, umask, directory, session, no_new_privs and environment."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
    from container import Container, HarnessError, missing_prerequisites

    if reason := missing_prerequisites(["bookworm"]):
        pytest.skip(reason)
    if subprocess.run(["systemctl", "--version"], capture_output=True, text=True).stdout.split()[1] != "252":
        pytest.skip("the host's systemd is not 252: PATH and defaults would differ by design")
    tag = uuid.uuid4().hex[:6]
    user, extra, uid = f"jgcmp{tag}", f"jgcsup{tag}", 42000 + int(tag[:3], 16)
    setup = [
        ["groupadd", "-g", str(uid), user], ["groupadd", "-g", str(uid + 1), extra],
        ["useradd", "-u", str(uid), "-g", user, "-G", extra, "--no-create-home",
         "--home-dir", f"/home/{user}", "--shell", "/bin/bash", user],
        ["mkdir", "-p", "-m", "0777", "/run/jgcmp"],
    ]
    # Every EnvironmentFile= syntax case of ENV_FILE_CASES, read by systemd and by jobgen.
    envfile = "".join(f"{text}\n" for text, _ in ENV_FILE_CASES[:-1]) + ENV_FILE_CASES[-1][0]
    out = "/run/jgcmp/report-" + tag
    job = {"user": user, "working_directory": "/var/lib", "environment": {"A": "m", "B": "2"},
           "environment_file": "/etc/jgcmp.env", "command": ["/bin/sh", "-c", f"({REPORT}) > {out}"]}
    with_unit = Path("/tmp") / f"jobgen-cmp-{tag}"
    with_unit.mkdir()
    path = manifest(with_unit, **job)
    container = Container("252")
    try:
        container.boot()
        for argv in setup:
            container.run(*argv)
        container.write_file("/etc/jgcmp.env", envfile)
        units = with_unit / "units"
        r = jobgen("render", str(path), "-o", str(units))
        assert r.returncode == 0, r.stderr
        container.install_units(units)
        container.systemctl("start", "show.service", timeout=120)
        unit_facts, unit_env = report(container.read_file(out).decode())
    except HarnessError as e:
        pytest.fail(str(e), pytrace=False)
    finally:
        container.halt()
    try:
        for argv in setup:
            subprocess.run(argv, check=True)
        Path("/etc/jgcmp.env").write_text(envfile)
        res = jobgen_run(path)
        assert res.returncode == 0, res.stderr
        run_facts, run_env = report(Path(out).read_text())
    finally:
        subprocess.run(["userdel", user], check=False)
        subprocess.run(["groupdel", extra], check=False)
        subprocess.run(["groupdel", user], check=False)
        subprocess.run(["rm", "-rf", "/run/jgcmp", "/etc/jgcmp.env", str(with_unit)], check=False)
    for facts in (unit_facts, run_facts):
        assert facts.pop("pid") == facts.pop("sid")  # a session leader on both sides
        # Resource limits are each manager's own (the container's, the host's): compared
        # on one machine in tests/e2e/test_run_is_the_unit.py.
        facts.pop("core"), facts.pop("nofile")
    assert run_facts == unit_facts
    assert unit_env.keys() - UNIT_ONLY - LOCALE == run_env.keys() - LOCALE
    assert {k: v for k, v in unit_env.items() if k not in UNIT_ONLY | LOCALE} == \
        {k: v for k, v in run_env.items() if k not in LOCALE}
    assert "LANG" in unit_env and "LANG" in run_env  # each from its own system's locale
    assert run_env["SQ"] == "$HOME \\n" and run_env["UNTERM"] == "unterminated"  # read at all


def test_load_credential_is_a_private_file_for_the_job(account, workdir):
    """lock.credential (LoadCredential=NAME:PATH): the job finds the file under
    $CREDENTIALS_DIRECTORY, readable by its user only, and it is gone after the run."""
    user, _ = account
    secret = workdir / "lockpw"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)  # root's: the job's user could not read the original
    job = {"user": user.pw_name,
           "command": ["/bin/sh", "-c", 'echo "dir=$CREDENTIALS_DIRECTORY"; '
                                        'stat -c "mode=%a owner=%U" "$CREDENTIALS_DIRECTORY/lockpw"; '
                                        'echo "content=$(cat "$CREDENTIALS_DIRECTORY/lockpw")"']}
    path = manifest(workdir, **job)
    text = path.read_text().replace('"lock": {"scope": "unit"}', '"lock": {"scope": "cluster", '
                                    '"name": "shop:cred", "backend": "redis://127.0.0.1:1/0", '
                                    f'"credential": "lockpw:{secret}"}}')
    path.write_text(text)
    # The lock holder would need a server: run the job's own argv through the same context.
    from jobgen.compiler import pipeline
    from jobgen.runtime import run

    spec = pipeline.build(str(path), None, "/usr/bin/jobgen").plan.runs["show"]
    own = type(spec)(tuple(job["command"]), *[getattr(spec, f) for f in
                     ("environment", "working_directory", "user", "group", "environment_files",
                      "no_new_privs", "umask", "credentials")])
    out_r, out_w = os.pipe()
    with os.fdopen(out_w, "wb") as sink, open(os.devnull, "wb") as err:
        code = run.start(run.build(own), sink, err)
    output = os.read(out_r, 65536).decode()
    os.close(out_r)
    assert code == 0, output
    facts = dict(line.split("=", 1) for line in output.splitlines())
    assert f"mode=400 owner={user.pw_name}" in output
    assert facts["content"] == "s3cret"
    assert not Path(facts["dir"]).exists()


# --- the unit's context, property by property (compiler/context.CONTEXT) ---------------------

from jobgen.compiler import plan as planner  # noqa: E402
from jobgen.compiler.context import CONTEXT, RunSpec  # noqa: E402
from jobgen.compiler.names import LOCK_DIR  # noqa: E402
from jobgen.runtime import run as runtime  # noqa: E402


def named_manifest(folder: Path, name: str, **job) -> Path:
    """A job with its own name (a host lock file /run/jobgen/NAME.lock is per name)."""
    base = {"command": ["/bin/sh", "-c", REPORT], "schedule": "daily"}
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"jobgen": 1, "target": {"systemd": ">=252"}, "jobs": {name: {**base, **job}}}))
    return path


def run_job(path: Path, job: str, *, cwd=None, preexec=None, as_user: pwd.struct_passwd | None = None):
    argv = [*JOBGEN, "run", str(path), job]
    if as_user is not None:  # a real unprivileged caller
        argv = ["setpriv", f"--reuid={as_user.pw_uid}", f"--regid={as_user.pw_gid}", "--init-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=cwd, preexec_fn=preexec)


def closest(want: tuple[int, int], hard_now: int) -> str:
    """What `ulimit` shows for a limit systemd sets with setrlimit_closest() (rlimit-util.c)
    in a caller whose hard limit is hard_now: the soft value, never above the hard one."""
    inf = resource.RLIM_INFINITY
    hard = hard_now if want[1] == inf else want[1] if hard_now == inf else min(want[1], hard_now)
    soft = hard if want[0] == inf else want[0] if hard == inf else min(want[0], hard)
    return "unlimited" if soft == inf else str(soft)


def test_timeout_stops_the_job_and_reports_timeout(workdir):
    """timeout: 2s -> TimeoutStartSec=2s: systemd sends KillSignal= (SIGTERM) to every
    process of the unit and the reporter logs 'timeout'; jobgen run does the same and exits
    124 (timeout(1)'s status) instead of letting the job run its 60 s."""
    job = {"command": ["/bin/sh", "-c", "echo started; sleep 60; echo finished"], "timeout": "2s"}
    started = time.monotonic()
    res = jobgen_run(manifest(workdir, **job))
    print(f"timeout 2s: jobgen run ended after {time.monotonic() - started:.1f}s")  # measured, not asserted
    stop = runtime.manager_defaults().stop_timeout_usec / 1e6
    assert res.returncode == 124
    assert res.stdout == "started\n"  # never "finished"
    assert res.stderr == ("jobgen: show: timeout (result=timeout, killed=TERM): ran past its timeout of 2s: "
                          f"stopped with TERM (KillMode=control-group), SIGKILL after {stop:g}s; exit 124\n")


def _execute(spec: RunSpec, stop_usec: int) -> tuple[runtime.Ended, str]:
    out_r, out_w = os.pipe()
    with os.fdopen(out_w, "wb") as sink, open(os.devnull, "wb") as err:
        ended = runtime.execute(runtime.build(spec, defaults=runtime.ManagerDefaults(stop_usec, {})), sink, err)
    with os.fdopen(out_r, "rb") as f:
        return ended, f.read().decode()


def test_a_job_that_ignores_the_stop_signal_is_killed_after_the_stop_timeout():
    """KillMode=control-group: SIGTERM to every process; what is left after TimeoutStopSec=
    gets SIGKILL (jobs leave TimeoutStopSec= to the manager; 1 s here to keep it short)."""
    spec = RunSpec(("/bin/sh", "-c", 'trap "echo got-term" TERM; echo ready; while :; do sleep 0.1; done'),
                   timeout_usec=1_000_000)
    ended, out = _execute(spec, stop_usec=1_000_000)
    assert (ended.status, ended.result, ended.exit_code, ended.exit_status, ended.outcome) == \
        (124, "timeout", "killed", "KILL", "timeout")
    assert out.startswith("ready\n") and "got-term" in out


def test_kill_mode_mixed_signals_the_main_process_only():
    """KillMode=mixed (a cluster lock's holder): the stop signal reaches the main process
    only; its children get SIGKILL once it is gone, never the stop signal."""
    script = ('(trap "echo child-got-term" TERM; while :; do sleep 0.1; done) & '
              'trap "echo main-got-term; exit 0" TERM; echo ready; while :; do sleep 0.1; done')
    spec = RunSpec(("/bin/sh", "-c", script), timeout_usec=1_000_000, kill_mode="mixed")
    ended, out = _execute(spec, stop_usec=30_000_000)
    assert (ended.status, ended.result, ended.exit_code, ended.exit_status, ended.outcome) == \
        (124, "timeout", "exited", "0", "timeout")
    assert "main-got-term" in out and "child-got-term" not in out


def test_working_folder_is_root_when_the_unit_names_none(workdir):
    """No WorkingDirectory=: a system unit runs in / (systemd.exec(5)), not where the
    caller stands."""
    res = run_job(manifest(workdir), "show", cwd=workdir)
    assert res.returncode == 0, res.stderr
    assert report(res.stdout)[0]["cwd"] == "/"


@pytest.mark.parametrize("hardening, umask", [("none", "0022"), ("default", "0022"), ("strict", "0077")])
def test_umask_is_the_units(account, workdir, hardening, umask):
    """hardening: strict writes UMask=0077; the others write none (systemd: 0022)."""
    user, _ = account
    res = run_job(manifest(workdir, user=user.pw_name, hardening=hardening), "show",
                  preexec=lambda: os.umask(0o002))
    assert res.returncode == 0, res.stderr
    assert report(res.stdout)[0]["umask"] == umask


def test_resource_limits_are_the_managers_not_the_callers(workdir):
    """jobgen writes no Limit*=, so the unit has the manager's DefaultLimit*= (asked of the
    running manager; systemd's own defaults without one: core unlimited, files 1024)."""
    def caller_limits() -> None:  # a caller with its own soft limits
        resource.setrlimit(resource.RLIMIT_CORE, (4321, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    res = run_job(manifest(workdir), "show", preexec=caller_limits)
    assert res.returncode == 0, res.stderr
    facts, _ = report(res.stdout)
    unit = runtime.manager_defaults().rlimits
    assert facts["core"] == closest(unit["CORE"], resource.getrlimit(resource.RLIMIT_CORE)[1])
    assert facts["nofile"] == closest(unit["NOFILE"], resource.getrlimit(resource.RLIMIT_NOFILE)[1])


@pytest.mark.parametrize("overlap, extra, word", [
    ("skip", {}, "skipped"),
    ("wait", {"wait_timeout": "1s"}, "wait-expired"),
])
def test_a_lock_conflict_has_the_policys_outcome_word(workdir, overlap, extra, word):
    """The unit's reporter logs the policy's word for a conflict (policies.OVERLAP):
    `wait` whose bound ran out is 'wait-expired', not 'skipped'."""
    lock = workdir / "held.lock"
    path = manifest(workdir, overlap=overlap, hardening="none", lock={"scope": "host", "path": str(lock)}, **extra)
    holder = hold(lock)
    try:
        res = jobgen_run(path)
    finally:
        holder.kill()
        holder.wait()
    assert (res.returncode, res.stdout) == (75, "")
    assert res.stderr == (f"jobgen: show: {word} (result=success, exited=75): another run held the lock; "
                          "the command did not run\n")


@pytest.fixture
def lock_job():
    """A job name of its own, and its lock file removed before and after."""
    name = f"jgrunlock-{uuid.uuid4().hex[:8]}"
    lock = Path(LOCK_DIR) / f"{name}.lock"
    lock.unlink(missing_ok=True)
    yield name, lock
    lock.unlink(missing_ok=True)


@pytest.mark.parametrize("with_user", [True, False])
@pytest.mark.parametrize("before", [None, 0o644])
def test_lock_file_is_made_as_the_tmpfiles_snippet_makes_it(account, workdir, lock_job, with_user, before):
    """Before the snippet has run (or after a run that made the file itself), `jobgen run`
    as root applies the snippet's own lines: 0600, owned by the job's user (root without
    one), group root; the job then takes its lock as that user."""
    user, _ = account
    name, lock = lock_job
    if before is not None:
        Path(LOCK_DIR).mkdir(mode=0o755, exist_ok=True)
        lock.touch(mode=before)
        lock.chmod(before)
    job = {"user": user.pw_name} if with_user else {}
    res = run_job(named_manifest(workdir, name, **job), name)
    assert res.returncode == 0, res.stderr
    st = lock.stat()
    owner = user.pw_uid if with_user else 0
    assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) == (0o600, owner, 0)


def test_not_root_and_no_lock_file_is_one_line_and_66(account, workdir, lock_job):
    """As the job's own user, jobgen run cannot make the lock file: one line saying what
    to run, and flock(1)'s status for a lock file it cannot open."""
    user, _ = account
    name, lock = lock_job
    res = run_job(named_manifest(workdir, name, user=user.pw_name), name, as_user=user)
    assert res.returncode == 66
    assert res.stderr == (f"jobgen: error: job '{name}': lock file {lock} does not exist yet: run "
                          "`systemd-tmpfiles --create` as root (`jobgen apply` does; so does every boot), "
                          "or `jobgen run` as root, which makes it\n")
    assert res.stdout == "" and not lock.exists()


def test_not_root_and_someone_elses_lock_file_is_one_line_and_77(account, workdir, lock_job):
    user, _ = account
    name, lock = lock_job
    Path(LOCK_DIR).mkdir(mode=0o755, exist_ok=True)
    lock.touch(mode=0o600)  # the snippet's file of a job without a user: root's
    res = run_job(named_manifest(workdir, name), name, as_user=user)
    assert res.returncode == 77
    assert res.stderr == (f"jobgen: error: job '{name}': cannot open lock file {lock} as user "
                          f"'{user.pw_name}': Permission denied (it is 0600, the job's user's); "
                          "run `jobgen run` as root\n")
    assert res.stdout == ""


# --- one table, read from the unit ------------------------------------------------------------


def test_every_run_spec_field_is_a_unit_property_or_named_here():
    """CONTEXT is the table of unit properties `jobgen run` applies; the rest is named."""
    fields = set(RunSpec._fields)
    assert fields - {p.field for p in CONTEXT} == {"lock_file", "lock_files", "conflict_outcome"}
    assert {("Service", p.directive) for p in CONTEXT} <= set(planner.EMITTED)
    # jobgen writes no Limit*=: the unit's resource limits are the manager's defaults,
    # which is what runtime/run.py applies. A Limit*= here needs a CONTEXT row.
    assert [d for _, d in planner.EMITTED if d.startswith("Limit")] == []


SERVICE_CASES = [
    ({"hardening": "strict", "timeout": "90s", "overlap": "wait", "wait_timeout": "30s"}),
    ({"hardening": "none", "working_directory": "/srv", "user": "nobody"}),
    ({"lock": {"scope": "cluster", "name": "shop:x", "backend": "redis://r:6379/0"}, "timeout": "1h"}),
]


@pytest.mark.parametrize("job", SERVICE_CASES)
def test_the_run_spec_is_what_the_rendered_unit_says(job):
    """What jobgen run applies equals the directives in the service file systemd reads."""
    from jobgen.compiler import pipeline

    text = json.dumps({"jobgen": 1, "target": {"systemd": ">=252"},
                       "jobs": {"j": {"command": ["/bin/true"], "schedule": "daily", **job}}})
    result = pipeline.build("j.yaml", None, "/usr/bin/jobgen", text=text)
    service = dict(line.split("=", 1) for line in result.files["j.service"].decode().splitlines()
                   if "=" in line and not line.startswith("#"))
    spec = result.plan.runs["j"]
    assert spec.umask == int(service.get("UMask", "0022"), 8)
    assert spec.working_directory == service.get("WorkingDirectory", "/")
    assert spec.user == service.get("User")
    assert spec.kill_mode == service.get("KillMode", "control-group")
    span = service["TimeoutStartSec"]
    assert spec.timeout_usec == (None if span == "infinity" else timespec.parse_timespan(span))
    assert spec.success_exit_status == tuple(int(x) for x in service.get("SuccessExitStatus", "").split())
    assert spec.no_new_privs == (service.get("NoNewPrivileges") == "yes")


def test_a_lock_file_that_cannot_be_made_is_one_line_and_66(workdir):
    """systemd-tmpfiles' own reason, in one line; the job does not run."""
    (workdir / "a-file").write_text("")
    lock = workdir / "a-file" / "held.lock"
    res = jobgen_run(manifest(workdir, hardening="none", lock={"scope": "host", "path": str(lock)}))
    assert res.returncode == 66
    # systemd-tmpfiles' wording is its own (252: "Failed to create file PATH: Not a directory").
    head = f"jobgen: error: job 'show': cannot make lock file {lock} as its tmpfiles.d line says: systemd-tmpfiles: "
    assert res.stderr.startswith(head) and res.stderr.endswith("Not a directory\n")
    assert res.stderr.count("\n") == 1
    assert res.stdout == ""


# DefaultTimeoutStopUSec as `systemctl show` prints it (format_timespan) -> µs; None: unusable.
SHOWN_SPANS = [
    ("1min 30s", 90_000_000),
    ("90s", 90_000_000),
    ("5s 500ms", 5_500_000),
    ("1.500000s", 1_500_000),
    ("1h 2min", 3_720_000_000),
    ("infinity", None),
    ("", None),
    ("1 fortnight", None),
]


@pytest.mark.parametrize("text, usec", SHOWN_SPANS)
def test_the_managers_stop_timeout_is_read_as_systemctl_prints_it(text, usec):
    assert runtime._parse_span(text) == usec


# How the caller left jobgen run's output -> what still reaches it (the job's "out" on
# stdout, its "err" and the outcome line on stderr). /dev/full fails every write with
# ENOSPC, as a full disk does.
STREAMS = [
    ("2>&-", "out\n", None),
    (">&-", None, "err\njobgen: show: failed (result=exit-code, exited=3)\n"),
    (">&- 2>&-", None, None),
    (">/dev/full", None, "err\njobgen: show: failed (result=exit-code, exited=3)\n"),
    ("2>/dev/full", "out\n", None),
    (">/dev/full 2>/dev/full", None, None),
]


@pytest.mark.parametrize("redirect, out, err", STREAMS)
def test_closed_or_full_output_still_runs_the_job_and_exits_with_its_status(workdir, redirect, out, err):
    """Output that cannot be written (closed by the caller, a full disk) is dropped, never
    the run: the job runs and `jobgen run` exits with its status, the only word left."""
    ran = workdir / "ran"
    job = {"command": ["/bin/sh", "-c", f"touch {ran}; echo out; echo err >&2; exit 3"], "hardening": "none"}
    argv = " ".join(shlex.quote(a) for a in (*JOBGEN, "run", str(manifest(workdir, **job)), "show"))
    r = subprocess.run(["/bin/sh", "-c", f"exec {argv} {redirect}"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert ran.exists()
    assert r.stdout == (out or "") and r.stderr == (err or "")


@pytest.mark.parametrize("source, why", [
    ("big", "larger than 1024 KiB, systemd's limit for a credential"),
    ("/dev/zero", "not a regular file"),
    # open(2) of a FIFO waited for a writer, with Ctrl-C and SIGTERM only queued: a hang.
    ("fifo", "not a regular file"),
])
def test_a_credential_larger_than_systemds_limit_is_243_and_not_read_to_its_end(workdir, source, why):
    """systemd reads at most 1 MiB of a LoadCredential= file and fails the unit (243);
    jobgen run did read the whole file, and /dev/zero until memory ran out."""
    if source == "big":
        source = str(workdir / "big")
        with open(source, "wb") as f:
            f.truncate(runtime.CREDENTIAL_SIZE_MAX + 1)
    elif source == "fifo":
        source = str(workdir / "fifo")
        os.mkfifo(source)
    spec = RunSpec(("/bin/true",), credentials=(("lockpw", source),))
    with pytest.raises(runtime.RunError) as raised:
        runtime.execute(runtime.build(spec, defaults=runtime.ManagerDefaults(1_000_000, {})), None, None)
    assert raised.value.code == 243
    assert str(raised.value) == f"credential {source}: {why} (the unit would fail with status 243/CREDENTIALS)"


def test_an_environment_file_larger_than_systemds_limit_fails_unless_optional(workdir):
    """systemd reads an EnvironmentFile= whole up to 64 MiB and fails the unit on a larger
    one (an optional '-' one is skipped); jobgen run read any size, /dev/zero until memory
    ran out."""
    big = workdir / "big.env"
    with open(big, "wb") as f:
        f.truncate(runtime.ENV_FILE_SIZE_MAX + 1)
    for entry in (str(big), "/dev/zero"):
        with pytest.raises(runtime.RunError) as raised:
            runtime.load_env_files((entry,))
        assert raised.value.code == 78
        assert str(raised.value) == (f"environment file {entry}: larger than 64 MiB, systemd's limit for a file it "
                                     "reads (the unit would fail the same way)")
    assert runtime.load_env_files((f"-{big}", "-/dev/zero")) == []


@pytest.mark.parametrize("signum, word", [(signal.SIGTERM, outcomes.STOPPED), (signal.SIGINT, outcomes.FAILED)])
def test_a_stop_signal_to_jobgen_run_ends_the_job_with_the_units_word(workdir, signum, word):
    """SIGTERM to jobgen run is `systemctl stop` for the unit: the job gets it and the word
    is the reporter's for a stop; SIGINT (Ctrl-C) kills it too, which a unit counts as failed.
    The host lock's flock(1) is in the job's process group and ends by it too."""
    job = {"command": ["/bin/sh", "-c", "echo ready; while :; do sleep 0.05; done"], "hardening": "none",
           "lock": {"scope": "host", "path": str(workdir / "show.lock")}}
    proc = subprocess.Popen([*JOBGEN, "run", str(manifest(workdir, **job)), "show"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # the job runs: an observable fact
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    name = signal.Signals(signum).name.removeprefix("SIG")
    assert (proc.returncode, out, err) == (128 + signum, "", f"jobgen: show: {word} (result=signal, killed={name})\n")


def test_a_systemd_tmpfiles_that_cannot_be_started_is_one_line_and_66(workdir):
    """systemd-tmpfiles present but not startable (its interpreter gone; bound over the
    real one in a private mount namespace): one line and flock's 66, not 'internal error'."""
    broken = workdir / "systemd-tmpfiles"
    broken.write_text("#!/nonexistent/sh\n")
    broken.chmod(0o755)
    tool = shutil.which("systemd-tmpfiles", path="/usr/bin:/bin")
    lock = workdir / "locks" / "held.lock"
    path = manifest(workdir, hardening="none", lock={"scope": "host", "path": str(lock)})
    argv = " ".join(shlex.quote(a) for a in (*JOBGEN, "run", str(path), "show"))
    r = subprocess.run(["unshare", "-m", "/bin/sh", "-c", f"mount --bind {broken} {tool} && exec {argv}"],
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stdout) == (66, "")
    assert r.stderr == f"jobgen: error: job 'show': cannot make lock file {lock}: cannot run {tool}: No such file or directory\n"
    assert not lock.parent.exists()


_STOPPED_BY_SIGNAL = """
import sys
from jobgen.compiler.context import RunSpec
from jobgen.runtime import run as runtime
spec = RunSpec(("/bin/sh", "-c", sys.argv[1]))
ended = runtime.execute(runtime.build(spec, defaults=runtime.ManagerDefaults(1_000_000, {})), sys.stdout.buffer, sys.stderr.buffer)
print(ended.status, ended.result, ended.exit_code, ended.exit_status, ended.outcome, ended.why, sep="|", file=sys.stderr)
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_job_that_ignores_a_stop_signal_to_jobgen_run_is_killed_after_the_stop_timeout(signum):
    """systemctl stop sends the unit's KillSignal= and, once TimeoutStopSec= has passed,
    SIGKILL, with the result 'timeout'. A stop signal to jobgen run is that stop: a job that
    ignores it no longer runs on for ever (TimeoutStopSec= 1 s here, as the manager's)."""
    script = 'trap "echo got-it" TERM INT; echo ready; while :; do sleep 0.1; done'
    proc = subprocess.Popen([sys.executable, "-c", _STOPPED_BY_SIGNAL, script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # the job runs: an observable fact
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out) == (0, "got-it\n")
    # (sh may first say its sleep was "Terminated")
    assert err.splitlines()[-1] == "137|timeout|killed|KILL|timeout|did not stop within 1s of the stop signal (TimeoutStopSec=): SIGKILL; exit 137"


def test_a_job_that_stops_on_the_signal_keeps_its_own_result():
    """The SIGKILL deadline only matters to a job still running when it comes."""
    script = 'trap "echo got-it; exit 3" TERM; echo ready; while :; do sleep 0.1; done'
    proc = subprocess.Popen([sys.executable, "-c", _STOPPED_BY_SIGNAL, script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err.splitlines()[-1]) == (0, "got-it\n", "3|exit-code|exited|3|failed|")
