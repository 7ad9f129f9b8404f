"""Owning a process tree without a cgroup: what `jobgen lock` uses to make sure no
descendant of its command outlives the lock.

- The holder marks itself a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER, Linux 3.4):
  a descendant whose parent dies is re-parented to the holder instead of PID 1, so
  waiting for the holder's own children until there are none waits for every
  descendant, however it forked or daemonized (setsid, double fork).
- The command starts in its own process group, so one kill(2) reaches the whole
  pipeline atomically (killpg), and `descendants()` finds those that left the group.
- The command itself gets PR_SET_PDEATHSIG=SIGKILL: if the holder is SIGKILLed it dies
  too. Its descendants then go on until systemd's stop kills the unit's cgroup
  (KillMode=mixed ends with SIGKILL to every process of the unit); see
  docs/cluster-locks.md for what that means outside a unit.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h, 3.4
PR_SET_NO_NEW_PRIVS = 38  # linux/prctl.h, 3.5

_libc = None


def _prctl(option: int, arg: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def become_subreaper() -> None:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def no_new_privs() -> None:
    """execve(2) never grants privileges again (setuid bits, file capabilities): what
    NoNewPrivileges=yes gives a unit."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def child_setup(parent: int):
    """preexec_fn for the command: its own process group, and death with the holder."""

    def setup() -> None:
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the holder died before prctl took effect
            os._exit(1)

    return setup


def descendants(root: int | None = None) -> list[int]:
    """Every live process below `root` (default: this process), parents before children.

    Read from /proc/PID/stat (field 4 is the parent pid): a scan of /proc, a few ms.
    Zombies are left out: they run nothing and only their parent's wait removes them.
    """
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone since the listing
            continue
        fields = text.rpartition(")")[2].split()
        if len(fields) < 2 or fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(0), ()):
            found.append(child)
            queue.append(child)
    return found


def signal_tree(pgid: int | None, signum: int) -> bool:
    """Send signum to the command's process group and to every descendant that left it.
    True if it reached any process."""
    reached = False
    if pgid is not None:
        try:
            os.killpg(pgid, signum)
            reached = True
        except (ProcessLookupError, PermissionError):
            pass
    for pid in descendants():
        try:
            os.kill(pid, signum)
            reached = True
        except (ProcessLookupError, PermissionError):
            pass
    return reached


def reap_all() -> None:
    """Wait until this process has no children left. As a subreaper, every descendant
    becomes a child when its parent exits (re-parenting happens before the parent's exit
    is reported), so this returns only when the whole tree is gone."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
