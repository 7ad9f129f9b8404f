"""The one rule both of jobgen's caches use before they read or write a folder: the render
cache (compiler/cache.py) and the generator's compiled cache (host/gencache.py).

Standard library only: the generator's cache hit imports this and nothing else of the
compiler (tests/test_generator_cache.py checks what a hit loads).
"""

from __future__ import annotations

import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Untrusted(Exception):
    """A cache folder, a folder above it or an entry is not safe to use (one line: why)."""


def check(path: str, st: os.stat_result, last: bool) -> None:
    """ssh's rule for its files (sshd(8) StrictModes), on every folder from / down: it
    belongs to this user or root and nobody else can write it. A folder above the cache
    may be root's and sticky (/tmp): others can add names there but not replace or remove
    ours, and a name they made would be theirs and fail this same check below."""
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{path} is not a folder")
    if st.st_uid not in (os.geteuid(), 0):
        raise Untrusted(f"{path} belongs to uid {st.st_uid}, not to " + ("root" if os.geteuid() == 0 else f"uid {os.geteuid()} or root"))
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (last or st.st_uid != 0 or not st.st_mode & stat.S_ISVTX):
        raise Untrusted(f"{path} can be written by others (mode {stat.S_IMODE(st.st_mode):04o})")


def open_folder(where: str, create: bool, made: int | None = None) -> int:
    """A descriptor of the folder ``where``, reached from / one name at a time without
    following a symbolic link, every folder on the way checked (check). With ``create``,
    what is missing is made (0700): every missing folder, or only the last ``made`` ones
    (the generator never makes /var/cache itself: at boot /var may not be mounted yet, and
    a folder made there would hide the mount). Everything after goes through this
    descriptor (openat, unlinkat), so a link or a rename planted later cannot send a read
    or an unlink elsewhere. Raises Untrusted, or OSError (FileNotFoundError: no cache yet)."""
    parts = [p for p in os.path.normpath(os.path.abspath(where)).split("/") if p]
    fd = os.open("/", _DIR_FLAGS)
    try:
        check("/", os.fstat(fd), last=not parts)
        for i, name in enumerate(parts):
            path = "/" + "/".join(parts[: i + 1])
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                if not create or (made is not None and i < len(parts) - made):
                    raise
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:  # another run made it just now
                    pass
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise Untrusted(f"{path} is a symbolic link (to {os.readlink(name, dir_fd=fd)})")
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
            check(path, os.fstat(fd), last=i == len(parts) - 1)
        return fd
    except BaseException:
        os.close(fd)
        raise
