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
        if _links_to_null(path):
            return True
        st = os.stat(path)
        return st.st_size == 0 and (st.st_mode & 0o170000) == 0o100000  # S_ISREG, without importing stat
    except OSError:
        return False


def _links_to_null(path: str) -> bool:
    """A link whose own target is /dev/null. Not realpath(): a link into a folder others can
    write, whose file there is a link to /dev/null, is anyone's mask."""
    try:
        return os.readlink(path) == os.devnull
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
    if os.path.islink(path):  # the file read is the link's target: its folders count too
        real = os.path.dirname(os.path.realpath(path))
        if real != os.path.realpath(os.path.dirname(path)) and (why := untrusted_folder(real)) is not None:
            return f"it is a link into {real}, and {why}"
    return None


def untrusted_folder(folder: str) -> str | None:
    """Why no manifest in ``folder`` may be compiled or mask another, or None.

    Whoever can write a folder on the way to a manifest can replace it, or hide the
    vendor's with an empty file or a link to /dev/null, whatever the file's own owner and
    mode. So the folder and every folder above it must pass the rule the caches use
    (compiler/trust.py, sshd's StrictModes): root's (or this user's), and nobody else can
    write it; a folder above may be root's and sticky (/tmp). A folder reached through a
    link is judged where it really is."""
    from jobgen.compiler import trust  # os and stat only; asked only once a manifest is found

    try:
        os.close(trust.open_folder(os.path.realpath(folder), create=False))
    except trust.Untrusted as exc:
        return f"{exc}: whoever can change that folder could replace or mask its manifests (chown root; chmod go-w)"
    except OSError as exc:
        return f"its folder cannot be read: {exc.strerror or exc}"
    return None


def choose(dirs: tuple[str, ...]) -> tuple[list[str], list[tuple[str, str]]]:
    """The manifests to compile, and those refused with why (untrusted, untrusted_folder).

    Asked of the winners before masks are applied: a mask in a folder others can write
    is refused like a manifest there, never obeyed."""
    chosen: list[str] = []
    refused: list[tuple[str, str]] = []
    folders: dict[str, str | None] = {}
    for path in winners(dirs):
        folder = os.path.dirname(path)
        if folder not in folders:
            folders[folder] = untrusted_folder(folder)
        why = folders[folder]
        if why is None and _links_to_null(path):
            continue  # the administrator's mask, in a folder only root writes
        if why is None:
            # An empty file masks only when it passes the rule a manifest does: root's, no
            # one else can write it, and a link's target folders too. A link into a folder
            # anyone can write made its empty file anyone's mask, silently obeyed.
            why = untrusted(path)
            if why is None and _masked(path):
                continue
        if why is None:
            chosen.append(path)
        else:
            refused.append((path, why))
    return chosen, refused


def discover(dirs: tuple[str, ...]) -> list[str]:
    """The manifests to generate from, in file-name order: per file name, the one in the
    first folder that has it; a masked winner hides the name altogether."""
    return [path for path in winners(dirs) if not _masked(path)]


def winners(dirs: tuple[str, ...]) -> list[str]:
    """Per file name, in file-name order, the path in the first folder that has it."""
    chosen: dict[str, str] = {}
    for folder in dirs:
        try:
            names = os.listdir(folder)
        except OSError:
            continue  # a folder that does not exist holds no manifests
        for name in names:
            if is_manifest_name(name) and name not in chosen:
                chosen[name] = os.path.join(folder, name)
    return [chosen[name] for name in sorted(chosen)]
