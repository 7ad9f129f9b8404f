"""The unit's process context, read back from the unit plan.py wrote: what `jobgen run`
executes and how (runtime/run.py applies it).

``CONTEXT`` is the one table of "unit property -> how `jobgen run` applies it". Each row
reads its directive's values out of the frozen service unit, the very values the
template renders, so `jobgen run` cannot drift from the unit: a directive plan.py writes
differently, or drops for an old target, changes what `jobgen run` does too. A directive
the unit lacks means systemd's default for it, stated in the row with its source.

Values are plan.py's Exec (argv), Env (name, value) and Raw (text); this module reads
them by attribute so that plan.py, which builds units, can import it.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from jobgen.compiler import timespec
from jobgen.contract import outcomes

# systemd's defaults for a system service when the unit does not set the directive.
DEFAULT_WORKING_DIRECTORY = "/"  # systemd.exec(5) WorkingDirectory=: "the root directory" for the system manager
DEFAULT_UMASK = 0o022  # systemd.exec(5) UMask=: "Defaults to 0022"
DEFAULT_KILL_MODE = "control-group"  # systemd.kill(5) KillMode=
DEFAULT_KILL_SIGNAL = "SIGTERM"  # systemd.kill(5) KillSignal=; SIGKILL follows (FinalKillSignal=)


class RunSpec(NamedTuple):
    """What `jobgen run` executes: the unit's own ExecStart= argv and the process context
    systemd gives it (fields from CONTEXT), plus what is not a directive: the lock file's
    tmpfiles.d(5) lines and the policy's outcome word for a lock conflict. A named tuple
    (a copy with changes is ._replace()): a frozen dataclass executes six generated
    methods when it is defined, at every start of every command."""

    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = ()
    working_directory: str = DEFAULT_WORKING_DIRECTORY
    user: str | None = None
    group: str | None = None
    environment_files: tuple[str, ...] = ()  # EnvironmentFile= values, '-' prefix kept
    no_new_privs: bool = False
    umask: int = DEFAULT_UMASK
    credentials: tuple[tuple[str, str], ...] = ()  # LoadCredential= NAME:PATH pairs
    timeout_usec: int | None = None  # None: no start timeout (infinity)
    kill_mode: str = DEFAULT_KILL_MODE
    kill_signal: str = DEFAULT_KILL_SIGNAL
    stop_timeout_usec: int | None = None  # None: the manager's DefaultTimeoutStopSec=
    success_exit_status: tuple[int, ...] = ()
    lock_file: str | None = None  # the host lock file the lock wrapper opens
    # The tmpfiles.d(5) lines that make the job's lock file (plan._lock_file_lines): the
    # same strings the snippet holds, applied with systemd-tmpfiles.
    lock_files: tuple[str, ...] = ()
    # JOBGEN_OUTCOME of a lock conflict: the same policy value the unit's reporter gets.
    conflict_outcome: str = ""


def _last(values: list) -> Any:
    return values[-1]


def _text(values: list) -> str:
    return values[-1].text


def _span(values: list) -> int | None:
    usec = timespec.parse_timespan(values[-1].text, allow_infinity=True)
    return None if usec == timespec.USEC_INFINITY else usec


# A table row, a named tuple (as target.py's ValueGate): a frozen dataclass executes six
# generated methods when it is defined, at every start of every command.
class Property(NamedTuple):
    directive: str  # [Service] directive
    field: str  # RunSpec field
    read: Callable[[list], Any]  # the unit's values of the directive, in order -> the field
    applies: str  # how runtime/run.py applies it (README "Running a job by hand")


# unit property -> how `jobgen run` applies it. The field's default in RunSpec is what
# systemd does without the directive.
CONTEXT: tuple[Property, ...] = (
    Property("ExecStart", "argv", lambda v: tuple(_last(v).argv),
             "executed as is: the lock wrapper (flock(1) or `jobgen lock`) and the command"),
    Property("User", "user", _text,
             "uid of the user (as root; otherwise jobgen run must already be that user: 77)"),
    Property("Group", "group", _text,
             "gid; without it the user's primary group; supplementary groups from the group "
             "database (initgroups(3)), as systemd does for User="),
    Property("Environment", "environment", lambda v: tuple((e.name, e.value) for e in v),
             "over the manager's PATH and locale and the user's HOME/USER/LOGNAME/SHELL"),
    Property("EnvironmentFile", "environment_files", lambda v: tuple(e.text for e in v),
             "read as systemd reads it (env-file.c), after Environment= (it wins)"),
    Property("WorkingDirectory", "working_directory", _text,
             "chdir(2) as the job's user (failure: 200/CHDIR); without it /"),
    Property("UMask", "umask", lambda v: int(_text(v), 8), "umask(2) (0022 without it)"),
    Property("NoNewPrivileges", "no_new_privs", lambda v: _text(v) == "yes",
             "prctl(PR_SET_NO_NEW_PRIVS) after the identity change"),
    Property("LoadCredential", "credentials", lambda v: tuple(tuple(e.text.split(":", 1)) for e in v),
             "copied into a private folder named by $CREDENTIALS_DIRECTORY, removed after"),
    Property("TimeoutStartSec", "timeout_usec", _span,
             "counted from the start; when it runs out: the stop sequence below, outcome "
             f"'{outcomes.TIMEOUT}' (a oneshot has none without it, systemd.service(5))"),
    Property("KillMode", "kill_mode", _text,
             "control-group: KillSignal= to every process of the job; mixed: to the main "
             "process only; SIGKILL to every process left after TimeoutStopSec="),
    Property("KillSignal", "kill_signal", _text, "the first signal of the stop (SIGTERM without it)"),
    Property("TimeoutStopSec", "stop_timeout_usec", _span,
             "from KillSignal= to SIGKILL; without it the manager's DefaultTimeoutStopSec= "
             "(systemctl show; 90 s, systemd-system.conf(5), when no manager answers)"),
    Property("SuccessExitStatus", "success_exit_status", lambda v: tuple(int(x) for e in v for x in e.text.split()),
             "exit statuses counted as result 'success' (75: the lock conflict)"),
)
# Limit*= (systemd.exec(5)): jobgen writes none (tests/test_run.py holds plan.EMITTED to
# that), so a unit's resource limits are the manager's DefaultLimit*=
# (systemd-system.conf(5)); runtime/run.py asks the running manager for them.

def process_context(sections, **extra: Any) -> RunSpec:
    """The RunSpec of a frozen service unit's sections (plan.UnitFile.sections)."""
    service: dict[str, list] = {}
    for name, directives in sections:
        if name == "Service":
            for key, value in directives:
                service.setdefault(key, []).append(value)
    fields = {p.field: p.read(service[p.directive]) for p in CONTEXT if p.directive in service}
    return RunSpec(**fields, **extra)
