"""Where each generated file goes inside the output folder: one row per layout.

render.py names files as the flat layout has them (``NAME.service``, ``NAME.timer``,
``NAME.target``, ``tmpfiles.d/jobgen-MANIFEST.conf``); a layout maps those names onto the
folders the consumer reads (systemd.unit(5) "UNIT FILE LOAD PATH", tmpfiles.d(5)):

  flat    the units side by side for review, the tmpfiles.d snippet in tmpfiles.d/
  etc     a root tree for the administrator: etc/systemd/system/, etc/tmpfiles.d/
  usr     a root tree for a vendor or image: usr/lib/systemd/system/, usr/lib/tmpfiles.d/
  debian  a package's debian/ folder, named for debhelper: PKG.UNIT (dh_installsystemd(1)
          --name=UNIT), PKG.tmpfiles (dh_installtmpfiles(1)), and jobgen.mk, the
          override_dh_installsystemd lines that say which units are enabled and started

Pure data plus small functions; write.py and the host layer ask it, nothing else decides paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from jobgen.compiler import header, limits
from jobgen.compiler.diagnostics import ERROR, Diagnostic

TMPFILES_DIR = "tmpfiles.d"  # where render.py puts the snippet in its own (flat) naming


# A table row, a named tuple (as target.py's ValueGate): a frozen dataclass executes six
# generated methods when it is defined, at every start of every command.
class Layout(NamedTuple):
    name: str
    units: str  # folder for .service/.timer/.target, relative to the output folder
    tmpfiles: str  # folder for tmpfiles.d(5) snippets
    purpose: str
    # File names inside those folders ({base}: render.py's name, {package}: --package).
    unit_name: str = "{base}"
    tmpfiles_name: str = "{base}"
    needs_package: bool = False
    # Files the layout adds beside the units: (package, render.py's names) -> {name: bytes}.
    extras: Callable[[str, list[str]], dict[str, bytes]] | None = None


# --- debian: which units dh_installsystemd enables and starts -----------------------------
#
# dh_installsystemd (debhelper 13) without unit arguments enables every installed unit that
# has an [Install] section and STARTS every non-template unit, so a job's oneshot service
# would run at install time. jobgen.mk therefore names each unit: `--name=NAME` installs
# debian/PKG.NAME.{service,timer,target}, the unit arguments say which of them the
# maintainer scripts act on.
DEBIAN_FRAGMENT = "jobgen.mk"

# (kind, dh_installsystemd options): a job's oneshot service is installed but neither
# enabled nor started, and an upgrade does not stop a running job (--no-stop-on-upgrade);
# its timer starts it. Timers, worker targets and single workers are enabled and started
# (and restarted after an upgrade, debhelper's compat 13 default). A worker template is
# installed only: its target starts the instances.
DEBIAN_UNIT_OPTIONS: dict[str, tuple[str, ...]] = {
    "job-service": ("--no-enable", "--no-start", "--no-stop-on-upgrade"),
    "timer": (),
    "path": (),  # overlap: queue: the drainer's watch, enabled and started like a timer
    "target": (),
    "worker-service": (),
    "template": (),
}


def _debian_kind(unit: str, units: set[str]) -> str:
    stem, _, suffix = unit.rpartition(".")
    if stem.endswith("@"):
        return "template"
    if suffix == "service":
        # A job's service, or the drainer of an `overlap: queue` job (NAME-drain.service):
        # started by its timer or its .path unit, never at install.
        job = stem.removesuffix("-drain")
        return "job-service" if f"{stem}.timer" in units or f"{job}.timer" in units else "worker-service"
    return suffix


def debian_fragment(package: str, generated: list[str]) -> bytes:
    """debian/jobgen.mk: the override_dh_installsystemd recipe for these units."""
    units = sorted(n for n in generated if "/" not in n)
    lines = [
        header.command_line(f"render --layout debian --package {package}"),
        "# In debian/rules, after the `%:` rule:  include debian/jobgen.mk",
        "# dh_installsystemd(1): --name=NAME installs debian/PKG.NAME.{service,timer,target}; the unit",
        "# arguments are the units whose maintainer scripts enable and start them. The first line",
        "# handles the package's own units (debian/PKG.service, units the build installed) as before.",
        "jobgen_default_goal := $(.DEFAULT_GOAL)",
        "",
        "override_dh_installsystemd:",
        "\tdh_installsystemd",
    ]
    for unit in units:
        kind = _debian_kind(unit, set(units))
        name = unit.rpartition(".")[0]
        argv = ["dh_installsystemd", f"-p{package}", f"--name={name}", *DEBIAN_UNIT_OPTIONS[kind]]
        if kind != "template":  # templates are never enabled or started by debhelper
            argv.append(unit)
        lines.append("\t" + " ".join(argv))
    lines += ["", "# Including this file must not change which target `debian/rules` runs by default.", ".DEFAULT_GOAL := $(jobgen_default_goal)", ""]
    return "\n".join(lines).encode()


def _debian_extras(package: str, generated: list[str]) -> dict[str, bytes]:
    return {DEBIAN_FRAGMENT: debian_fragment(package, generated)}


LAYOUTS: dict[str, Layout] = {
    "flat": Layout("flat", "", "tmpfiles.d", "units side by side for review; tmpfiles.d/ is NOT a folder systemd-tmpfiles reads"),
    "etc": Layout("etc", "etc/systemd/system", "etc/tmpfiles.d", "a root tree for the administrator (/etc)"),
    "usr": Layout("usr", "usr/lib/systemd/system", "usr/lib/tmpfiles.d", "a root tree for a vendor package or image (/usr/lib)"),
    # debhelper reads debian/PKG.NAME.service|timer|target with `dh_installsystemd --name=NAME`
    # and debian/PKG.tmpfiles with dh_installtmpfiles (compat 13), see dh_installsystemd(1).
    "debian": Layout("debian", "", "", "a package's debian/ folder for debhelper (compat 13); needs --package",
                     unit_name="{package}.{base}", tmpfiles_name="{package}.tmpfiles", needs_package=True, extras=_debian_extras),
}

# Debian Policy 5.6.7: binary package names.
_PACKAGE_NAME = r"[a-z0-9][a-z0-9+.-]+"  # compiled at its first use (re's cache): --package only


class LayoutError(ValueError):
    """A layout cannot place these files (one line, for the user)."""


def check_package(layout: Layout, package: str | None) -> None:
    if layout.needs_package and not package:
        raise LayoutError(f"--layout {layout.name} needs --package PKG (the binary package in debian/control)")
    if package and not layout.needs_package:
        raise LayoutError(f"--package is for --layout debian; --layout {layout.name} names no package")
    if package and not re.fullmatch(_PACKAGE_NAME, package):
        raise LayoutError(f"--package {package!r}: a Debian package name is lower-case letters, digits and +-. (at least two, starting with a letter or digit)")
    if package and name_limit(layout, package) < 1:
        # PKG.NAME-drain.service and PKG.tmpfiles are each one file name (NAME_MAX).
        raise LayoutError(f"--package: a name of {len(package)} characters leaves no room for a unit's name in "
                          f"{limits.NAME_MAX} bytes (at most {len(package) - 1 + name_limit(layout, package)})")


def name_limit(layout: Layout, package: str | None = None) -> int:
    """The longest job or worker name whose files this layout can write (limits.NAME, less
    what the layout adds to a unit's file name: debian's "PKG.")."""
    return limits.name_for_units_named(layout.unit_name.format(base="{}", package=package))


def name_problems(layout: Layout, package: str | None, manifest) -> list[Diagnostic]:
    """An error at each job or worker (a compiled model.Manifest) whose name is too long for
    the file names this layout gives its units: NAME_MAX is per file name."""
    limit = name_limit(layout, package)
    if limit >= limits.NAME:
        return []
    longest = place(layout, max(limits.UNIT_FILES, key=len).format("NAME"), package)  # NAME-drain.service
    return [
        Diagnostic(unit.pos, ERROR,
                   f"{kind} '{unit.name}': the name has {len(unit.name)} characters; --layout {layout.name}"
                   f"{f' --package {package}' if package else ''} allows at most "
                   f"{limit}, so that {longest} fits in {limits.NAME_MAX} bytes (README: Limits)")
        for kind, units in (("job", manifest.jobs), ("worker", manifest.workers)) for unit in units
        if len(unit.name) > limit
    ]


def place(layout: Layout, generated: str, package: str | None = None) -> str:
    """The path, relative to the output folder, of a file render.py calls ``generated``."""
    folder, _, base = generated.rpartition("/")
    if folder == TMPFILES_DIR:
        name, where = layout.tmpfiles_name.format(base=base, package=package), layout.tmpfiles
    elif folder:
        raise ValueError(f"render produced {generated!r}, which no layout places")
    else:
        name, where = layout.unit_name.format(base=base, package=package), layout.units
    return f"{where}/{name}" if where else name


def arrange(layout: Layout, generated: dict[str, bytes], package: str | None = None) -> dict[str, bytes]:
    """Every generated file at its place in the layout, plus the files the layout adds."""
    check_package(layout, package)
    placed: dict[str, bytes] = {}
    origin: dict[str, str] = {}
    for name in sorted(generated):
        where = place(layout, name, package)
        if where in placed:
            raise LayoutError(f"--layout {layout.name} puts both {origin[where]} and {name} in {where}; render one manifest with host locks per package")
        placed[where], origin[where] = generated[name], name
    if layout.extras:
        placed.update(layout.extras(package or "", sorted(generated)))
    return placed


# Folders systemd reads unit files from (systemd.unit(5) "UNIT FILE LOAD PATH", system and
# user managers). A tmpfiles.d/ folder inside one of them is read by nobody: systemd-tmpfiles
# reads /etc/tmpfiles.d, /run/tmpfiles.d, /usr/local/lib/tmpfiles.d, /usr/lib/tmpfiles.d
# (tmpfiles.d(5)), so lock files would not exist after the next reboot.
UNIT_FOLDERS = (
    "/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system", "/lib/systemd/system",
    "/etc/systemd/user", "/usr/lib/systemd/user", "/usr/local/lib/systemd/user",
)  # fmt: skip


def unread_tmpfiles(layout: Layout, output: str, generated: dict[str, bytes]) -> str | None:
    """A warning when the flat layout puts a tmpfiles.d snippet where systemd reads units:
    the units would load, the lock files they need would not be made at boot."""
    real = output.rstrip("/") or "/"
    if layout.name != "flat" or real not in UNIT_FOLDERS:
        return None
    snippets = sorted(place(layout, n) for n in generated if n.startswith(f"{TMPFILES_DIR}/"))
    if not snippets:
        return None
    return (
        f"{real}/{snippets[0]} is not read by systemd-tmpfiles (it reads /etc/tmpfiles.d, not a "
        f"tmpfiles.d/ folder beside the units): the lock files would be missing after the next "
        f"reboot and every host-locked job would fail. Install with `jobgen apply MANIFEST`, or "
        f"render a root tree with `--layout etc -o /` (then `systemd-tmpfiles --create` and "
        f"`systemctl daemon-reload`)"
    )


def read_by_this_host(layout: Layout, output: str) -> bool:
    """Whether systemd on this host loads the units a render puts into ``output`` (its
    real path): the flat layout into a unit folder, a root-tree layout into /."""
    real = output.rstrip("/") or "/"
    return real in UNIT_FOLDERS if layout.name == "flat" else layout.name in ("etc", "usr") and real == "/"


def folders(layout: Layout) -> tuple[str, ...]:
    """The folders a layout writes into (what --prune may look at, nothing else)."""
    return tuple(sorted({layout.units, layout.tmpfiles}))
