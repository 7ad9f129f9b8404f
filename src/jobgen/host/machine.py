"""What jobgen-generator reads of the machine besides the manifests: the running systemd's
release, systemd-tmpfiles' path and the vendor unit folders.

Standard library (os) only: the generator's cache (host/gencache.py) keys on these before
it knows whether anything must be compiled, and a cache hit loads nothing of the compiler.
"""

from __future__ import annotations

import os

# Vendor unit folders (systemd.unit(5) load path, below the generator's normal folder): a
# generated unit of the same name would silently replace the package's unit.
VENDOR_UNIT_DIRS = ("/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
# systemd-tmpfiles' own path: /usr/bin on merged-/usr systems (Debian 12+, RHEL, Fedora),
# /bin on older Debian. Exec lines need an absolute path.
TMPFILES_BINARIES = ("/usr/bin/systemd-tmpfiles", "/bin/systemd-tmpfiles")

# The running manager's version. PID 1 maps libsystemd-shared-<version>.so (its file name
# carries the release: "libsystemd-shared-252.so" on Debian 12, "-257.so" on Debian 13,
# "-255.13-1.fc40.so" on Fedora), so /proc/1/maps names the release that *runs*, even
# after a package upgrade not yet followed by daemon-reexec. systemd passes no version to
# generators (their environment is SYSTEMD_SCOPE, SYSTEMD_IN_INITRD, SYSTEMD_FIRST_BOOT,
# SYSTEMD_VIRTUALIZATION, SYSTEMD_ARCHITECTURE; systemd.generator(7), 251+) and must not be
# asked (no systemctl in a generator). When PID 1 is not systemd or its maps cannot be read,
# the installed library's name is the next best witness.
PID1_MAPS = "/proc/1/maps"
INSTALLED_LIBS = (
    "/usr/lib/*/systemd/libsystemd-shared-*.so",  # Debian, Ubuntu (multiarch)
    "/usr/lib64/systemd/libsystemd-shared-*.so",  # Fedora, RHEL
    "/usr/lib/systemd/libsystemd-shared-*.so",  # Arch, upstream default
    "/lib/systemd/libsystemd-shared-*.so",  # Debian before merged /usr
)
_LIB = "/libsystemd-shared-"


def release_in(text: str) -> int | None:
    """The N of the first "/libsystemd-shared-N<anything but />.so" in text (read with str
    methods, not re: re and enum cost a cache hit more than all of its own work)."""
    start = 0
    while (i := text.find(_LIB, start)) >= 0:
        rest = text[i + len(_LIB):]
        digits = len(rest) - len(rest.lstrip("0123456789"))
        end = rest.find(".so", digits)
        if digits and end >= 0 and "/" not in rest[digits:end]:
            return int(rest[:digits])
        start = i + 1
    return None


def running_systemd(maps: str = PID1_MAPS, installed: tuple[str, ...] = INSTALLED_LIBS) -> tuple[int | None, str]:
    """(major release, where it was read) of the systemd that runs this host, or (None, why)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if (release := release_in(line)) is not None:
                    return release, maps
    except OSError:
        pass
    for pattern in installed:
        found = sorted({r for p in _expand(pattern) if (r := release_in(p)) is not None})
        if found:
            return found[-1], pattern
    return None, "no libsystemd-shared in /proc/1/maps or " + ", ".join(installed)


def tmpfiles_binary() -> str:
    return next((p for p in TMPFILES_BINARIES if os.access(p, os.X_OK)), TMPFILES_BINARIES[0])


def vendor_unit(name: str) -> str | None:
    return next((path for d in VENDOR_UNIT_DIRS if os.path.lexists(path := os.path.join(d, name))), None)


def _expand(pattern: str) -> list[str]:
    """The paths an INSTALLED_LIBS pattern names, whose "*" stand each for part of one
    name (glob would load re, fnmatch and enum: most of a cache hit's cost)."""
    paths = ["/"]
    for part in pattern.strip("/").split("/"):
        head, star, tail = part.partition("*")
        found = []
        for parent in paths:
            if not star:
                found.append(os.path.join(parent, part))
                continue
            try:
                names = os.listdir(parent)
            except OSError:
                continue
            found += [os.path.join(parent, n) for n in sorted(names)
                      if n.startswith(head) and n.endswith(tail) and len(n) >= len(head) + len(tail) and not n.startswith(".")]
        paths = found
    return [p for p in paths if os.path.lexists(p)]
