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
from ._params import int_array, integer


def strip_order(start: int, rows: int, cols: int, strip: int, total: int,
                frames: int = 1) -> np.ndarray:
    """int64 permutation `order` of range(total): position i of the strip-ordered sequence holds
    row-major token order[i]. The grid is frames x rows x cols tokens from token `start`; the
    other tokens keep their places. Give it to specialize(token_order=...) and cm.attention
    reorders q, k, v and its results itself; or gather along the sequence axis yourself
    (x.index_select(1, order)) and restore a result by gathering with argsort(order)
    (docs/python.md). Raises ValueError naming the rule for a grid that does not fit."""
    return _core.strip_order(start, frames, rows, cols, strip, total)


def context_parallel_positions(n: int, world_size: int, rank: int,
                               balanced: bool = True) -> np.ndarray:
    """The int32 query positions of `rank`'s shard of an n-token sequence split over
    world_size ranks, for specialize(query_positions=...): with `balanced`, chunks rank and
    2 * world_size - 1 - rank of 2 * world_size equal chunks (the head-tail order that evens
    out causal masks, as torch's context parallelism shards them; n a multiple of
    2 * world_size), else the rank-th of world_size contiguous chunks (n a multiple of
    world_size). Raises ValueError naming the rule otherwise."""
    n, world_size, rank = (integer(value, f"context_parallel_positions: {name}") for name, value
                           in (("n", n), ("world_size", world_size), ("rank", rank)))
    return _core.context_parallel_positions(n, world_size, rank, bool(balanced))


def checked_query_positions(positions: Any) -> np.ndarray:
    """`positions` as a read-only int32 array of one axis, non-empty; specialize's core checks
    that they are strictly increasing and inside [0, nq). Raises TypeError or ValueError."""
    array = int_array(positions, "query_positions")
    if array.size == 0:
        raise ValueError("query_positions must not be empty")
    outside = (array < -2**31) | (array >= 2**31)
    if outside.any():
        at = int(np.argmax(outside))
        raise ValueError(f"query_positions[{at}] = {int(array[at])} is outside [0, nq) (and the "
                         f"int32 range)")
    checked = array.astype(np.int32)
    checked.setflags(write=False)
    return checked


def checked_token_order(order: Any, n: int) -> np.ndarray:
    """`order` as a read-only int64 array, after checking that it is a permutation of range(n);
    raises TypeError or ValueError naming the rule otherwise."""
    array = int_array(order, "token_order")
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
    checked = array.copy()  # int_array may hand back the caller's own array
    checked.setflags(write=False)
    return checked
