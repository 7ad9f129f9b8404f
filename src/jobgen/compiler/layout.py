"""Where each generated file goes inside the output folder: one row per layout.

render.py names files as the flat layout has them (``NAME.service``, ``NAME.timer``,
``NAME.target``, ``tmpfiles.d/jobgen-MANIFEST.conf``); a layout maps those names onto the
folders the consumer reads (systemd.unit(5) "UNIT FILE LOAD PATH", tmpfiles.d(5)):

  flat    the units side by side for review, the tmpfiles.d snippet in tmpfiles.d/
  etc     a root tree for the administrator: etc/systemd/system/, etc/tmpfiles.d/
  usr     a root tree for a vendor or image: usr/lib/systemd/system/, usr/lib/tmpfiles.d/

Pure data plus one function; write.py and the host layer ask it, nothing else decides paths.
"""

from __future__ import annotations

from dataclasses import dataclass

TMPFILES_DIR = "tmpfiles.d"  # where render.py puts the snippet in its own (flat) naming


@dataclass(frozen=True)
class Layout:
    name: str
    units: str  # folder for .service/.timer/.target, relative to the output folder
    tmpfiles: str  # folder for tmpfiles.d(5) snippets
    purpose: str


LAYOUTS: dict[str, Layout] = {
    "flat": Layout("flat", "", "tmpfiles.d", "units side by side for review; tmpfiles.d/ is NOT a folder systemd-tmpfiles reads"),
    "etc": Layout("etc", "etc/systemd/system", "etc/tmpfiles.d", "a root tree for the administrator (/etc)"),
    "usr": Layout("usr", "usr/lib/systemd/system", "usr/lib/tmpfiles.d", "a root tree for a vendor package or image (/usr/lib)"),
}


def place(layout: Layout, generated: str) -> str:
    """The path, relative to the output folder, of a file render.py calls ``generated``."""
    folder, _, base = generated.rpartition("/")
    if folder == TMPFILES_DIR:
        return f"{layout.tmpfiles}/{base}" if layout.tmpfiles else base
    if folder:
        raise ValueError(f"render produced {generated!r}, which no layout places")
    return f"{layout.units}/{base}" if layout.units else base


def arrange(layout: Layout, generated: dict[str, bytes]) -> dict[str, bytes]:
    """Every generated file at its place in the layout."""
    return {place(layout, name): data for name, data in generated.items()}


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


def folders(layout: Layout) -> tuple[str, ...]:
    """The folders a layout writes into (what --prune may look at, nothing else)."""
    return tuple(sorted({layout.units, layout.tmpfiles}))
