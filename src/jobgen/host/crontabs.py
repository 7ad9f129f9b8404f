"""`jobgen import-crontab --host`: the cron configuration of a host (or of an image root), read
as cron reads it.

Impure: this reads files; tools/crontab_host.py turns what it read into manifests. What is
read, and what cron would skip:

* /etc/crontab, and /etc/cron.d/* whose names the image's cron reads (FLAVOURS: Debian's
  cron reads only run-parts names, cronie skips a few names it lists);
* /etc/cron.{hourly,daily,weekly,monthly}: the executable regular files the image's run-parts
  runs (FLAVOURS), in its order (C locale, by name);
* /etc/anacrontab;
* the user crontabs, /var/spool/cron/crontabs/USER (Debian) or /var/spool/cron/USER (cronie):
  the file name is the user (cron's database.c: getpwnam(name)), and cron skips a file that user does not own ("WRONG FILE OWNER") or whose user does not
  exist ("ORPHAN"); users are looked up in the root's own /etc/passwd.

Every path is read under ROOT and a link is resolved inside it as this host sees it, never
out of it (the rule of compiler/write.check_folder, which `apply --root` keeps): an absolute
link in an image is refused rather than followed to the host's file. A file that cannot be
read (a FIFO, a device, binary, too large, unreadable, a link loop) is one Unread with the
reason, and the rest is read.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from jobgen.contract.oneline import one_line

ETC_CRONTAB = "etc/crontab"
CRON_D = "etc/cron.d"
ANACRONTAB = "etc/anacrontab"
PASSWD = "etc/passwd"
RUN_PARTS = ("hourly", "daily", "weekly", "monthly")  # etc/cron.PERIOD
ANACRON = "usr/sbin/anacron"  # Debian's /etc/crontab: `test -x /usr/sbin/anacron || run-parts ...`
TIMEZONE_FILES = ("etc/timezone", "etc/localtime")  # Debian's name of the zone, then the link
MAX_BYTES = 1 << 20  # a crontab larger than 1 MiB is not one an operator wrote
# run-parts(8): "the names must consist entirely of ASCII upper- and lower-case letters,
# ASCII digits, ASCII underscores, and ASCII minus-hyphens"; Debian's cron(8) holds
# /etc/cron.d file names to the same rule ("they must conform to the filename requirements of
# run-parts"): dotfiles, `name~` and `name.dpkg-old` are skipped, and so is `man-db.cron`.
RUN_PARTS_NAME = re.compile(r"[A-Za-z0-9_-]+")
SKIP_REASON = "cron skips it: a name of letters, digits, '_' and '-' only is read (run-parts(8), Debian cron(8))"
# cronie's not_a_crontab() (src/database.c): a name starting with '.' or '#', or ending in
# '~', '.rpmsave', '.rpmorig' or '.rpmnew' is not read; any other name is, dots included.
CRONIE_CRON_D_NAME = re.compile(r"(?![.#])(?!.*(?:~|\.rpmsave|\.rpmorig|\.rpmnew)\Z).+", re.DOTALL)
CRONIE_CRON_D_REASON = ("cron skips it: cronie does not read a name starting with '.' or '#', or ending in '~', "
                        "'.rpmsave', '.rpmorig' or '.rpmnew' (cronie's database.c, not_a_crontab)")
# RHEL's and Fedora's run-parts, a bash script (the crontabs package's /usr/bin/run-parts):
# `for i in $(LC_ALL=C; echo ${1%/}/*[^~,])` (no dotfile, no name ending in '~' or ','), then
# `continue` for names ending in .cfsaved, .rpmsave, .rpmorig, .rpmnew, .swp or ',v'.
RHEL_RUN_PARTS_NAME = re.compile(r"(?!\.)(?!.*(?:[~,]|\.cfsaved|\.rpmsave|\.rpmorig|\.rpmnew|\.swp|,v)\Z).+", re.DOTALL)
RHEL_RUN_PARTS_REASON = ("run-parts skips it: RHEL's run-parts does not run a name starting with '.', or ending in "
                         "'~', ',', ',v', '.cfsaved', '.rpmsave', '.rpmorig', '.rpmnew' or '.swp' (/usr/bin/run-parts)")

# The user crontabs: Debian's cron keeps them in /var/spool/cron/crontabs and skips dotfiles
# (crontab(1)'s temporary files); cronie in /var/spool/cron (SPOOL_DIR, its configure.ac),
# read by the same not_a_crontab() as /etc/cron.d.
DEBIAN_SPOOL, CRONIE_SPOOL = "var/spool/cron/crontabs", "var/spool/cron"
DEBIAN_SPOOL_NAME = re.compile(r"(?!\.).+", re.DOTALL)
DEBIAN_SPOOL_REASON = "cron skips it: a hidden file (crontab(1)'s temporary files)"


@dataclass(frozen=True)
class Flavour:
    """One cron as a distribution ships it: which names it reads in /etc/cron.d, which its
    run-parts runs in the folders, and the reason a skipped name is reported with."""

    name: str
    cron_d: re.Pattern[str]  # a name fullmatching it is read
    cron_d_reason: str
    run_parts: re.Pattern[str]  # a name fullmatching it is run
    run_parts_reason: str
    # what starts anacron apart from cron (None: cron itself does, and stops with it)
    anacron_timer: str | None
    spool: str  # the user crontabs' folder
    spool_name: re.Pattern[str]  # a name fullmatching it is read
    spool_reason: str
    spool_mode: int | None = None  # the one mode a user crontab must have (Debian: 0600); cronie: none
    # The crontab variables that change when this cron starts the jobs after them
    # (tools/crontab.SCHEDULING); to a cron that does not act on one, it is one more variable
    # of the jobs' environment. cronie acts on both (crontab(5): "CRON_TZ specifies the time
    # zone specific for the cron table", "RANDOM_DELAY ... the maximum number of minutes to
    # delay job start"). Debian's cron on neither: "cron will only handle tasks in a single
    # timezone" (cron(8) of 3.0pl1-162, Debian 12), and its binary holds neither name.
    acts_on: frozenset[str] = frozenset()
    # cronie's check_open() (database.c) on every crontab: `(st_mode & 07533) != 0400` is "BAD
    # FILE MODE": its owner reads it, no one executes it, no group or other writes it, no
    # set-id or sticky bit. Debian's cron holds a system crontab to no write bit for group
    # or other (INSECURE MODE) and a user crontab to spool_mode.
    file_mode: tuple[int, int] | None = None  # (mask, what the mode must be under it)
    # Debian's cron opens a user crontab with O_NOFOLLOW: one that is a symbolic link is not
    # read ("CAN'T OPEN"); crontab(1) writes them as regular files.
    spool_links: bool = True
    # A system crontab with a second hard link is skipped by Debian's cron ("NUMBER OF HARD
    # LINKS > 1"); cronie checks the link count of user crontabs only (check_open(): `if (pw
    # && statbuf.st_nlink != 1)`, BAD LINK COUNT; pw is NULL for /etc/crontab and cron.d).
    system_one_link: bool = True
    # A line cron refuses (a syntax error) makes it ignore the whole file: Debian's cron
    # ("Syntax error, this crontab file will be ignored", user.c load_user); cronie skips
    # the line alone (its load_user keeps the entries load_entry returns).
    whole_file: bool = False


FLAVOURS: dict[str, Flavour] = {
    # Debian's cron; Debian's anacron package ships anacron.timer (hourly) and anacron.service.
    "debian": Flavour("debian", RUN_PARTS_NAME, SKIP_REASON, RUN_PARTS_NAME, SKIP_REASON, "anacron.timer",
                      DEBIAN_SPOOL, DEBIAN_SPOOL_NAME, DEBIAN_SPOOL_REASON, 0o600, whole_file=True, spool_links=False),
    # cronie (RHEL, Fedora); cronie-anacron is started by cron's /etc/cron.hourly/0anacron.
    "cronie": Flavour("cronie", CRONIE_CRON_D_NAME, CRONIE_CRON_D_REASON, RHEL_RUN_PARTS_NAME, RHEL_RUN_PARTS_REASON, None,
                      CRONIE_SPOOL, CRONIE_CRON_D_NAME, CRONIE_CRON_D_REASON,
                      acts_on=frozenset({"CRON_TZ", "RANDOM_DELAY"}), file_mode=(0o7533, 0o400), system_one_link=False),
}
DEFAULT_FLAVOUR = "debian"
# Which flavour an image is, told first by its run-parts program, the one that applies the
# folders' rule: Debian's is an ELF binary (debianutils, Essential: yes, /bin/run-parts, which
# is /usr/bin/run-parts on a merged /usr), RHEL's and Fedora's a "#!/bin/bash" script. Then, for
# an image without it, by os-release(5)'s ID and ID_LIKE (ID_LIKE names the distribution a
# derivative follows: Rocky's "rhel centos fedora", Ubuntu's "debian"); else Debian's rules.
RUN_PARTS_PROGRAMS = ("usr/bin/run-parts", "bin/run-parts")
RUN_PARTS_MAGIC = ((b"\x7fELF", "debian"), (b"#!", "cronie"))
OS_RELEASE = ("etc/os-release", "usr/lib/os-release")  # os-release(5): the first that exists
OS_IDS = {"debian": "debian", "ubuntu": "debian", "rhel": "cronie", "fedora": "cronie", "centos": "cronie"}

# systemd-cron (the `systemd-cron` package, which replaces cron and anacron) reads the same
# files through its generator, by rules of its own, and the rules of its two lines differ
# again. Read by Debian's or cronie's rules, such a host's import would be wrong without a
# word; so jobgen says so, and reads them by one of those only when --cron asks. The
# generator, by its first bytes (Debian 13's 2.5.1 is C++, Debian 12's 1.15.19 Python) ->
# the line and what changes, from 2.5.1's src/bin/systemd-crontab-generator.cpp (day fields
# ANDed in its calendar, month names refused by its parser, one unit per folder script) and
# 1.15.19's cron-{hourly,daily,weekly,monthly}.timer, which run the folders themselves.
SYSTEMD_CRON_GENERATORS = ("usr/lib/systemd/system-generators/systemd-crontab-generator",
                           "lib/systemd/system-generators/systemd-crontab-generator")
SYSTEMD_CRON_LINES = (
    (b"\x7fELF", "2.x", "a line with both a day of the month and a day of the week runs only when both match, a month "
     "name drops the line, and each script in /etc/cron.daily and the other folders gets a timer of its own"),
    (b"#!", "1.x", "its own timers run /etc/cron.daily and the other folders, at times of their own"),
)


@dataclass(frozen=True)
class Unread:
    path: str  # as shown: the root joined with the path
    reason: str


@dataclass(frozen=True)
class Crontab:
    path: str  # as shown
    rel: str  # the path inside the root, e.g. etc/cron.d/php
    text: str
    user: str | None = None  # a user crontab's owner


@dataclass(frozen=True)
class Folder:
    """A run-parts folder: the scripts run-parts would run, in its order."""

    path: str
    rel: str
    period: str  # hourly, daily, weekly, monthly
    scripts: tuple[str, ...]


@dataclass
class HostCron:
    root: Path
    crontab: Crontab | None = None
    cron_d: list[Crontab] = field(default_factory=list)
    anacrontab: Crontab | None = None
    spool: list[Crontab] = field(default_factory=list)
    folders: list[Folder] = field(default_factory=list)
    unread: list[Unread] = field(default_factory=list)
    skipped: list[Unread] = field(default_factory=list)  # names cron itself skips
    anacron: bool = False  # /usr/sbin/anacron is executable: Debian's /etc/crontab leaves the daily/weekly/monthly runs to it
    flavour: Flavour = FLAVOURS[DEFAULT_FLAVOUR]
    zone: str | None = None  # the host's time zone, when it can be told
    users: frozenset[str] = frozenset()
    homes: dict[str, str] = field(default_factory=dict)  # user -> home folder, from the root's /etc/passwd

    def home(self, user: str) -> str | None:
        return self.homes.get(user)

    def user(self, name: str) -> bool:
        """Whether cron's getpwnam() finds NAME: in the root's /etc/passwd, or on this host
        (ROOT /) through its name services too (LDAP, SSSD)."""
        return name in self.users or (str(self.root) == "/" and host_account(name) is not None)

    def folder(self, path: str) -> bool:
        """Whether PATH is a folder in the image (links resolved inside it, never out)."""
        try:
            return os.path.isdir(_inside(self.root, path.lstrip("/")))
        except _Refused:
            return False


class _Refused(Exception):
    pass


def _shown(root: Path, rel: str) -> str:
    return one_line(str(root / rel) if str(root) != "/" else "/" + rel)


def _inside(root: Path, rel: str) -> str:
    """The real path of ROOT/rel, refused when a link on the way leads out of the root."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / rel)
    if real != real_root and not real.startswith(real_root.rstrip("/") + "/"):
        raise _Refused(f"it leads out of the root (to {one_line(real)}); jobgen does not read through it")
    return real


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a loop of symbolic links"
    return exc.strerror or str(exc)


def _trusted(st: os.stat_result, owners: frozenset[int] | None, mode: int | None = None,
             file_mode: tuple[int, int] | None = None, one_link: bool = True) -> None:
    """cron's checks on a crontab it opened (cronie's check_open(), Debian's process_crontab()):
    a crontab anyone but its owner can write, one with another hard link, or one not owned
    by whom it runs as, is skipped ("INSECURE MODE", "BAD FILE MODE", "NUMBER OF HARD LINKS >
    1" or cronie's "BAD LINK COUNT", "WRONG FILE OWNER"). Imported, its lines would run jobs
    cron never ran, as root for a system crontab."""
    if one_link and st.st_nlink != 1:  # a link elsewhere could change the crontab behind cron's back
        raise _Refused(f"cron skips it: it has {st.st_nlink} hard links, and cron reads a crontab with one only "
                       "(cron: NUMBER OF HARD LINKS > 1; cronie: BAD LINK COUNT)")
    if file_mode is not None and st.st_mode & file_mode[0] != file_mode[1]:
        raise _Refused(f"cron skips it: mode {stat.S_IMODE(st.st_mode):04o}; cronie reads a crontab its owner reads and "
                       "no one executes, which no group or other writes (cron: BAD FILE MODE)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise _Refused(f"cron skips it: others can write it (mode {stat.S_IMODE(st.st_mode):04o}); cron reads a crontab "
                       "only its owner can write (cron: INSECURE MODE)")
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        raise _Refused(f"cron skips it: mode {stat.S_IMODE(st.st_mode):04o}; Debian's cron reads a user crontab of mode "
                       f"{mode:04o} only (cron: INSECURE MODE (mode {mode:04o} expected))")
    if owners is not None and st.st_uid not in owners:
        raise _Refused(f"cron skips it: owned by uid {st.st_uid}; a system crontab must be root's (cron: WRONG FILE OWNER)")


def _system_owners(root: Path) -> frozenset[int]:
    """Who may own a system crontab: root, and the owner of ROOT itself (an image unpacked by
    a user holds that user's files; on the host, / is root's)."""
    try:
        return frozenset({0, os.stat(root).st_uid})
    except OSError:
        return frozenset({0})


def _read(root: Path, rel: str, owners: frozenset[int] | None = None, crontab: bool = False,
          mode: int | None = None, file_mode: tuple[int, int] | None = None, one_link: bool = True) -> str:
    """A text file under the root, or _Refused with the one reason it cannot be read. A
    `crontab` is also held to cron's checks (_trusted), on the file read, a link's target."""
    real = _inside(root, rel)
    try:
        # O_NONBLOCK: a FIFO planted in the folder must not hang the import (open(2)).
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        raise _Refused(f"cannot be read: {_reason(exc)}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Refused("not a regular file")
        if crontab:
            _trusted(st, owners, mode, file_mode, one_link)
        if st.st_size > MAX_BYTES:
            raise _Refused(f"{st.st_size} bytes, more than a crontab's {MAX_BYTES}: not read")
        data = os.read(fd, MAX_BYTES + 1)
    except OSError as exc:
        raise _Refused(f"cannot be read: {_reason(exc)}") from None
    finally:
        os.close(fd)
    if b"\0" in data:
        raise _Refused("a binary file (it holds NUL bytes), not a crontab")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(f"not UTF-8 text (byte {exc.start})") from None


def _listing(root: Path, rel: str, out: HostCron) -> list[str] | None:
    """The names in a folder, sorted as run-parts sorts them (C locale), or None (reported
    unless the folder does not exist)."""
    try:
        real = _inside(root, rel)
        names = os.listdir(real)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        out.unread.append(Unread(_shown(root, rel), "not a folder"))
        return None
    except _Refused as exc:
        out.unread.append(Unread(_shown(root, rel), str(exc)))
        return None
    except OSError as exc:
        out.unread.append(Unread(_shown(root, rel), f"cannot be read: {_reason(exc)}"))
        return None
    return sorted(names, key=lambda n: n.encode("utf-8", "surrogateescape"))


def _file(root: Path, rel: str, out: HostCron, user: str | None = None, missing_ok: bool = True,
          owners: frozenset[int] | None = None, crontab: bool = True, mode: int | None = None) -> Crontab | None:
    if not os.path.lexists(root / rel) and missing_ok:
        return None
    try:
        one_link = user is not None or out.flavour.system_one_link  # a user crontab, or a cron that checks all
        return Crontab(_shown(root, rel), rel, _read(root, rel, owners, crontab, mode, out.flavour.file_mode, one_link), user)
    except _Refused as exc:
        out.unread.append(Unread(_shown(root, rel), str(exc)))
        return None


def _passwd(root: Path) -> tuple[dict[str, int], dict[str, str]]:
    """The users of the root's /etc/passwd, read once: name -> uid, and name -> home folder
    (passwd(5)'s third and sixth fields)."""
    try:
        text = _read(root, PASSWD)
    except _Refused:
        return {}, {}
    uids: dict[str, int] = {}
    homes: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 3 and parts[2].isdigit():
            uids.setdefault(parts[0], int(parts[2]))
            if len(parts) >= 7:
                homes.setdefault(parts[0], parts[5])
    return uids, homes


def host_account(name: str):
    """NAME's passwd entry on this host, as cron's getpwnam() finds it (files and the name
    services: LDAP, SSSD), or None."""
    import pwd

    try:
        return pwd.getpwnam(name)
    except (KeyError, UnicodeEncodeError, ValueError):
        return None


def host_zone(root: Path) -> str | None:
    """The zone name /etc/timezone holds, else the one /etc/localtime links to."""
    try:
        name = _read(root, TIMEZONE_FILES[0]).strip()
        if name:
            return name
    except _Refused:
        pass
    try:
        target = os.readlink(root / TIMEZONE_FILES[1])
    except OSError:
        return None
    _, found, zone = target.partition("zoneinfo/")
    return zone if found and zone else None


def _executable(root: Path, rel: str) -> bool:
    try:
        real = _inside(root, rel)
        st = os.stat(real)
    except (_Refused, OSError):
        return False
    return stat.S_ISREG(st.st_mode) and bool(st.st_mode & 0o111)


def _head(root: Path, rel: str, size: int) -> bytes | None:
    """The first bytes of a regular file under the root, or None."""
    try:
        fd = os.open(_inside(root, rel), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except (_Refused, OSError):
        return None
    try:
        return os.read(fd, size) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def image_flavour(root: Path) -> str:
    """The key of FLAVOURS whose rules the image's cron follows (see RUN_PARTS_PROGRAMS)."""
    for rel in RUN_PARTS_PROGRAMS:
        head = _head(root, rel, 4) or b""
        for magic, flavour in RUN_PARTS_MAGIC:
            if head.startswith(magic):
                return flavour
    for rel in OS_RELEASE:
        try:
            text = _read(root, rel)
        except _Refused:
            continue
        fields = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
        ids = [fields.get("ID", "").strip("\"' ")] + fields.get("ID_LIKE", "").strip("\"' ").split()
        return next((OS_IDS[i] for i in ids if i in OS_IDS), DEFAULT_FLAVOUR)
    return DEFAULT_FLAVOUR


def systemd_cron(root: Path) -> tuple[str, str, str] | None:
    """(where its generator is, as shown; its line; what it reads differently) when the
    image's cron is systemd-cron (SYSTEMD_CRON_GENERATORS), else None."""
    for rel in SYSTEMD_CRON_GENERATORS:
        head = _head(root, rel, 4)
        if head is None:
            continue
        line, differs = next(((line, differs) for magic, line, differs in SYSTEMD_CRON_LINES if head.startswith(magic)),
                             ("", "its generator reads them"))
        return _shown(root, rel), line, differs
    return None


def read_host(root: Path, flavour_name: str | None = None) -> HostCron:
    """Everything cron reads on the host whose root is ROOT, by the rules of the cron
    ``flavour_name`` names (a key of FLAVOURS; None: the one the image's files tell)."""
    out = HostCron(root)
    passwd, out.homes = _passwd(root)
    out.users = frozenset(passwd)
    out.zone = host_zone(root)
    out.anacron = _executable(root, ANACRON)
    out.flavour = flavour = FLAVOURS[flavour_name or image_flavour(root)]
    system = _system_owners(root)
    out.crontab = _file(root, ETC_CRONTAB, out, owners=system)
    for name in _listing(root, CRON_D, out) or ():
        rel = f"{CRON_D}/{name}"
        if not flavour.cron_d.fullmatch(name):
            out.skipped.append(Unread(_shown(root, rel), flavour.cron_d_reason))
        elif (crontab := _file(root, rel, out, owners=system)) is not None:
            out.cron_d.append(crontab)
    for period in RUN_PARTS:
        rel = f"etc/cron.{period}"
        names = _listing(root, rel, out)
        if names is None:
            continue
        scripts = []
        for name in names:
            if not flavour.run_parts.fullmatch(name):
                out.skipped.append(Unread(_shown(root, f"{rel}/{name}"), flavour.run_parts_reason))
            elif _executable(root, f"{rel}/{name}"):
                scripts.append(name)
            else:
                out.skipped.append(Unread(_shown(root, f"{rel}/{name}"), "run-parts skips it: not an executable regular file"))
        out.folders.append(Folder(_shown(root, rel), rel, period, tuple(scripts)))
    out.anacrontab = _file(root, ANACRONTAB, out, crontab=False)  # anacron's own rules, not cron's
    for name in _listing(root, flavour.spool, out) or ():
        rel = f"{flavour.spool}/{name}"
        if not flavour.spool_name.fullmatch(name):
            out.skipped.append(Unread(_shown(root, rel), flavour.spool_reason))
            continue
        if (why := _spool_problem(root, rel, name, passwd, system, flavour.spool_links)) is not None:
            out.unread.append(Unread(_shown(root, rel), why))
            continue
        if (crontab := _file(root, rel, out, user=name, mode=flavour.spool_mode)) is not None:
            out.spool.append(crontab)
    return out


def _spool_problem(root: Path, rel: str, name: str, passwd: dict[str, int], system: frozenset[int],
                   links: bool = True) -> str | None:
    """Debian's cron and cronie (database.c): the file's name is the user; it must exist, and
    the file must be that user's or root's (`st_uid != ROOT_UID && st_uid != pw->pw_uid`:
    WRONG FILE OWNER; root, as _system_owners counts it in an image)."""
    if name not in passwd:
        return f"cron skips it: no user '{one_line(name)}' in {_shown(root, PASSWD)} (cron: ORPHAN)"
    try:
        st = os.lstat(root / rel)
    except OSError as exc:
        return f"cannot be read: {_reason(exc)}"
    if stat.S_ISLNK(st.st_mode) and not links:
        return "cron skips it: a symbolic link, which Debian's cron does not follow to a user crontab (cron: CAN'T OPEN)"
    if stat.S_ISREG(st.st_mode) and st.st_uid != passwd[name] and st.st_uid not in system:
        return (f"cron skips it: owned by uid {st.st_uid}, neither {name}'s (uid {passwd[name]}) nor root's "
                "(cron: WRONG FILE OWNER)")
    return None
