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


def folders(layout: Layout) -> tuple[str, ...]:
    """The folders a layout writes into (what --prune may look at, nothing else)."""
    return tuple(sorted({layout.units, layout.tmpfiles}))
