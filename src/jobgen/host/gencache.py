"""The generator's compiled cache: what a run of jobgen-generator wrote, so that the next
run with the same inputs writes the same files again without compiling.

Standard library only (os, stat, sha256): a hit loads nothing of the compiler, PyYAML,
jinja2 or packaging; a miss compiles as if there were no cache, then fills it.

**The key** is a sha256 over everything a run reads besides the output folder:
- each manifest discover() picked, its path and its bytes (masking and /etc over
  /usr/lib are discover()'s, before the key);
- jobgen's code: its version, the interpreter's, and the name, size, mtime and inode of
  every file of the installed package and its templates, and of the __init__.py of
  PyYAML, jinja2 and packaging (as compiler/resources.py marks them for the render
  cache). An upgrade (dpkg, pip) writes new files, an edit a new mtime;
- the running systemd's release as host/machine.py reads it (the version gates);
- the arguments (the three output folders) and every variable the generator reads;
- what a compile reads of the machine: the real path of the program (the `jobgen`
  beside it runs cluster locks) and that `jobgen`, systemd-tmpfiles' path, the vendor
  unit folders (a unit a package installs since is refused: adding it changes the
  folder's mtime) and the time zone database (a zone a schedule names).

**An entry** is one file named KEY.entry: a header line, `key KEY`, `body SHA256` (of
the rest), then records `KIND SIZE NAME` + newline + SIZE bytes + newline, KIND being
`file`, `link` or a severity (a line the run logged). It is used only if its name, its
key and the body's digest agree, every name is a plain path inside the output folder,
every link is a `.wants/NAME -> ../NAME` link, it is a regular file of this user's or
root's that nobody else can write, and no folder on the way from / is a link or writable
by others. Anything else is a miss plus one note; a run that skipped a manifest or ran
out of time is never stored, so a broken manifest is never served from the cache.

**Where.** Looked in, and stored into, in this order ($JOBGEN_GENERATOR_CACHE, colon-
separated, names others; empty turns the cache off):
1. /var/cache/jobgen/generator, across boots (FHS: /var/cache may be deleted without
   losing anything). At boot a generator runs before local-fs.target (systemd.generator(7)),
   so /var may be a mount point not mounted yet, and the root file system may still be
   read-only; /etc and /usr/lib are the administrator's and the vendor's and may be
   read-only too. A missing or unreadable folder is a plain miss (no note), and a run makes
   only the last two folders (jobgen/generator) below an existing /var/cache, which is
   absent while a separate /var is not mounted (its mount point is empty): nothing is
   written under a mount point.
2. /run/jobgen-generator, this boot only (/run is a tmpfs, empty at every boot). systemd
   257 runs generators in a mount namespace with everything but /run, /tmp (private),
   /proc, /dev/shm and /sys remounted read-only (src/core/manager.c
   manager_execute_generators(), remount_ro; 252 does not): there a generator cannot write
   /var/cache, and its entry goes here, so every daemon-reload after the first of a boot
   is a hit. Beside such an entry the run leaves PENDING, and the generated
   jobgen-generator-cache.path/.service pair moves the entry into FOLDER after
   local-fs.target, so the next boot is a hit too (host/genpersist.py: lookup() reads
   it, put() writes it, by the rules here).

Two writers (two generators, a generator and a test) write under temporary names and
rename into place: a reader sees a whole entry or none. Entries beyond KEEP, the oldest
first, are removed through the folder's descriptor (unlinkat: never through a link).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

from jobgen.compiler import trust
from jobgen.compiler.trust import Untrusted

from jobgen.contract.digest import sha256

FOLDER = "/var/cache/jobgen/generator"  # across boots
RUN_FOLDER = "/run/jobgen-generator"  # this boot only: where a sandboxed generator can write
FOLDERS = (FOLDER, RUN_FOLDER)  # looked in, and stored into, in this order
FOLDER_ENV = "JOBGEN_GENERATOR_CACHE"  # colon-separated folders instead; empty: no cache
MADE = 2  # trailing folders a run may create: jobgen/generator, never /var/cache itself
KEEP = 8  # entries kept, the newest
SUFFIX = ".entry"
# Left beside an entry stored in a folder after the first (no SUFFIX: never an entry):
# the generated jobgen-generator-cache.path starts the run that keeps it in FOLDER.
PENDING = "pending"
MAGIC = b"jobgen-generator-cache 1"
ENTRY_MAX = 256 * 1024 * 1024  # larger is not an entry this program wrote: a miss
# Read for the key; larger than compiler/limits.py MANIFEST_BYTES, so too large a
# manifest is a miss the compiler reports (tests/test_generator_cache.py checks).
MANIFEST_READ_MAX = 4 * 1024 * 1024
# Every variable the generator reads (cli/generator.py, host/sources.py).
# (SYSTEMD_IN_INITRD and SYSTEMD_SCOPE only decide whether it runs at all.)
ENV_READ = ("JOBGEN_MANIFEST_DIRS", "JOBGEN_GENERATOR_DEADLINE")
ZONEINFO = "/usr/share/zoneinfo"
DEPENDENCIES = ("yaml", "jinja2", "packaging")  # as compiler/resources.py _DEPENDENCIES
SEVERITIES = ("error", "warning")  # the lines cli/generator.py logs (SHOWN)
FILE_MODE = 0o644  # as compiler/write.py FILE_MODE and DIR_MODE
DIR_MODE = 0o755


class Entry:
    def __init__(self, files: dict[str, bytes], links: dict[str, str], lines: list[tuple[str, str]]):
        self.files, self.links, self.lines = files, links, lines


# --------------------------------------------------------------------------- the key

def _marks(path: str) -> str:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as exc:
        return f"{path} -{exc.errno}"
    # No st_dev: a file system's device number is handed out at mount time for overlayfs,
    # tmpfs and btrfs subvolumes (anonymous devices, the lowest free number), so it may
    # differ from one boot to the next and make every boot a miss.
    return f"{path} {st.st_mode:o} {st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _tree(top: str, out: list[str]) -> None:
    try:
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError as exc:
        out.append(f"{top} -{exc.errno}")
        return
    for e in entries:
        if e.name == "__pycache__":
            continue  # written by imports; the sources decide
        if e.is_dir(follow_symlinks=False):
            _tree(e.path, out)
        else:
            out.append(_marks(e.path))


def template_dir(package: str) -> str:
    # compiler/resources.py template_dir(): inside the package in a wheel, the repository's
    # top-level templates/ in an editable install.
    packaged = os.path.join(package, "templates")
    return packaged if os.path.isdir(packaged) else os.path.join(os.path.dirname(os.path.dirname(package)), "templates")


def code_marks() -> list[str]:
    import jobgen

    package = os.path.dirname(os.path.abspath(jobgen.__file__))
    marks = [jobgen.__version__, sys.version, sys.executable]
    _tree(package, marks)
    if not template_dir(package).startswith(package + os.sep):
        _tree(template_dir(package), marks)
    for name in DEPENDENCIES:
        found = next((p for d in sys.path if os.path.isfile(p := os.path.join(d or ".", name, "__init__.py"))), None)
        marks.append(_marks(found) if found else f"{name}: not found")
    return marks


def read_manifest(path: str) -> bytes | None:
    """Its bytes, or None when it is not a regular file or too large (the compiler says
    why; nothing is cached). O_NONBLOCK: a FIFO must not stop the boot here."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MANIFEST_READ_MAX:
            return None
        chunks, size = [], 0
        while chunk := os.read(fd, MANIFEST_READ_MAX + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > MANIFEST_READ_MAX:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def key(argv: list[str], env: dict[str, str], manifests: list[str], running: tuple[int | None, str],
        program: str, code: list[str] | None = None) -> str | None:
    """The key of a run, or None when a manifest cannot be read for it (then no cache)."""
    from jobgen.host import machine

    h = sha256()

    def add(*fields: object) -> None:
        for f in fields:
            h.update(str(f).encode("utf-8", "surrogateescape") + b"\0")
        h.update(b"\n")

    add(MAGIC.decode())
    add("code", *(code if code is not None else code_marks()))
    add("systemd", *running)
    add("args", *argv)
    for name in ENV_READ:
        add("env", name, env.get(name, "\0unset"))
    # The holder is found beside the program's real path (runtime/spawn.py running_jobgen):
    # systemd's link in system-generators and /usr/bin/jobgen-generator are one program.
    real = os.path.realpath(program) if os.path.isabs(program) else ""
    add("program", real, _marks(os.path.join(os.path.dirname(real), "jobgen")) if real else "-")
    add("machine", *map(_marks, machine.TMPFILES_BINARIES), *map(_marks, machine.VENDOR_UNIT_DIRS), _marks(ZONEINFO))
    for path in manifests:
        data = read_manifest(path)
        if data is None:
            return None
        add("manifest", path, len(data), sha256(data).hexdigest())
    return h.hexdigest()


# --------------------------------------------------------------------------- the folder

def folders(env: dict[str, str]) -> tuple[str, ...]:
    value = env.get(FOLDER_ENV)
    named = FOLDERS if value is None else tuple(value.split(":"))
    return tuple(f for f in named if f and os.path.isabs(f))


def open_folder(where: str, create: bool) -> int:
    """The cache folder's descriptor by the render cache's rule (compiler/trust.py); a run
    makes only jobgen/generator, never the folder above it."""
    return trust.open_folder(where, create, made=MADE)


# --------------------------------------------------------------------------- lookup

def lookup(where: str, wanted: str) -> Entry | None:
    """The entry for ``wanted``, None when there is none (or the folder cannot be read:
    /var not mounted yet); raises Untrusted for one that must not be used."""
    try:
        dir_fd = open_folder(where, create=False)
    except OSError:
        return None
    try:
        try:
            fd = os.open(wanted + SUFFIX, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a link
                raise Untrusted(f"{where}/{wanted}{SUFFIX} is a symbolic link") from None
            return None
        try:
            st = os.fstat(fd)
            name = f"{where}/{wanted}{SUFFIX}"
            if not stat.S_ISREG(st.st_mode):
                raise Untrusted(f"{name} is not a regular file")
            if st.st_uid not in (os.geteuid(), 0) or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise Untrusted(f"{name} belongs to uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):04o}")
            if st.st_size > ENTRY_MAX:
                raise Untrusted(f"{name} is larger than any entry ({st.st_size} bytes)")
            data = _read_all(fd, st.st_size)
        finally:
            os.close(fd)
        return parse(data, wanted, name)
    finally:
        os.close(dir_fd)


def _read_all(fd: int, size: int) -> bytes:
    chunks, got = [], 0
    while got <= size and (chunk := os.read(fd, size + 1 - got)):
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _plain(rel: str) -> bool:
    """A path inside the output folder as the generator writes them: one or two names,
    none empty, '.', '..' or hidden."""
    parts = rel.split("/")
    return 0 < len(parts) <= 2 and all(p and not p.startswith(".") for p in parts) and "\0" not in rel


def parse(data: bytes, wanted: str, name: str) -> Entry:
    """An entry from its bytes, checked as the module's docstring says; raises Untrusted."""
    head = data.split(b"\n", 3)
    if len(head) != 4 or head[0] != MAGIC or head[1] != b"key " + wanted.encode():
        raise Untrusted(f"{name} is not an entry for its key (another format, or truncated)")
    body = head[3]
    if head[2] != b"body " + sha256(body).hexdigest().encode():
        raise Untrusted(f"{name} does not hold what its digest says (truncated or changed)")
    files: dict[str, bytes] = {}
    links: dict[str, str] = {}
    lines: list[tuple[str, str]] = []
    at = 0
    try:
        while at < len(body):
            end = body.index(b"\n", at)
            kind, size, rel = body[at:end].decode().split(" ", 2)
            payload = body[end + 1: end + 1 + int(size)]
            at = end + 1 + int(size) + 1
            if len(payload) != int(size) or body[at - 1: at] != b"\n":
                raise ValueError("short record")
            if kind == "file" and _plain(rel) and rel not in files:
                files[rel] = payload
            elif kind == "link" and _plain(rel) and rel not in links and rel.partition("/")[0].endswith(".wants") \
                    and payload.decode() == "../" + rel.partition("/")[2]:
                links[rel] = payload.decode()
            elif kind in SEVERITIES and rel == "-" and b"\n" not in payload:
                lines.append((kind, payload.decode()))
            else:
                raise ValueError(f"record {kind} {rel!r}")
    except ValueError as exc:  # UnicodeDecodeError included
        raise Untrusted(f"{name} holds a record the generator never writes ({exc})") from None
    if set(files) & set(links):
        raise Untrusted(f"{name} names a path twice")
    return Entry(files, links, lines)


def serialize(wanted: str, entry: Entry) -> bytes:
    records = []
    for rel, data in sorted(entry.files.items()):
        records.append(b"file %d %s\n%s\n" % (len(data), rel.encode(), data))
    for rel, target in sorted(entry.links.items()):
        records.append(b"link %d %s\n%s\n" % (len(target.encode()), rel.encode(), target.encode()))
    for severity, text in entry.lines:
        records.append(b"%s %d -\n%s\n" % (severity.encode(), len(text.encode()), text.encode()))
    body = b"".join(records)
    return MAGIC + b"\nkey " + wanted.encode() + b"\nbody " + sha256(body).hexdigest().encode() + b"\n" + body


# --------------------------------------------------------------------------- store

def store(where: str, wanted: str, entry: Entry) -> bool:
    """Write the entry (temporary name, fsync, rename), then keep the KEEP newest. Whether
    it was stored: failing to (read-only, not mounted, not ours) is not an error."""
    try:
        put(where, wanted, entry)
        return True
    except (OSError, Untrusted):
        return False


def put(where: str, wanted: str, entry: Entry) -> None:
    """store(), saying why not: raises OSError (read-only, full, not mounted) or Untrusted
    (the folder, or an entry lookup would refuse). Nothing half-written stays behind."""
    data = serialize(wanted, entry)
    parse(data, wanted, "new entry")  # never store what lookup would refuse
    dir_fd = open_folder(where, create=True)
    tmp = f".tmp.{os.urandom(8).hex()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)  # a crash must not leave a renamed empty entry (it would be a note at boot)
        finally:
            os.close(fd)
        os.replace(tmp, wanted + SUFFIX, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        _trim(dir_fd)
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    finally:
        os.close(dir_fd)


def _trim(dir_fd: int) -> None:
    with os.scandir(dir_fd) as it:
        entries = [(e.stat(follow_symlinks=False).st_mtime_ns, e.name) for e in it
                   if e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False)]
    for _, name in sorted(entries, reverse=True)[KEEP:]:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass


# --------------------------------------------------------------------------- kept across boots

def mark_pending(where: str) -> None:
    """Leave PENDING beside an entry stored in a later folder: what the generated
    jobgen-generator-cache.path waits for (host/genpersist.py). Failing to is a lost
    chance to keep the entry, not an error."""
    try:
        dir_fd = open_folder(where, create=False)
    except (OSError, Untrusted):
        return
    try:
        os.close(os.open(PENDING, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600, dir_fd=dir_fd))
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def take_pending(dir_fd: int) -> None:
    """Remove PENDING (none is fine): done first by the persisting run, so whatever it
    finds next, the path unit does not start it again for the same entries."""
    try:
        os.unlink(PENDING, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def keys(dir_fd: int) -> list[str]:
    """The keys of the folder's entries by their names (KEY.entry, KEY a sha256 in hex),
    oldest first; lookup() checks each."""
    found = []
    with os.scandir(dir_fd) as it:
        for e in it:
            wanted = e.name[: -len(SUFFIX)]
            if e.name.endswith(SUFFIX) and len(wanted) == 64 and all(c in "0123456789abcdef" for c in wanted):
                try:
                    found.append((e.stat(follow_symlinks=False).st_mtime_ns, wanted))
                except OSError:
                    continue  # gone since
    return [wanted for _, wanted in sorted(found)]


# --------------------------------------------------------------------------- a hit

def write(normal: str, entry: Entry) -> None:
    """The entry's files and links into the output folder as host/generator.py write()
    leaves them: files 0644 whatever the umask, renamed into place from a temporary name,
    their folders 0755; .wants/ folders as mkdir makes them. No fsync: systemd's output
    folders are on /run, a tmpfs it empties before every run. Raises OSError, and then
    leaves none of the entry's files (a full /run: as a miss, not half a manifest's units)."""
    written: list[str] = []
    try:
        _write_files(normal, entry, written)
    except OSError:
        for path in written:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise
    made = {os.path.dirname(path) for path in written}
    for rel, target in entry.links.items():
        path = os.path.join(normal, rel)
        folder = os.path.dirname(path)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        try:
            os.symlink(target, path)
        except FileExistsError:  # a folder written before (by hand): replaced unless the same
            if os.path.islink(path) and os.readlink(path) == target:
                continue
            os.unlink(path)
            os.symlink(target, path)


def _write_files(normal: str, entry: Entry, written: list[str]) -> None:
    """entry.files into NORMAL; each path written (temporary or final) is in WRITTEN as soon
    as it exists, for write() to remove on failure."""
    made: set[str] = set()
    token = os.urandom(4).hex()
    umask = os.umask(0o022)
    os.umask(umask)
    real_normal = os.path.realpath(normal)
    for n, (rel, data) in enumerate(entry.files.items()):
        parent = os.path.join(normal, rel.rpartition("/")[0]) if "/" in rel else normal
        if parent not in made:
            _make_dir(parent)
            # A folder that is a link out of the output folder is refused, as a miss refuses
            # it (compiler/write.check_folder): a hit never writes anywhere else.
            real = os.path.realpath(parent)
            if real != real_normal and not real.startswith(real_normal.rstrip("/") + "/"):
                raise OSError(errno.ELOOP, "it leads out of the output folder", parent)
            made.add(parent)
        # A short fixed-length name of its own (not write.py's, whose recovery a folder
        # systemd empties before every run never needs): never longer than a unit name.
        tmp = os.path.join(parent, f".gencache.{token}{n:x}")
        final = os.path.join(normal, rel)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
            written.append(tmp)
            try:
                if FILE_MODE & umask:  # systemd runs generators with umask 022: no call
                    os.fchmod(fd, FILE_MODE)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, final)
        except OSError as exc:  # named by the file, as a miss names it (os.write names none)
            raise OSError(exc.errno, exc.strerror, final) from None
        written[-1] = final


def _make_dir(path: str) -> None:
    if not path or os.path.isdir(path):
        return
    _make_dir(os.path.dirname(path))
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return
    os.chmod(path, DIR_MODE)
