"""Errors raised by compilemask."""
from __future__ import annotations

from typing import NamedTuple


class Diagnostic(NamedTuple):
    """One problem found in a mask program (1-based line and column)."""

    file: str
    line: int
    column: int
    message: str
    source_line: str
    text: str  # "file:line:col: error: message", the source line and a caret under the column


class MaskError(ValueError):
    """A mask program did not compile. `diagnostics` lists every problem found; str(error)
    shows each with its line, column and a caret under the offending text."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("".join(d.text for d in diagnostics).rstrip("\n"))

    @property
    def line(self) -> int:
        return self.diagnostics[0].line

    @property
    def column(self) -> int:
        return self.diagnostics[0].column
