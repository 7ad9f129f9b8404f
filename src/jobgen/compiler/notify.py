"""`mail_on_failure: ADDRESS`: a failed job's status and last journal lines, mailed.

The job's service gets `OnFailure=jobgen-mail@INSTANCE.service`; the template unit
(templates/mail.j2, written once per output when any job uses it) mails through the host's
`sendmail` and logs one line when there is none. The instance is `UNIT:ADDRESS`, escaped by
systemd's unit-name rules (systemd-escape(1), unit_name_escape() in basic/unit-name.c) so
that `%I` in the template gives back exactly `UNIT:ADDRESS` (systemd.unit(5) SPECIFIERS: "%I
Unescaped instance name"). Both parts reach the mail script as one argv word: nothing is
ever spliced into shell text. The address rides in the instance, not a drop-in, because a
drop-in folder is not something every layout can install (debhelper installs unit files).
"""

from __future__ import annotations

import re

# The template unit's name, and its instance's parts' separator (':' is in no address).
MAIL_TEMPLATE = "jobgen-mail@.service"
SEPARATOR = ":"
# systemd's UNIT_NAME_MAX is 256 including the NUL: a longer name is refused.
UNIT_NAME_MAX = 255

# A mailbox jobgen hands to sendmail: local@domain, or a local user (cron's MAILTO=root).
# Deliberately narrower than RFC 5322: no quoting, comments or '%' (a unit specifier), and no
# leading '-' (sendmail would read it as an option).
_LOCAL = r"[A-Za-z0-9_][A-Za-z0-9._+=-]*"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
ADDRESS = re.compile(rf"{_LOCAL}(?:@{_LABEL}(?:\.{_LABEL})*)?")
ADDRESS_MAX = 254  # RFC 5321's path limit
ADDRESS_RULE = "an address such as ops@example.com, or a local user such as root"

# systemd's unit_name_escape(): these stay, '/' becomes '-', the rest (and a leading '.')
# becomes \xNN.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")


def address_problem(value: str) -> str | None:
    """Why `value` is not an address jobgen mails to, or None."""
    if len(value) > ADDRESS_MAX or not ADDRESS.fullmatch(value):
        return f"'{value}' is not {ADDRESS_RULE}"
    return None


def unit_escape(text: str) -> str:
    """systemd-escape(1) without options: the instance part of a unit name."""
    out = []
    for i, byte in enumerate(text.encode()):
        ch = chr(byte)
        if ch == "/":
            out.append("-")
        elif ch in _PLAIN and not (i == 0 and ch == "."):
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def mail_unit(unit: str, address: str) -> str:
    """The instance of the template that mails `unit`'s failure to `address`."""
    return MAIL_TEMPLATE.replace("@", "@" + unit_escape(f"{unit}{SEPARATOR}{address}"), 1)
