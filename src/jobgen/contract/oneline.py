"""How jobgen shows text someone else chose (a file name, a command-line value, a line of
a crontab) inside one of its own lines: on that one line, whatever it holds.

One rule for every command, so a value with a line break cannot start a second line that
reads like jobgen's own in a terminal, a log or the journal, and an escape sequence cannot
reach the terminal. Standard library only, no import: the queue verbs, the lock holder and
the generator use it.
"""


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
