"""Where jobgen-generator reads manifests, and the one question it asks at every boot and
daemon-reload before anything else: is there a manifest at all?

Imports the standard library's os alone: on a host with the generator linked and no
manifest (most reloads of most hosts) this module is all of jobgen that runs, and the
generator exits without loading the compiler, PyYAML or jinja2 (systemd.generator(7):
generators run synchronously before any unit starts, so they should be fast).
"""

import os

# Where manifests are read, highest precedence first: a file in /etc/jobgen/ replaces the
# same-named file in /usr/lib/jobgen/ (systemd.unit(5)'s rule for /etc over /usr/lib).
MANIFEST_DIRS = ("/etc/jobgen", "/usr/lib/jobgen")
# Tests and image builds read other folders, as Quadlet honours QUADLET_UNIT_DIRS.
MANIFEST_DIRS_ENV = "JOBGEN_MANIFEST_DIRS"
MANIFEST_SUFFIX = ".yaml"


def manifest_dirs(env: dict[str, str]) -> tuple[str, ...]:
    value = env.get(MANIFEST_DIRS_ENV)
    if value is None:
        return MANIFEST_DIRS
    return tuple(d for d in value.split(":") if d)


def is_manifest_name(name: str) -> bool:
    return name.endswith(MANIFEST_SUFFIX) and not name.startswith(".")


def any_manifest(dirs: tuple[str, ...]) -> bool:
    """Whether any folder holds a file name discover() (host/generator.py) would consider.
    A yes may still come to no manifest (all masked); a no is final."""
    for folder in dirs:
        try:
            with os.scandir(folder) as entries:
                if any(is_manifest_name(entry.name) for entry in entries):
                    return True
        except OSError:
            continue  # a folder that does not exist holds no manifests
    return False


def _masked(path: str) -> bool:
    # systemd's convention for masking a vendor file: an empty file or a link to /dev/null.
    # A FIFO or a device also has size 0, but masks nothing: untrusted() names it.
    try:
        if os.path.realpath(path) == os.devnull:
            return True
        st = os.stat(path)
        return st.st_size == 0 and (st.st_mode & 0o170000) == 0o100000  # S_ISREG, without importing stat
    except OSError:
        return False


def untrusted(path: str) -> str | None:
    """Why the generator must not turn this manifest into units, or None. Its units run as
    root at boot (a job without `user:` is root's), so the file, a link's target, must be a
    regular file that only root or this user owns and nobody else can write: cron's rule for
    /etc/cron.d, sshd's StrictModes. O_NONBLOCK: a FIFO named *.yaml must not stall the boot."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    try:
        st = os.fstat(fd)
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    finally:
        os.close(fd)
    if (st.st_mode & 0o170000) != 0o100000:
        return "not a regular file"
    if st.st_uid not in (0, os.geteuid()):
        return f"it belongs to uid {st.st_uid}, not to root: its jobs would run as whoever it names, root included"
    if st.st_mode & 0o022:
        return (f"others can write it (mode {st.st_mode & 0o7777:04o}): anyone could make its jobs run as root; "
                "make it writable by its owner alone (chmod go-w)")
    return None


def discover(dirs: tuple[str, ...]) -> list[str]:
    """The manifests to generate from, in file-name order: per file name, the one in the
    first folder that has it; a masked winner hides the name altogether."""
    chosen: dict[str, str] = {}
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue  # a folder that does not exist holds no manifests
        for name in names:
            if is_manifest_name(name) and name not in chosen:
                chosen[name] = os.path.join(folder, name)
    return [chosen[name] for name in sorted(chosen) if not _masked(chosen[name])]
