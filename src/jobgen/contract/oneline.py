"""How jobgen shows text someone else chose (a file name, a command-line value, a line of
a crontab) inside one of its own lines: on that one line, whatever it holds.

One rule for every command, so a value with a line break cannot start a second line that
reads like jobgen's own in a terminal, a log or the journal, and an escape sequence cannot
reach the terminal. And how such a line reaches stderr (``to_stderr``): a stream that
cannot take it loses the line, never the work it reports. Standard library only, no jobgen
import: the queue verbs, the lock holder and the generator use it.
"""

import os
import sys


def one_line(text: str) -> str:
    """``text`` with each character that is not printable written as a Python escape: a line
    break as ``\\n``, ESC as ``\\x1b``, U+2028 as ``\\u2028``, U+200B as ``\\u200b``; a byte
    that was not UTF-8 (decoded with surrogateescape, as file names are) as ``\\xNN``.
    Printable text, the usual case, comes back as it is."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # os.fsdecode's stand-in for the byte n - 0xDC00
        return f"\\x{n - 0xDC00:02x}"
    return repr(c)[1:-1]


def to_stderr(text: str) -> None:
    """``text`` (its line breaks included) on stderr, flushed, or lost: a stderr closed
    (`2>&-`: sys.stderr is None), on a full disk or whose reader has gone costs the line,
    never the caller's work (a drain's request, an enqueue, the generator's other units)."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):  # ValueError: a stream closed under us
        silence(stream)


def silence(stream) -> None:
    """Send what ``stream`` still buffers, and what is written to it later, to /dev/null: a
    write that failed once fails again when the interpreter exits, which turns a run's exit
    status into 120."""
    try:
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
