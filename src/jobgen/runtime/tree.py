"""Owning a process tree without a cgroup: what `jobgen lock` uses to make sure no
descendant of its command outlives the lock.

- The holder marks itself a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER, Linux 3.4):
  a descendant whose parent dies is re-parented to the holder instead of PID 1, so
  waiting for the holder's own children until there are none waits for every
  descendant, however it forked or daemonized (setsid, double fork).
- The command starts in its own process group, so one kill(2) reaches the whole
  pipeline atomically (killpg), and `descendants()` finds those that left the group.
- The command itself gets PR_SET_PDEATHSIG=SIGKILL, and a keeper process (Lifeline)
  kills its whole process group if the holder dies, even by SIGKILL, before the lock's
  SQL session can end. Descendants that left the group (setsid) are then left to
  systemd's stop (KillMode=mixed ends with SIGKILL to every process of the unit).
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
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


class Lifeline:
    """A keeper process that kills the command's process group if the holder dies, even by
    SIGKILL, and only then lets the lock session end.

    The keeper is forked (no exec: a few ms) right after the lock is taken, so it shares
    the holder's open lock connection: a SQL server sees the session end only when the
    last copy of its socket closes, that is after the keeper has killed the command's
    group and seen it gone. The holder's normal release (RELEASE_LOCK / pg_advisory_unlock,
    then a protocol-level quit) ends the session whatever the keeper holds. The keeper
    learns the group id and "done" through a pipe whose write end only the holder has: EOF
    without "done" means the holder died. It is double-forked before the holder becomes a
    subreaper, so it is never one of the holder's children to wait for, and it leaves
    the session so a terminal's Ctrl-C does not reach it.
    """

    GONE_TIMEOUT = 10.0  # how long the keeper waits for the killed group to disappear

    def __init__(self) -> None:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # intermediate
            try:
                os.close(w)
                if os.fork() == 0:  # keeper
                    _keep(r)
            finally:
                os._exit(0)
        os.close(r)
        os.waitpid(pid, 0)
        self._w: int | None = w

    def guard(self, pgid: int) -> None:
        self._send(f"{pgid}\n")

    def done(self) -> None:
        self._send("done\n")
        if self._w is not None:
            os.close(self._w)
            self._w = None

    def _send(self, text: str) -> None:
        if self._w is not None:
            try:
                os.write(self._w, text.encode())
            except OSError:  # the keeper is gone (killed with the unit): nothing to tell
                pass


def _keep(r: int) -> None:
    """The keeper's whole life; never returns."""
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        data = b""
        while chunk := os.read(r, 64):
            data += chunk
            if b"done\n" in data:
                os._exit(0)
        groups = [int(x) for x in data.split() if x.isdigit()]
        for pgid in groups:  # the holder died without "done": end what it started
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                continue
            deadline = time.monotonic() + Lifeline.GONE_TIMEOUT
            while time.monotonic() < deadline:
                try:
                    os.killpg(pgid, 0)
                except OSError:
                    break
                time.sleep(0.01)
    finally:
        os._exit(0)
