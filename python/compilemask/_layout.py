"""Token orders of grid layouts (pure numpy, importable on its own).

A mask written with `strip_grid` expects its grid tokens in strip order: the columns cut into
strips of `strip` columns, laid out strip by strip, each strip row by row (docs/language.md).
Models usually hold image tokens row-major; `strip_order` gives the permutation between the two.
"""
from __future__ import annotations

import numpy as np


def strip_order(start: int, rows: int, cols: int, strip: int, total: int,
                frames: int = 1) -> np.ndarray:
    """int64 permutation `order` of range(total): position i of the strip-ordered sequence holds
    row-major token order[i]. The grid is frames x rows x cols tokens from token `start`; the
    other tokens keep their places. Reorder by gathering along the sequence axis (torch:
    x.index_select(1, order)); restore a result by gathering with argsort(order), which is
    faster than an indexed assignment (docs/python.md)."""
    for name, value in (("start", start), ("rows", rows), ("cols", cols), ("strip", strip),
                        ("frames", frames)):
        if int(value) != value or value < (0 if name == "start" else 1):
            raise ValueError(f"strip_order: {name} must be an int >= {0 if name == 'start' else 1},"
                             f" got {value!r}")
    size = frames * rows * cols
    if start + size > total:
        raise ValueError(f"strip_order: the grid [{start}, {start + size}) does not fit in "
                         f"{total} tokens")
    row_major = start + np.arange(size, dtype=np.int64).reshape(frames, rows, cols)
    strips = [row_major[:, :, x0:x0 + strip].reshape(frames, -1) for x0 in range(0, cols, strip)]
    order = np.arange(total, dtype=np.int64)
    order[start:start + size] = np.concatenate(strips, axis=1).reshape(-1)
    return order
