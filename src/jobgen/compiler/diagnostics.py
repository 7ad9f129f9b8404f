"""Positions and problems: every message jobgen prints about a manifest has a place.

Format (the one compilers and editors understand): ``file:line:col: severity: message``.
Lines and columns are 1-based.
"""

from __future__ import annotations

from typing import NamedTuple

ERROR = "error"
WARNING = "warning"
NOTE = "note"


# Named tuples, not dataclasses: immutable, ordered and hashable field by field as
# dataclass(frozen=True, order=True) made them, for a fraction of the cost. Making such a
# dataclass executes ten generated methods at every start (some 1.5 ms each for these
# two), and a Pos is made for every node of every manifest.
class Pos(NamedTuple):
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Diagnostic(NamedTuple):
    pos: Pos
    severity: str
    message: str

    def __str__(self) -> str:
        return f"{self.pos}: {self.severity}: {self.message}"

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.pos.file,
            "line": self.pos.line,
            "col": self.pos.col,
            "severity": self.severity,
            "message": self.message,
        }


class ManifestError(Exception):
    """Raised by a stage that found problems; carries all of them, sorted by place."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = sorted(diagnostics)
        super().__init__("\n".join(map(str, self.diagnostics)))
