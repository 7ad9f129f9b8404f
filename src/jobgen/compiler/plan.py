"""Stage 3: the typed model + a target systemd -> the list of files to write.

Every directive jobgen writes goes through ``_Unit.set``, which asks the target
(target.py, built from systemd's own parser tables) whether *every* systemd in the
target range accepts it. A directive the target lacks is never written: the feature
that asked for it either has a fallback in ``FALLBACKS`` (reported as a note) or is a
positioned error. Values that changed meaning across releases are gated the same way
through ``Target.lacking_value``.

Nothing here escapes text for unit files: argv stays a tuple of strings inside
``Exec`` values until the template filter renders it (escape.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from jobgen.compiler import names, timespec
from jobgen.compiler.diagnostics import ERROR, NOTE, Diagnostic, ManifestError, Pos
from jobgen.compiler.model import Common, Job, Manifest, Worker
from jobgen.compiler.target import Target, parse_target
from jobgen.contract import locks

# Stated in every output when the manifest names no target: Debian 12 and RHEL 9 ship
# 252, the oldest systemd of the mainstream server releases still in full support.
# Assuming the newest would write directives older hosts ignore with a warning.
DEFAULT_TARGET = ">=252"

CONFLICT_EXIT = locks.CONFLICT_EXIT  # 75, EX_TEMPFAIL: the lock contract's conflict code, every scope
FLOCK = "/usr/bin/flock"  # util-linux; Essential on Debian, in util-linux-core on RHEL
SH = "/bin/sh"
DEFAULT_HOLDER = "/usr/bin/jobgen"

# The reporter: one structured journal line per run, so a skipped run is visible as a
# skip and never confused with success or failure. It runs as ExecStopPost= and reads
# what systemd.exec(5) passes there: $SERVICE_RESULT, $EXIT_CODE, $EXIT_STATUS.
# Arguments: $1 job, $2 overlap policy, $3 end-time stamp file ('' for none).
# With SuccessExitStatus=75 a conflict ends with result 'success', so the exit status is
# what tells it apart; 'exec-condition' is an activation the overrun check deferred.
# logger(1) --journald sends the fields natively; $INVOCATION_ID ties the line to its run
# even when logger exits before journald has read its cgroup.
REPORTER = (
    'case "$SERVICE_RESULT/$EXIT_CODE/$EXIT_STATUS" in '
    "success/exited/75) o=skipped; [ \"$2\" = wait ] && o=wait-expired ;; "
    "exec-condition/*) o=deferred ;; "
    "success/*) o=success ;; "
    "timeout/*) o=timeout ;; "
    "*) o=failed ;; "
    "esac; "
    '[ -n "$3" ] && [ "$o" != deferred ] && date +%s%6N > "$3"; '
    "printf 'MESSAGE=%s: %s (result=%s, %s=%s)\\nSYSLOG_IDENTIFIER=jobgen\\nJOBGEN_JOB=%s\\n"
    "JOBGEN_OUTCOME=%s\\nJOBGEN_POLICY=%s\\nJOBGEN_EXIT_STATUS=%s\\nJOBGEN_INVOCATION_ID=%s\\n' "
    '"$1" "$o" "$SERVICE_RESULT" "$EXIT_CODE" "$EXIT_STATUS" "$1" "$o" "$2" "$EXIT_STATUS" "$INVOCATION_ID" '
    "| logger --journald"
)

# Emulation of DeferReactivation=yes (systemd 257) for older targets. Before 257 a
# calendar elapse that falls while the job runs starts it again the moment the run ends
# (systemd-facts: "back-to-back"). The reporter writes each run's end time (µs) into a
# stamp; this ExecCondition= (243) defers an activation that begins less than
# DEFER_WINDOW_USEC after that end, and jobgen sets AccuracySec=1s for these timers so the
# catch-up comes inside the window. It cannot tell who started the unit: systemd 252
# keeps the *first* activation's $TRIGGER_TIMER_REALTIME_USEC on the unit ("older
# details object wins", src/core/unit.c@v252), so that variable is no witness. Hence a
# calendar slot or a `systemctl start` within the window after a run is deferred too
# (README "Overrun"; `jobgen run` never is).
DEFER_WINDOW_USEC = 2_000_000
DEFER_CHECK = (
    'now=$(date +%s%6N); ended=; read -r ended < "$1" 2>/dev/null; [ -n "$ended" ] || exit 0; '
    f'if [ $((now - ended)) -lt {DEFER_WINDOW_USEC} ]; then '
    'echo "previous run ended $(((now - ended) / 1000))ms ago: '
    'deferring this catch-up activation to the next calendar slot (DeferReactivation emulation)"; exit 1; fi'
)


@dataclass(frozen=True)
class Exec:
    """An Exec*= value: argv plus jobgen's own prefix; rendered by the 'exec' filter."""

    argv: tuple[str, ...]
    prefix: str = ""


@dataclass(frozen=True)
class Env:
    name: str
    value: str


@dataclass(frozen=True)
class Raw:
    """A value jobgen composed itself from checked parts (numbers, unit names, time
    spans in systemd's syntax); rendered with specifier escaping only, unless jobgen
    itself wrote a specifier on purpose (``specifiers=True``, e.g. ``%i``)."""

    text: str
    specifiers: bool = False


Value = Exec | Env | Raw


@dataclass(frozen=True)
class UnitFile:
    filename: str
    kind: str  # service, timer, target, tmpfiles
    sections: tuple[tuple[str, tuple[tuple[str, Value], ...]], ...] = ()
    lines: tuple[str, ...] = ()  # tmpfiles.d entries
    comment: str = ""


@dataclass(frozen=True)
class RunSpec:
    """What `jobgen run` executes: the unit's own ExecStart= argv and the context systemd
    gives it (runtime/run.py builds the process from this, as systemd.exec(5) does)."""

    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    working_directory: str | None
    user: str | None
    group: str | None
    environment_files: tuple[str, ...] = ()  # EnvironmentFile= values, '-' prefix kept
    no_new_privs: bool = False  # NoNewPrivileges=yes in the unit
    umask: int = 0o022  # UMask= (systemd's default; jobgen sets none)
    credentials: tuple[tuple[str, str], ...] = ()  # LoadCredential= NAME:PATH pairs

    @classmethod
    def for_job(cls, argv: tuple[str, ...], job: Job) -> "RunSpec":
        credential = job.lock.credential if job.lock else None
        return cls(argv, job.environment, job.working_directory, job.user, job.group,
                   environment_files=(job.environment_file,) if job.environment_file else (),
                   no_new_privs=("Service", "NoNewPrivileges", "yes") in HARDENING[job.hardening],
                   credentials=(tuple(credential.split(":", 1)),) if credential else ())


@dataclass(frozen=True)
class Plan:
    manifest: str
    target: Target
    files: tuple[UnitFile, ...]
    notes: tuple[Diagnostic, ...]
    runs: dict[str, RunSpec] = field(compare=False)


# --------------------------------------------------------------------------- hardening
# Profiles are data: (section, directive, value). A directive the target lacks is left
# out with a note (FALLBACKS), so 'strict' degrades on old systemd instead of warning.
_HARDENING_DEFAULT = (
    ("Service", "NoNewPrivileges", "yes"),
    ("Service", "PrivateTmp", "yes"),
    ("Service", "ProtectSystem", "full"),
    ("Service", "ProtectKernelTunables", "yes"),
    ("Service", "ProtectKernelModules", "yes"),
    ("Service", "ProtectKernelLogs", "yes"),
    ("Service", "ProtectControlGroups", "yes"),
    ("Service", "ProtectClock", "yes"),
    ("Service", "ProtectHostname", "yes"),
    ("Service", "RestrictSUIDSGID", "yes"),
    ("Service", "RestrictRealtime", "yes"),
    ("Service", "LockPersonality", "yes"),
    ("Service", "SystemCallArchitectures", "native"),
)
_HARDENING_STRICT = _HARDENING_DEFAULT + (
    ("Service", "ProtectSystem", "strict"),
    ("Service", "ProtectHome", "yes"),
    ("Service", "PrivateDevices", "yes"),
    ("Service", "PrivateUsers", "yes"),
    ("Service", "PrivateIPC", "yes"),
    ("Service", "ProtectProc", "invisible"),
    ("Service", "ProcSubset", "pid"),
    ("Service", "RestrictNamespaces", "yes"),
    ("Service", "RestrictAddressFamilies", "AF_UNIX AF_INET AF_INET6"),
    ("Service", "CapabilityBoundingSet", ""),
    ("Service", "AmbientCapabilities", ""),
    ("Service", "SystemCallFilter", "@system-service"),
    ("Service", "SystemCallFilter", "~@privileged @resources"),
    ("Service", "SystemCallErrorNumber", "EPERM"),
    ("Service", "MemoryDenyWriteExecute", "yes"),
    ("Service", "RemoveIPC", "yes"),
    ("Service", "UMask", "0077"),
    ("Service", "DevicePolicy", "closed"),
    ("Service", "KeyringMode", "private"),
)
HARDENING = {"none": (), "default": _HARDENING_DEFAULT, "strict": _HARDENING_STRICT}

# Every directive jobgen can write (`jobgen directives` lists them for a target; a test
# checks that rendered units use no other).
EMITTED: tuple[tuple[str, str], ...] = (
    ("Unit", "Description"), ("Unit", "OnFailure"), ("Unit", "OnSuccess"), ("Unit", "PartOf"),
    ("Unit", "Wants"), ("Unit", "StartLimitIntervalSec"), ("Unit", "StartLimitBurst"),
    ("Service", "Type"), ("Service", "User"), ("Service", "Group"), ("Service", "WorkingDirectory"),
    ("Service", "Environment"), ("Service", "EnvironmentFile"), ("Service", "ExecCondition"),
    ("Service", "ExecStart"), ("Service", "ExecStopPost"), ("Service", "SuccessExitStatus"),
    ("Service", "LoadCredential"), ("Service", "TimeoutStartSec"), ("Service", "TimeoutStopSec"),
    ("Service", "MemoryMax"), ("Service", "Restart"), ("Service", "RestartSec"),
    ("Service", "RestartSteps"), ("Service", "RestartMaxDelaySec"), ("Service", "KillMode"),
    ("Service", "KillSignal"), ("Service", "RuntimeMaxSec"), ("Service", "WatchdogSec"),
    ("Service", "ReadWritePaths"),
    ("Timer", "OnCalendar"), ("Timer", "OnActiveSec"), ("Timer", "OnUnitActiveSec"),
    ("Timer", "OnUnitInactiveSec"), ("Timer", "OnBootSec"), ("Timer", "Persistent"),
    ("Timer", "DeferReactivation"), ("Timer", "AccuracySec"), ("Timer", "RandomizedDelaySec"),
    ("Timer", "FixedRandomDelay"), ("Timer", "RandomizedOffsetSec"),
    ("Install", "WantedBy"),
) + tuple(dict.fromkeys((s, d) for s, d, _ in _HARDENING_STRICT))


# Directive -> what jobgen does when the target lacks it (instead of an error).
FALLBACKS: dict[tuple[str, str], str] = {
    ("Timer", "DeferReactivation"): "emulated with ExecCondition= (README: Overrun)",
    ("Service", "RestartSteps"): "restarts use the fixed restart_delay",
    ("Service", "RestartMaxDelaySec"): "restarts use the fixed restart_delay",
    ("Service", "Type"): "Type=simple",
} | {(s, d): "left out of the hardening profile" for s, d, _ in _HARDENING_STRICT}


class _Unit:
    """Collects one unit's directives, checking each against the target."""

    def __init__(self, ctx: "_Context", filename: str, kind: str):
        self.ctx, self.filename, self.kind = ctx, filename, kind
        self.sections: dict[str, list[tuple[str, Value]]] = {}

    def supported(self, section: str, key: str, pos: Pos, feature: str) -> bool:
        reason = self.ctx.target.lacking(section, key)
        if reason is None:
            return True
        fallback = FALLBACKS.get((section, key))
        if fallback is None:
            self.ctx.error(pos, f"{self.ctx.what}: '{feature}' ({key}=) {reason}")
        else:
            self.ctx.note(pos, f"{key}= {reason}: {fallback}")
        return False

    def set(self, section: str, key: str, value: Value, pos: Pos | None = None, feature: str | None = None) -> None:
        pos = pos or self.ctx.pos
        if self.supported(section, key, pos, feature or key):
            self.sections.setdefault(section, []).append((key, value))

    def freeze(self, comment: str = "") -> UnitFile:
        order = ("Unit", "Service", "Timer", "Install")
        sections = tuple((s, tuple(self.sections[s])) for s in order if s in self.sections)
        return UnitFile(self.filename, self.kind, sections, comment=comment)


class _Context:
    def __init__(self, target: Target, holder: str, pos: Pos):
        self.target, self.holder, self.pos = target, holder, pos
        self.what = ""  # "job 'x'" / "worker 'y'": how messages name what they are about
        self.diags: list[Diagnostic] = []

    def error(self, pos: Pos, message: str) -> None:
        self.diags.append(Diagnostic(pos, ERROR, message))

    def note(self, pos: Pos, message: str) -> None:
        self.diags.append(Diagnostic(pos, NOTE, message))

    def value_ok(self, section: str, key: str, value: str, pos: Pos, feature: str) -> bool:
        reason = self.target.lacking_value(section, key, value)
        if reason is not None:
            self.error(pos, f"{self.what}: '{feature}' {reason}")
            return False
        return True


def _span(usec: int) -> Raw:
    return Raw(timespec.format_timespan(usec))


# --------------------------------------------------------------------------- common keys


def _common_unit(u: _Unit, c: Common, description: Raw) -> None:
    u.set("Unit", "Description", description)
    for unit in c.on_failure:
        # specifiers=True: names.UNIT_REF admits only %n %N %p %P %i %I, meant as specifiers.
        u.set("Unit", "OnFailure", Raw(unit, specifiers=True), c.where("on_failure"), "on_failure")


def _common_service(u: _Unit, c: Common) -> None:
    if c.user:
        u.set("Service", "User", Raw(c.user))
    if c.group:
        u.set("Service", "Group", Raw(c.group))
    if c.working_directory:
        u.set("Service", "WorkingDirectory", Raw(c.working_directory))
    for name, value in c.environment:
        u.set("Service", "Environment", Env(name, value))
    if c.environment_file:
        u.set("Service", "EnvironmentFile", Raw(c.environment_file))
    if c.memory_max:
        u.set("Service", "MemoryMax", Raw(c.memory_max), c.where("memory_max"), "memory_max")


def _hardening(u: _Unit, c: Common, writable: tuple[str, ...] = ()) -> None:
    profile = HARDENING[c.hardening]
    chosen: dict[str, list[str]] = {}
    for section, key, value in profile:
        # A later row for a single-valued key replaces the earlier one (strict's
        # ProtectSystem=strict over default's full); list-valued keys accumulate.
        if key == "SystemCallFilter":
            chosen.setdefault(key, []).append(value)
        else:
            chosen[key] = [value]
    pos = c.where("hardening")
    for key, values in chosen.items():
        for value in values:
            u.set("Service", key, Raw(value), pos, f"hardening: {c.hardening}")
    if writable and chosen.get("ProtectSystem") == ["strict"]:
        for path in writable:
            u.set("Service", "ReadWritePaths", Raw(path))


# --------------------------------------------------------------------------- jobs


def _lock_argv(ctx: _Context, job: Job) -> tuple[tuple[str, ...], str | None]:
    """The lock wrapper in front of the job's argv, and the host lock file if any."""
    lock = job.lock
    wait = timespec.seconds_ceiling(job.wait_usec) if job.wait_usec else None
    if lock is None or lock.scope == "unit":
        return job.command, None
    if lock.scope == "host":
        path = lock.path or names.lock_file(lock.name)
        mode = ("--wait", str(wait)) if wait else ("--nonblock",)
        # No --close: the job keeps the lock's file descriptor, so if flock itself is
        # killed the lock stays held until the job is gone too (never two at once).
        return (FLOCK, *mode, "--conflict-exit-code", str(CONFLICT_EXIT), path, *job.command), path
    argv = [ctx.holder, "lock", "--backend", lock.backend or "", "--name", lock.name, "--job", job.name]
    if wait:
        argv += ["--wait", str(wait)]
    if lock.ttl_usec:
        argv += ["--ttl", str(timespec.seconds_ceiling(lock.ttl_usec))]
    if lock.credential:
        argv += ["--password-file", "${CREDENTIALS_DIRECTORY}/" + lock.credential.split(":", 1)[0]]
    elif lock.password_file:
        argv += ["--password-file", lock.password_file]
    return (*argv, "--", *job.command), None


def _defer(job: Job) -> bool:
    # systemd.timer(5): DeferReactivation= acts on OnCalendar= only. A waiting policy
    # wants the queued run; 'allow' has no lock to protect.
    return job.schedule.kind == "calendar" and job.overlap == "skip"


def _emulate_defer(ctx: _Context, timer: _Unit, job: Job) -> bool:
    """DeferReactivation=yes where the target has it; else whether to emulate it."""
    reason = ctx.target.lacking("Timer", "DeferReactivation")
    if reason is None:
        timer.set("Timer", "DeferReactivation", Raw("yes"))
        return False
    pos = job.where("overlap")
    if ctx.target.has("Service", "ExecCondition"):
        ctx.note(pos, f"DeferReactivation= {reason}: {FALLBACKS[('Timer', 'DeferReactivation')]}")
        return True
    ctx.note(pos, f"DeferReactivation= {reason}, and its emulation needs ExecCondition= (243): "
             "a run that overruns a calendar slot is followed by one catch-up run (README: Overrun)")
    return False


def _job_files(ctx: _Context, job: Job) -> tuple[list[UnitFile], RunSpec, list[str]]:
    ctx.pos, ctx.what = job.pos, f"job '{job.name}'"
    argv, lockfile = _lock_argv(ctx, job)
    stamp = f"{names.LOCK_DIR}/{job.name}.ended"
    description = job.description or f"jobgen job {job.name}"

    timer = _Unit(ctx, f"{job.name}.timer", "timer")
    timer.set("Unit", "Description", Raw(f"Schedule for {job.name}: {description}"))
    sched = job.schedule
    if sched.kind == "calendar":
        if sched.has_timezone:
            ctx.value_ok("Timer", "OnCalendar", "time zone", job.where("timezone") if "timezone" in job.keypos else job.where("schedule"), "time zone in schedule")
        timer.set("Timer", "OnCalendar", Raw(sched.calendar or ""))
    elif sched.kind == "every":
        # Runs start every N: the first N after the timer starts, then N after each start.
        # With overlap: skip the interval is counted from the end of the previous run
        # (OnUnitInactiveSec=), so an overrun never triggers an immediate second run.
        timer.set("Timer", "OnActiveSec", _span(sched.usec or 0))
        key = "OnUnitInactiveSec" if job.overlap == "skip" else "OnUnitActiveSec"
        timer.set("Timer", key, _span(sched.usec or 0))
    else:
        timer.set("Timer", "OnBootSec", _span(sched.usec or 0))
    if job.persistent:
        timer.set("Timer", "Persistent", Raw("yes"), job.where("persistent"), "persistent")
    emulate_defer = _defer(job) and _emulate_defer(ctx, timer, job)
    accuracy = job.accuracy_usec
    if emulate_defer and accuracy is None:
        accuracy = 1_000_000
    if accuracy is not None:
        timer.set("Timer", "AccuracySec", _span(accuracy), job.where("accuracy"), "accuracy")
    if job.randomized_delay_usec:
        timer.set("Timer", "RandomizedDelaySec", _span(job.randomized_delay_usec), job.where("randomized_delay"), "randomized_delay")
    if job.fixed_random_delay:
        timer.set("Timer", "FixedRandomDelay", Raw("yes"), job.where("fixed_random_delay"), "fixed_random_delay")
    if job.randomized_offset_usec:
        timer.set("Timer", "RandomizedOffsetSec", _span(job.randomized_offset_usec), job.where("randomized_offset"), "randomized_offset")
    timer.set("Install", "WantedBy", Raw("timers.target"))

    svc = _Unit(ctx, f"{job.name}.service", "service")
    _common_unit(svc, job, Raw(description))
    for unit in job.on_success:
        svc.set("Unit", "OnSuccess", Raw(unit, specifiers=True), job.where("on_success"), "on_success")
    svc.set("Service", "Type", Raw("oneshot"))
    _common_service(svc, job)
    if emulate_defer:
        svc.set("Service", "ExecCondition", Exec((SH, "-c", DEFER_CHECK, "jobgen-defer", stamp)), job.where("overlap"), "overlap: skip (DeferReactivation emulation)")
    svc.set("Service", "ExecStart", Exec(argv))
    reporter = (SH, "-c", REPORTER, "jobgen-report", job.name, job.overlap, stamp if emulate_defer else "")
    # '-': a reporter that cannot log must not turn a good run into a failed unit.
    svc.set("Service", "ExecStopPost", Exec(reporter, prefix="-"))
    if job.lock is not None and job.lock.scope != "unit":
        svc.set("Service", "SuccessExitStatus", Raw(str(CONFLICT_EXIT)))
    if job.lock is not None and job.lock.scope == "cluster":
        # The holder forwards SIGTERM to the command; KillMode=mixed sends it to the holder
        # only, so the command gets it once (systemd.kill(5)), SIGKILL to all at the end.
        svc.set("Service", "KillMode", Raw("mixed"))
    if job.lock is not None and job.lock.credential:
        svc.set("Service", "LoadCredential", Raw(job.lock.credential), job.where("lock"), "lock.credential")
    # A oneshot's run time is bounded by TimeoutStartSec= (RuntimeMaxSec= does nothing for
    # oneshot, systemd.service(5)); the lock wait counts inside it.
    if job.timeout_usec:
        svc.set("Service", "TimeoutStartSec", _span(job.timeout_usec + (job.wait_usec or 0)))
    else:
        svc.set("Service", "TimeoutStartSec", Raw("infinity"))
    writable = {os.path.dirname(lockfile)} if lockfile else set()
    if emulate_defer:
        writable.add(names.LOCK_DIR)
    _hardening(svc, job, writable=tuple(sorted(writable)))

    tmpfiles = []
    if lockfile:
        tmpfiles.append(_tmpfile(lockfile, job))
    if emulate_defer:
        tmpfiles.append(_tmpfile(stamp, job))
    run = RunSpec.for_job(argv, job)
    comment = f"job {job.name}: overlap={job.overlap}, lock={job.lock.scope if job.lock else 'none'}"
    return [svc.freeze(comment), timer.freeze(comment)], run, tmpfiles


def _tmpfile(path: str, c: Common) -> str:
    # systemd-tmpfiles(8) 'f': create if missing, never truncate or age it. The job's user
    # must be able to open it; others only read (flock(1) locks a read-only descriptor).
    owner = c.user or "root"
    group = c.group or ("root" if not c.user else "-")
    return f"f {path} 0640 {owner} {group} -"


# --------------------------------------------------------------------------- workers


def _worker_files(ctx: _Context, w: Worker) -> list[UnitFile]:
    ctx.pos, ctx.what = w.pos, f"worker '{w.name}'"
    template = w.instances > 1
    name = f"{w.name}@.service" if template else f"{w.name}.service"
    description = w.description or f"jobgen worker {w.name}"
    svc = _Unit(ctx, name, "service")
    # A template's instances show their number in the journal and `systemctl status`
    # (%i, systemd.unit(5) SPECIFIERS); the user's text keeps its '%' literal.
    title = Raw(description.replace("%", "%%") + " (instance %i)", specifiers=True) if template else Raw(description)
    _common_unit(svc, w, title)
    if w.start_limit_interval_usec:
        svc.set("Unit", "StartLimitIntervalSec", _span(w.start_limit_interval_usec))
    if w.start_limit_burst:
        svc.set("Unit", "StartLimitBurst", Raw(str(w.start_limit_burst)))
    if template:
        # PartOf=: stopping or restarting NAME.target reaches every instance.
        svc.set("Unit", "PartOf", Raw(f"{w.name}.target"))
    wtype = w.type
    reason = ctx.target.lacking_value("Service", "Type", wtype)
    if reason and wtype == "exec":
        # Type=exec (240) only adds "start fails if exec fails"; simple runs the same program.
        ctx.note(w.where("type"), f"{reason}: Type=simple")
        wtype = "simple"
    elif reason:
        ctx.error(w.where("type"), f"{ctx.what}: 'type: {wtype}' {reason}")
    svc.set("Service", "Type", Raw(wtype))
    _common_service(svc, w)
    svc.set("Service", "ExecStart", Exec(w.command))
    svc.set("Service", "Restart", Raw(w.restart))
    svc.set("Service", "RestartSec", _span(w.restart_delay_usec))
    if w.restart_steps and w.restart_max_delay_usec:
        svc.set("Service", "RestartSteps", Raw(str(w.restart_steps)), w.where("restart_steps"), "restart_steps")
        svc.set("Service", "RestartMaxDelaySec", _span(w.restart_max_delay_usec), w.where("restart_max_delay"), "restart_max_delay")
    # Graceful stop (systemd.kill(5)): the stop signal to the main process only, then
    # after TimeoutStopSec= SIGKILL to everything left in the cgroup.
    svc.set("Service", "KillMode", Raw("mixed"))
    svc.set("Service", "KillSignal", Raw(w.stop_signal))
    svc.set("Service", "TimeoutStopSec", _span(w.stop_timeout_usec))
    if w.recycle_after_usec:
        svc.set("Service", "RuntimeMaxSec", _span(w.recycle_after_usec), w.where("recycle_after"), "recycle_after")
    if w.watchdog_usec:
        svc.set("Service", "WatchdogSec", _span(w.watchdog_usec), w.where("watchdog"), "watchdog")
    _hardening(svc, w)
    files = []
    if template:
        tgt = _Unit(ctx, f"{w.name}.target", "target")
        tgt.set("Unit", "Description", Raw(f"{description} ({w.instances} instances)"))
        for i in range(1, w.instances + 1):
            tgt.set("Unit", "Wants", Raw(f"{w.name}@{i}.service"))
        tgt.set("Install", "WantedBy", Raw("multi-user.target"))
        files.append(tgt.freeze(f"worker {w.name}: {w.instances} instances"))
    else:
        svc.set("Install", "WantedBy", Raw("multi-user.target"))
    files.append(svc.freeze(f"worker {w.name}"))
    return files


# --------------------------------------------------------------------------- entry point


def plan(manifest: Manifest, holder: str = DEFAULT_HOLDER, tmpfiles_name: str | None = None) -> Plan:
    """Raise ManifestError when a feature cannot be expressed for the target."""
    assumed = manifest.target is None
    target = manifest.target or parse_target(DEFAULT_TARGET)
    ctx = _Context(target, holder, manifest.target_pos or (manifest.jobs or manifest.workers)[0].pos)
    files: list[UnitFile] = []
    runs: dict[str, RunSpec] = {}
    tmp_lines: list[str] = []
    for job in manifest.jobs:
        units, run, lines = _job_files(ctx, job)
        files += units
        runs[job.name] = run
        tmp_lines += lines
    for worker in manifest.workers:
        files += _worker_files(ctx, worker)
    if tmp_lines:
        # The lock directory is created with a deliberate owner and mode, once, by
        # systemd-tmpfiles; jobs never create or delete lock files (a lock is the kernel
        # lock on an open file, not the file's existence).
        head = [f"d {names.LOCK_DIR} 0755 root root -"]
        name = tmpfiles_name or "jobgen.conf"
        files.append(UnitFile(f"tmpfiles.d/{name}", "tmpfiles", lines=tuple(head + sorted(tmp_lines))))
    if any(d.severity == ERROR for d in ctx.diags):
        raise ManifestError(ctx.diags)
    notes = sorted(set(ctx.diags))
    if assumed:
        notes.insert(0, Diagnostic(ctx.pos, NOTE, f"no target systemd given (target: {{systemd: ...}} or --systemd); assuming {DEFAULT_TARGET}"))
    return Plan(manifest.path, target, tuple(sorted(files, key=lambda f: f.filename)), tuple(notes), runs)
