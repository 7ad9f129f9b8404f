"""Owning a process tree without a cgroup: what `jobgen lock` uses to make sure no
descendant of its command outlives the lock.

- The holder marks itself a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER, Linux 3.4):
  a descendant whose parent dies is re-parented to the holder instead of PID 1, so
  waiting for the holder's own children until there are none waits for every
  descendant, however it forked or daemonized (setsid, double fork).
- The command starts in its own process group, so one kill(2) reaches the whole
  pipeline atomically (killpg), and `descendants()` finds those that left the group.
- The command itself gets PR_SET_PDEATHSIG (SIGSTOP under a keeper, else SIGKILL), and a
  keeper process (Lifeline)
  outside the tree, which the holder's stop or death does not reach, follows the tree
  (a /proc scan every KEEPER_SCAN seconds): if the holder dies, even by SIGKILL, it kills
  the command's group and every process it last saw below the holder (setsid/setpgid
  ones included) before the lock's SQL session can end; if the holder stops renewing a
  Redis lease (SIGSTOP, a hang), it kills the tree before the lease runs out.
- Tree is the one way to start and end a command's tree: `jobgen lock` and the queue
  drainer both use it.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import time
from collections import namedtuple
from collections.abc import Mapping

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h, 3.4
PR_GET_CHILD_SUBREAPER = 37  # linux/prctl.h, 3.4
PR_SET_NO_NEW_PRIVS = 38  # linux/prctl.h, 3.5

_libc = None


def _prctl(option: int, arg) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(option, ctypes.c_ulong(arg) if isinstance(arg, int) else arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def become_subreaper(on: bool = True) -> None:
    _prctl(PR_SET_CHILD_SUBREAPER, int(on))


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag))
    return bool(flag.value)


def no_new_privs() -> None:
    """execve(2) never grants privileges again (setuid bits, file capabilities): what
    NoNewPrivileges=yes gives a unit."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def child_setup(parent: int, death: int = signal.SIGKILL):
    """preexec_fn for the command: its own process group, and `death` when the parent
    dies (SIGKILL; SIGSTOP when a keeper kills the tree: see Tree.start)."""

    def setup() -> None:
        os.setpgid(0, 0)
        _prctl(PR_SET_PDEATHSIG, death)
        if os.getppid() != parent:  # the holder died before prctl took effect
            os._exit(1)

    return setup



# ppid: int; state: str; start: int, /proc/PID/stat starttime (a pid with another start
# time is another process). A namedtuple: typing costs `jobgen lock` ~5 ms a run (contract/locks.py).
_Proc = namedtuple("_Proc", "ppid state start")


def _scan() -> dict[int, _Proc]:
    """Every process, from /proc/PID/stat (after the ')' of comm: state, ppid, ..., field
    22 starttime). Raw os calls, not pathlib: the keeper runs this every KEEPER_SCAN
    (measured: 2.4 ms of CPU for 157 processes on a loaded machine, 8.5 ms with pathlib)."""
    table: dict[int, _Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
        except OSError:  # gone since the listing
            continue
        try:
            data = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = data.rpartition(b")")[2].split(maxsplit=20)
        if len(fields) < 20:
            continue
        table[int(name)] = _Proc(int(fields[1]), fields[0].decode(), int(fields[19]))
    return table


def _below(table: dict[int, _Proc], root: int, skip=frozenset()) -> list[int]:
    """Every process below root in table, parents before children (zombies included),
    leaving out the subtrees of `skip` (children root had before the command)."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    found, queue = [], [root]
    while queue:
        for child in children.get(queue.pop(0), ()):
            if child not in skip:
                found.append(child)
                queue.append(child)
    return found


def descendants(root: int | None = None, skip=frozenset()) -> list[int]:
    """Every live process below `root` (default: this process), parents before children.
    Zombies are left out: they run nothing and only their parent's wait removes them."""
    if (root is None or root == os.getpid()) and not has_children():
        return []  # every descendant has an ancestor among our children
    table = _scan()
    root = os.getpid() if root is None else root
    return [p for p in _below(table, root, skip) if table[p].state != "Z"]


def signal_tree(pgid: int | None, signum: int, skip=frozenset()) -> bool:
    """Send signum to the command's process group and to every descendant that left it.
    True if it reached any process."""
    reached = False
    if pgid is not None:
        try:
            os.killpg(pgid, signum)
            reached = True
        except (ProcessLookupError, PermissionError):
            pass
    for pid in descendants(skip=skip):
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


def has_children() -> bool:
    """Whether this process has a child, running, stopped or exited and not yet reaped.
    One waitid(2) that takes no status (WNOWAIT) and does not block (WNOHANG): ECHILD
    means none. A /proc scan reads every process on the host (a few ms with a hundred,
    more on a busy host); in the common run, a command that leaves nothing behind, this
    answers the scans' question before any is made."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _children() -> frozenset[int]:
    if not has_children():
        return frozenset()
    me = os.getpid()
    return frozenset(p for p, proc in _scan().items() if proc.ppid == me)


class Tree:
    """One command and every process it starts, owned by this process (a subreaper).

    Members are this process's descendants, less the subtrees of the children it had
    before the command started (`others`: in a process that runs other children, they
    are none of the command's business)."""

    def __init__(self, proc: subprocess.Popen, others: frozenset[int],
                 was_not_subreaper: bool = False) -> None:
        self.proc = proc
        self.others = others
        # This process was no subreaper before start(): reap() turns it back, so a process
        # that runs commands now and then (a test runner) does not keep collecting orphans.
        self.was_not_subreaper = was_not_subreaper

    @classmethod
    def start(cls, argv: list[str], env: Mapping[str, str],
              death: int = signal.SIGKILL) -> "Tree":
        """Start argv in its own process group, this process a subreaper so nothing it
        starts can leave the tree, and `death` sent to argv when we die (PDEATHSIG).
        With a keeper (Lifeline), SIGSTOP: the command then stays, frozen, the parent of
        what it started, so the keeper finds and kills its children too (a SIGKILL would
        orphan them to PID 1 first). Raises what Popen raises."""
        was = is_subreaper()
        become_subreaper()
        others = _children()
        try:
            proc = subprocess.Popen(argv, env=env, preexec_fn=child_setup(os.getpid(), death))
        except BaseException:
            if not was:
                become_subreaper(False)
            raise
        try:
            os.setpgid(proc.pid, proc.pid)  # both sides, so no signal finds it in ours
        except OSError:
            pass  # it already did (or already exec'd): either way it leads its own group
        return cls(proc, others, not was)

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def members(self) -> list[int]:
        """The tree's processes still running."""
        return descendants(skip=self.others)

    def signal(self, signum: int) -> bool:
        """signum to the group and every member (those that left the group too). Once
        the leader is reaped its pid, the group id, may be reused: members only then
        (every group member is a member: we are their subreaper)."""
        pgid = self.pgid if self.proc.returncode is None else None
        return signal_tree(pgid, signum, skip=self.others)

    def kill(self) -> None:
        """SIGKILL until no member runs (again and again: a fork may race a kill)."""
        self.signal(signal.SIGKILL)
        while self.members():
            time.sleep(0.01)
            self.signal(signal.SIGKILL)

    def reap(self) -> None:
        """Wait until every member is gone and reaped. Only our own children outside
        `others` are waited for, by pid: never waitpid(-1), which would take a status
        another part of this process waits for."""
        me = os.getpid()
        while True:
            table = _scan() if has_children() else {}
            mine = [p for p, proc in table.items() if proc.ppid == me and p not in self.others]
            if not mine:
                if self.was_not_subreaper:
                    become_subreaper(False)
                return
            for pid in mine:
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass


def boottime() -> float:
    """CLOCK_BOOTTIME: like the lock server's clock, it runs on while this machine sleeps."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


# How often the keeper records the holder's descendants. A process re-parented to the
# holder (its parent exited) less than this before the holder is SIGKILLed can escape.
KEEPER_SCAN = 0.2
# poll(2) events that mean the server closed the lock session (not POLLNVAL: a bad fd is
# no news about the lock).
CLOSED = select.POLLRDHUP | select.POLLHUP | select.POLLERR


class Lifeline:
    """A keeper process, outside the command's tree and the holder's stop, that ends the
    tree when the holder cannot: the holder died (even by SIGKILL), or it stopped renewing
    a Redis lease (SIGSTOP, a hang) and the lease is about to run out.

    The keeper is forked (no exec: a few ms) right after the lock is taken, so it shares
    the holder's open lock connection: a SQL server sees the session end only when the
    last copy of its socket closes, that is after the keeper has killed the tree. The
    holder's normal release (RELEASE_LOCK / pg_advisory_unlock, then a protocol-level quit)
    ends the session whatever the keeper holds. The keeper learns the group id, the lease
    deadline, the session's socket and "done" through a pipe whose write end only the
    holder has (and answers why it killed, if it did, through another): EOF without
    "done" means the holder died. It is double-forked before the holder becomes a
    subreaper, so it is never one of the holder's children to wait for, and it leaves
    the session so a terminal's Ctrl-C or Ctrl-Z does not reach it.
    """

    GONE_TIMEOUT = 10.0  # how long the keeper goes on killing a tree that will not go

    def __init__(self, log_prefix: str = "") -> None:
        """log_prefix starts the keeper's one log line (on the holder's stderr)."""
        holder = os.getpid()
        r, w = os.pipe()
        back_r, back_w = os.pipe()  # the keeper tells the holder why it killed the tree
        pid = os.fork()
        if pid == 0:  # intermediate
            try:
                os.close(w)
                os.close(back_r)
                if os.fork() == 0:  # keeper
                    _keep(r, holder, log_prefix, back_w)
            finally:
                os._exit(0)
        os.close(r)
        os.close(back_w)
        os.set_blocking(back_r, False)
        os.waitpid(pid, 0)
        self._w: int | None = w
        self._back: int | None = back_r

    def guard(self, pgid: int) -> None:
        self._send(f"pgid {pgid}\n")

    def session(self, fd: int, within: float) -> None:
        """fd is the lock session's socket (the keeper has its own copy): once the server
        closes it (the lock is free), the tree must be gone `within` seconds."""
        self._send(f"session {fd} {within!r}\n")

    def lease(self, deadline: float) -> None:
        """The tree must be gone by `deadline` (boottime()) unless a later one comes."""
        self._send(f"lease {deadline!r}\n")

    def killed(self) -> str | None:
        """Why the keeper killed the tree ("lease-expiring", "session-ended"), or None.
        It writes this before it kills, so it is here once the command is seen dead."""
        if self._back is None:
            return None
        try:
            data = os.read(self._back, 256)
        except (BlockingIOError, OSError):
            return None
        words = data.split()
        return words[-1].decode() if words else None

    def done(self) -> None:
        self._send("done\n")
        for fd in (self._w, self._back):
            if fd is not None:
                os.close(fd)
        self._w = self._back = None

    def _send(self, text: str) -> None:
        if self._w is not None:
            try:
                os.write(self._w, text.encode())  # < PIPE_BUF: atomic among threads
            except OSError:  # the keeper is gone (killed with the unit): nothing to tell
                pass


def _keep(r: int, holder: int, log_prefix: str, back: int) -> None:
    """The keeper's whole life; never returns."""
    try:
        os.setsid()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        log = os.dup(2)  # the holder's stderr (the journal), for the keeper's one line
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        pgid: int | None = None
        deadline: float | None = None
        seen: dict[int, int] = {}  # pid -> start time, below the holder at the last scan
        expired = False
        data = b""
        poller = select.poll()
        poller.register(r, select.POLLIN)
        session: tuple[int, float] | None = None
        why = "lease-expiring holder pid={} did not renew the lease in time (stopped or hung)"
        while True:
            timeout = KEEPER_SCAN if pgid is not None or deadline is not None else None
            if deadline is not None and not expired:
                timeout = max(0.0, min(KEEPER_SCAN, deadline - boottime()))
            events = dict(poller.poll(None if timeout is None else timeout * 1000))
            if session is not None and events.get(session[0], 0) & CLOSED:
                # The server closed the session: the lock is free. The holder stops the
                # command within --grace; if it cannot (stopped), the keeper does.
                poller.unregister(session[0])
                end = boottime() + session[1]
                if deadline is None or end < deadline:
                    deadline = end
                    why = ("session-ended holder pid={} did not stop the command after the "
                           "server ended the lock session (stopped or hung)")
                session = None
            if events.get(r):
                chunk = os.read(r, 4096)
                if not chunk:
                    break  # the holder died without "done"
                data += chunk
                *lines, data = data.split(b"\n")
                for line in lines:
                    word, _, arg = line.decode().partition(" ")
                    if word == "done":
                        os._exit(0)
                    if word == "pgid":
                        pgid = int(arg)
                    elif word == "lease" and not expired:
                        deadline = float(arg)
                    elif word == "session":
                        fd, within = arg.split()
                        session = (int(fd), float(within))
                        # Peer closed (FIN) or reset: never POLLIN, which the holder's own
                        # queries would raise and its reads clear.
                        poller.register(session[0], select.POLLRDHUP)
            if pgid is None and deadline is None:
                continue
            table = _scan()
            # Added to, never replaced: a scan that meets the holder mid-exit sees its
            # children already handed to PID 1; what was seen stays until it is gone.
            seen = {p: t for p, t in seen.items() if p in table and table[p].start == t}
            seen.update({p: table[p].start for p in _below(table, holder)})
            if deadline is not None and boottime() >= deadline:
                # Armed from now on: whatever runs below the holder is killed at every scan
                # until the holder says "done" (a renewal that fails does not re-arm it).
                if not expired:
                    _say(back, why.split()[0] + "\n")
                    _say(log, f"{log_prefix}{why.format(holder)}; SIGKILL to the command's "
                              f"{len(seen)} processes\n")
                    expired = True
                _kill_seen(pgid, holder, seen)
        if pgid is not None or seen:  # the holder died without "done": end what it started
            _kill_seen(pgid, None, seen)
    finally:
        os._exit(0)


def _say(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:
        pass


def _kill_seen(pgid: int | None, holder: int | None, seen: dict[int, int]) -> None:
    """SIGKILL the group, every process in `seen` that is still the same process and
    everything now below any of them (and below the holder, while it lives), until none
    runs or GONE_TIMEOUT passes."""
    deadline = time.monotonic() + Lifeline.GONE_TIMEOUT
    seen = dict(seen)
    while time.monotonic() < deadline:
        table = _scan()
        roots = [p for p, start in seen.items() if p in table and table[p].start == start]
        if holder is not None and holder in table:
            roots.append(holder)
        tree = {p for root in roots for p in _below(table, root)} | set(roots)
        tree.discard(holder)
        live = [p for p in tree if table[p].state != "Z"]
        group = False
        if pgid is not None:
            try:
                os.killpg(pgid, signal.SIGKILL)
                group = True
            except OSError:
                pass
        for pid in live:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if not live and not group:
            return
        if not live and holder is not None:  # the group's zombies wait for the holder
            return
        seen.update({p: table[p].start for p in tree})
        time.sleep(0.01)
