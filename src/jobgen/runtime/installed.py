"""How this jobgen was installed, and so how to add a client library to it.

jobgen is not on the package index, so installing an extra by jobgen's name fails everywhere. What
works depends on where the running jobgen lives:

- the Debian package (/usr/lib/python3/dist-packages): apt installs the client's Debian
  package (contract.locks.DEBIAN_PACKAGES), debian/control suggests the same ones;
- a pipx virtualenv (pipx_metadata.json beside it): `pipx inject jobgen REQ`;
- any other virtualenv: that virtualenv's pip installs REQ;
- a system or user site: `python3 -m pip install --user REQ` (README: Install).

REQ is the extra's requirement as the installed metadata declares it (pyproject.toml's
optional-dependencies), so the advice never drifts from what the extra would install.
Every message that names an extra asks `how_to_get(extra, client)`.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from jobgen.contract.locks import DEBIAN_PACKAGES

DEBIAN = "debian"
PIPX = "pipx"
VENV = "venv"
SYSTEM = "pip"

_DEBIAN_SITE = Path("/usr/lib/python3/dist-packages")


def how_installed(package_file: str | None = None, prefix: str | None = None, base_prefix: str | None = None) -> str:
    """DEBIAN, PIPX, VENV or SYSTEM, for the jobgen package at package_file (default: this one)."""
    here = Path(package_file or __file__).resolve()
    prefix = prefix if prefix is not None else sys.prefix
    base_prefix = base_prefix if base_prefix is not None else sys.base_prefix
    if _DEBIAN_SITE in here.parents:
        return DEBIAN
    if prefix != base_prefix:
        return PIPX if (Path(prefix) / "pipx_metadata.json").is_file() else VENV
    return SYSTEM


def requirement(extra: str, client: str) -> str:
    """The extra's requirement from the installed metadata (`redis>=5`); the client's name without it."""
    from importlib import metadata

    try:
        declared = metadata.requires("jobgen") or []
    except metadata.PackageNotFoundError:
        return client
    for line in declared:
        spec, _, marker = line.partition(";")
        if marker.replace("'", '"').split() == ["extra", "==", f'"{extra}"']:
            return spec.strip()
    return client


def how_to_get(extra: str, client: str, how: str | None = None) -> str:
    """The command that installs the client library of `extra` into this jobgen."""
    how = how or how_installed()
    if how == DEBIAN:
        return f"apt install {DEBIAN_PACKAGES.get(client, client)}"
    req = shlex.quote(requirement(extra, client))
    if how == PIPX:
        home = Path(sys.prefix).parent.parent  # PIPX_HOME/venvs/jobgen
        env = "" if home.parent == Path.home() / ".local" or home.parent.parent == Path.home() / ".local" else f"PIPX_HOME={shlex.quote(str(home))} "
        return f"{env}pipx inject jobgen {req}"
    if how == VENV:
        return f"{shlex.quote(os.path.join(sys.prefix, 'bin', 'python'))} -m pip install {req}"
    return f"python3 -m pip install --user {req}"
