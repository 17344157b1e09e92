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


class MaskMismatch(AssertionError):
    """A plan and a predicate stating the same mask disagree (Plan.check_mask_mod). `counts`
    maps each (b, h) that differs to its number of differing pairs; `examples` lists the first
    differing pairs as (b, h, q, k, predicate_visible) in the tensors' token indices."""

    def __init__(self, message: str, counts: dict[tuple[int, int], int],
                 examples: list[tuple[int, int, int, int, bool]]):
        super().__init__(message)
        self.counts = counts
        self.examples = examples
