"""One structured journal entry, sent the way logger --journald sends it.

journald's native protocol (systemd-journald.service(8), "Native protocol"): one datagram
of KEY=value lines to /run/systemd/journal/socket. A value with a newline would need the
binary form; jobgen's fields are single-line by construction (ids, outcomes, numbers), and
MESSAGE has its newlines replaced. Where there is no journal (a shell without systemd, a
test), the message goes to stderr as one line, so nothing is silently lost.
"""

from __future__ import annotations

import socket

from jobgen.contract.oneline import to_stderr

SOCKET = "/run/systemd/journal/socket"


def send(fields: dict[str, str], socket_path: str = SOCKET, fallback: bool = True) -> bool:
    """Send one entry; True when journald took it. Otherwise False, and with ``fallback``
    the message is written to stderr (a caller that reports on stderr anyway passes False)."""
    lines = []
    for key, value in fields.items():
        text = str(value).replace("\n", " ")
        lines.append(f"{key}={text}")
    data = ("\n".join(lines) + "\n").encode("utf-8", "replace")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(socket_path)
            sock.send(data)
        return True
    except OSError:
        if fallback:
            # A line stderr cannot take is lost, never the work it reports: a drain's request
            # must not fail, nor use up an attempt, for want of its status line.
            to_stderr(f"{fields.get('SYSLOG_IDENTIFIER', 'jobgen')}: {fields.get('MESSAGE', '')}\n")
        return False
