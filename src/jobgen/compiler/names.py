"""Unit names: what systemd accepts, decided here and nowhere else (lock names: the lock
contract, jobgen.contract.locks).

systemd.unit(5): a unit name is at most 255 characters of ``[A-Za-z0-9:_.\\-]`` (plus one
``@`` for templates) followed by the type suffix. jobgen uses the job's name as the
unit name stem, unchanged, so ``systemctl status NAME`` works without a lookup table:
names systemd would need ``systemd-escape`` for are refused with the reason instead of
being mangled into something the operator never wrote.
"""

from __future__ import annotations

import re

UNIT_NAME_MAX = 255  # systemd's UNIT_NAME_MAX, including the suffix
# The longest suffix jobgen appends: "@.service" for worker templates.
_LONGEST_SUFFIX = len("@.service")
JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
# A unit another unit points at (OnFailure=, OnSuccess=). The instance may use the
# specifiers for "this unit" (systemd.unit(5)): alert@%n.service is the common idiom.
UNIT_REF = re.compile(r"[A-Za-z0-9_.:\\-]+(@([A-Za-z0-9_.:\\-]|%[nNpPiI])*)?\.(service|target|socket|timer|path|mount)")
USER_NAME = re.compile(r"[a-z_][a-z0-9_-]*\$?|[0-9]+")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNIT_SUFFIXES = (".service", ".timer", ".target", ".socket", ".path", ".mount")

LOCK_DIR = "/run/lock/jobgen"


def job_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a unit name stem, or None. The caller shows the name."""
    if not name:
        return "a name cannot be empty"
    if not JOB_NAME.fullmatch(name):
        bad = next((c for c in name if not re.fullmatch(r"[A-Za-z0-9_.:-]", c)), name[0])
        shown = "a space" if bad == " " else f"'{bad}'" if bad.isprintable() else f"U+{ord(bad):04X}"
        first = " at the start" if bad == name[0] and re.fullmatch(r"[.:-]", bad) else ""
        return (
            f"not a valid unit name: {shown}{first} is not allowed; use letters, digits and '_.:-', "
            "starting with a letter, digit or '_' (systemd.unit(5))"
        )
    if name.endswith(_UNIT_SUFFIXES):
        stem, _, suffix = name.rpartition(".")
        return f"ends with the unit type '.{suffix}'; jobgen adds the suffix itself, so name it '{stem}'"
    limit = UNIT_NAME_MAX - _LONGEST_SUFFIX
    if len(name) > limit:
        return f"the name has {len(name)} characters; a unit name stem may have at most {limit} (systemd.unit(5))"
    return None


def lock_file(name: str) -> str:
    return f"{LOCK_DIR}/{name}.lock"
