"""The typed manifest: what validate.py produces and plan.py consumes.

Frozen records and named tuples; times are microseconds (systemd's own unit) and positions are
kept per key so later stages (version gates in plan.py) can still point at the line
that asked for a feature.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from jobgen.compiler.diagnostics import Pos
from jobgen.compiler.hardening import HARDENING
from jobgen.compiler.target import Target
from jobgen.contract import queue as queue_contract
from jobgen.contract.policies import DEFAULT_OVERLAP, OVERLAP, SCOPES, LockScope, OverlapPolicy

# Policies for a run that collides with a running one, and lock scopes (README "Overlap"):
# their behaviour is a table in contract/policies.py; here only their names.
OVERLAP_POLICIES = tuple(OVERLAP)
LOCK_SCOPES = tuple(SCOPES)
HARDENING_PROFILES = tuple(HARDENING)  # compiler/hardening.py: the one list of profiles
SCHEDULE_KINDS = ("calendar", "every", "after_boot")

# Schedule, Lock, Queue and Manifest are named tuples (immutable, compared and hashed field
# by field; a copy with changes is ._replace()); Common, Job and Worker, which share fields
# by inheritance, are Records. Neither is a frozen dataclass: defining one executes six
# generated methods, at every start of every command and boot.


class Record:
    """A frozen record declared the way a dataclass is (fields are the annotations of the
    class and its bases, base first; a class attribute of the same name is the field's
    default, none makes it required; keyword arguments only), with no methods generated.
    Equal, hashed and shown by every field but those in _UNCOMPARED; ``replace`` copies
    with changes, as dataclasses.replace() did."""

    _FIELDS: tuple[str, ...] = ()
    _UNCOMPARED: frozenset[str] = frozenset()
    _COMPARED: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(n for n in cls.__dict__.get("__annotations__", {}) if not n.startswith("_"))
        cls._FIELDS = cls._FIELDS + own
        cls._COMPARED = tuple(f for f in cls._FIELDS if f not in cls._UNCOMPARED)

    def __init__(self, **values) -> None:
        fields = self.__dict__  # not through __setattr__, which refuses every assignment
        for name in self._FIELDS:
            if name in values:
                fields[name] = values.pop(name)
            elif not hasattr(type(self), name):
                raise TypeError(f"{type(self).__name__}() lacks its field {name!r}")
        if values:
            raise TypeError(f"{type(self).__name__}() has no field {', '.join(map(repr, sorted(values)))}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def _compared(self) -> tuple:
        return tuple(getattr(self, f) for f in self._COMPARED)

    def __eq__(self, other: object) -> bool:
        return self._compared() == other._compared() if other.__class__ is self.__class__ else NotImplemented

    def __hash__(self) -> int:
        return hash(self._compared())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._COMPARED)})"

    def replace(self, **changes):
        return type(self)(**{f: getattr(self, f) for f in self._FIELDS} | changes)


class Schedule(NamedTuple):
    kind: str  # one of SCHEDULE_KINDS
    calendar: str | None = None  # normalized OnCalendar= expression (with time zone)
    usec: int | None = None  # for every / after_boot
    has_timezone: bool = False
    # `schedule:` as a list: the further expressions, each its own OnCalendar= line; the
    # timer elapses at every one of them (systemd.timer(5): OnCalendar= "may be specified
    # more than once").
    also: tuple[str, ...] = ()

    @property
    def calendars(self) -> tuple[str, ...]:
        """Every OnCalendar= expression, in the order written."""
        return (self.calendar, *self.also) if self.calendar is not None else ()


class Lock(NamedTuple):
    scope: str
    name: str
    backend: str | None = None
    ttl_usec: int | None = None
    password_file: str | None = None
    credential: str | None = None  # LoadCredential= name:path for the lock password
    path: str | None = None  # host scope: the lock file, instead of /run/jobgen/NAME.lock

    @property
    def kind(self) -> LockScope:
        return SCOPES[self.scope]


class Queue(NamedTuple):
    """`queue:` of an `overlap: queue` job (README "overlap: queue")."""

    max_pending: int = 100
    on_full: str = queue_contract.REJECT  # one of contract/queue.py ON_FULL
    max_attempts: int = 3


class Common(Record):
    """Keys jobs and workers share, with the same meaning."""

    _UNCOMPARED = frozenset({"keypos"})  # where each key was written: not what the job is

    name: str
    pos: Pos
    keypos: Mapping[str, Pos]
    command: tuple[str, ...] = ()
    description: str | None = None
    documentation: tuple[str, ...] = ()
    user: str | None = None
    group: str | None = None
    working_directory: str | None = None
    environment: tuple[tuple[str, str], ...] = ()
    environment_file: str | None = None
    hardening: str = "default"
    memory_max: str | None = None
    on_failure: tuple[str, ...] = ()

    def where(self, key: str) -> Pos:
        return self.keypos.get(key, self.pos)


class Job(Common):
    schedule: Schedule = Schedule("calendar")
    overlap: str = DEFAULT_OVERLAP
    wait_usec: int | None = None
    lock: Lock | None = None  # None when overlap is 'allow'
    timeout_usec: int | None = None
    persistent: bool = False
    randomized_delay_usec: int | None = None
    fixed_random_delay: bool = False
    randomized_offset_usec: int | None = None
    accuracy_usec: int | None = None
    on_success: tuple[str, ...] = ()
    mail_on_failure: str | None = None  # compiler/notify.py
    queue: Queue | None = None  # set exactly when overlap is 'queue'

    @property
    def policy(self) -> OverlapPolicy:
        return OVERLAP[self.overlap]


class Worker(Common):
    instances: int = 1
    type: str = "exec"
    restart: str = "on-failure"
    restart_delay_usec: int = 1_000_000
    restart_max_delay_usec: int | None = None
    restart_steps: int | None = None
    start_limit_interval_usec: int | None = None
    start_limit_burst: int | None = None
    stop_signal: str = "SIGTERM"
    stop_timeout_usec: int = 0
    recycle_after_usec: int | None = None
    watchdog_usec: int | None = None
    max_job_time_usec: int | None = None


class Manifest(NamedTuple):
    path: str
    target: Target | None
    target_pos: Pos | None
    jobs: tuple[Job, ...]
    workers: tuple[Worker, ...]
