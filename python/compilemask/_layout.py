"""Token orders.

A mask written with `strip_grid` expects its grid tokens in strip order: the columns cut into
strips of `strip` columns, laid out strip by strip, each strip row by row (docs/language.md).
Models usually hold image tokens row-major; `strip_order` gives the permutation between the two
(cm::strip_order, include/compilemask/token_order.h, which places tokens as the compiler and
the kernels do). A plan specialized with that permutation as its `token_order` takes the
model's order and reorders inside cm.attention (`checked_token_order` checks one).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _core


def strip_order(start: int, rows: int, cols: int, strip: int, total: int,
                frames: int = 1) -> np.ndarray:
    """int64 permutation `order` of range(total): position i of the strip-ordered sequence holds
    row-major token order[i]. The grid is frames x rows x cols tokens from token `start`; the
    other tokens keep their places. Give it to specialize(token_order=...) and cm.attention
    reorders q, k, v and its results itself; or gather along the sequence axis yourself
    (x.index_select(1, order)) and restore a result by gathering with argsort(order)
    (docs/python.md). Raises ValueError naming the rule for a grid that does not fit."""
    return _core.strip_order(start, frames, rows, cols, strip, total)


def checked_token_order(order: Any, n: int) -> np.ndarray:
    """`order` as a read-only int64 array, after checking that it is a permutation of range(n);
    raises TypeError or ValueError naming the rule otherwise."""
    array = np.asarray(order.cpu() if hasattr(order, "cpu") else order)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"token_order must be an array of integers, got dtype {array.dtype}")
    if array.shape != (n,):
        raise ValueError(f"token_order must have shape ({n},) (one entry per token), got "
                         f"{array.shape}")
    seen = np.zeros(n, dtype=np.bool_)
    inside = (array >= 0) & (array < n)
    if not inside.all():
        at = int(np.argmin(inside))
        raise ValueError(f"token_order[{at}] = {int(array[at])} is outside [0, {n})")
    seen[array] = True
    if not seen.all():
        raise ValueError(f"token_order is not a permutation of range({n}): token "
                         f"{int(np.argmin(seen))} is missing")
    checked = array.astype(np.int64)
    checked.setflags(write=False)
    return checked
