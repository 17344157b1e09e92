"""Masks that come as data rather than as a formula: one or two intervals of keys per query
row, from arrays (row_intervals), read off a dense boolean mask (from_dense) or off a
FlexAttention-style predicate (from_mask_mod), shared by every head or given per head. All bind
the bundled row_intervals programs; the checks of their arrays are shared with
cm.masks.padded."""
from __future__ import annotations

import sys
from typing import Any, Callable, Iterable

import numpy as np

from ._mask import BoundMask
from ._mask_mod import (GPU_BLOCK_ELEMENTS, Indices, check_callable, predicate_rows,
                        rows_per_block, to_numpy)
from ._programs import program


def row_intervals(starts: Any, ends: Any, starts2: Any = None, ends2: Any = None) -> BoundMask:
    """Any mask with one interval of keys per query row, or two, from arrays (FlashMask-style
    bounds, computed by the caller): row q sees keys [starts[q], ends[q]), and with the second
    pair also [starts2[q], ends2[q]); with arrays of shape [batch, nq], row q of batch row b
    sees [starts[b, q], ends[b, q]) (and the second pair's), and with [batch, heads, nq], row q
    of head h of batch row b sees [starts[b, h, q], ends[b, h, q]). An interval whose end is
    not past its start is empty, and keys are clipped to [0, nk). Specialize with nq equal to
    the arrays' last dimension, batch to their first and heads to their second; a batch or
    heads axis of 1 serves every batch row or head (as a dimension of 1 of SDPA's attn_mask
    does). Other shapes raise ValueError."""
    if (starts2 is None) != (ends2 is None):
        raise ValueError("row_intervals: give starts2 and ends2 together, or neither")
    names = ["starts", "ends"] + (["starts2", "ends2"] if starts2 is not None else [])
    bounds = [integer_array("row_intervals", x, name)
              for x, name in zip((starts, ends, starts2, ends2), names)]
    shapes = {x.shape for x in bounds}
    if len(shapes) != 1 or bounds[0].ndim not in (1, 2, 3) or bounds[0].size == 0:
        raise ValueError(f"row_intervals: {', '.join(names)} must have one shape, [nq], "
                         f"[batch, nq] or [batch, heads, nq], got "
                         f"{', '.join(str(x.shape) for x in bounds)}")
    return _row_intervals("row_intervals", bounds)


def from_dense(visible: Any) -> BoundMask:
    """The mask of a dense boolean array, [nq, nk], [batch, nq, nk] or [batch, heads, nq, nk]
    (True: visible), such as an SDPA attn_mask, whose every row sees at most two separate runs
    of keys. It reads the array a few times (O(nq * nk) per batch row and head) and keeps only
    the runs' bounds (row_intervals); specialize with its nq, nk, batch and heads, where an axis
    of 1, or one broadcast by stride 0 (expand), serves every batch row or head. A row that
    sees three or more runs raises ValueError naming it: such masks need a program
    (docs/language.md)."""
    # A torch tensor stays on its device: only the bounds come to the host.
    dense = visible if hasattr(visible, "cpu") else np.asarray(visible)
    if str(dense.dtype) not in ("bool", "torch.bool") or dense.ndim not in (2, 3, 4) or \
            0 in dense.shape:
        raise ValueError(f"from_dense: expected a boolean array [nq, nk], [batch, nq, nk] or "
                         f"[batch, heads, nq, nk] with no empty axis, got dtype {dense.dtype} "
                         f"and shape {tuple(dense.shape)}")
    # A batch or heads axis broadcast by stride 0 (expand, broadcast_to) is read once, as an
    # axis of 1, rather than copied out by the reshape below.
    strides = dense.stride() if hasattr(dense, "cpu") else dense.strides
    dense = dense[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in strides[:-2])]
    nk = dense.shape[-1]
    rows = dense.reshape(-1, nk)
    # Numpy: a few million cells at a time, so that the temporaries stay in cache; torch: the
    # GPU blocks of from_mask_mod, few launches.
    step = rows_per_block(nk, 1 << 22 if isinstance(dense, np.ndarray) else GPU_BLOCK_ELEMENTS)
    blocks = (rows[r:r + step] for r in range(0, rows.shape[0], step))
    axes = ("batch row", "head")[:dense.ndim - 2]
    bounds = _row_bounds("from_dense", blocks, dense.shape[:-1], axes)
    return _row_intervals("from_dense", _without_empty_second(bounds), nk)


def from_mask_mod(mask_mod: Callable[..., Any], nq: int, nk: int | None = None, *,
                  batch: int | None = None, heads: int | None = None,
                  device: Any = None) -> BoundMask:
    """The mask of a FlexAttention-style predicate mask_mod(b, h, q_idx, k_idx) -> bool whose
    every row sees at most two separate runs of keys, read as create_block_mask(mask_mod, B, H,
    nq, nk) reads it: batch=None (B=None) evaluates b = 0 only, for a mask that does not depend
    on b, and batch=B one mask per batch row (specialize with batch=B); heads=None evaluates
    h = 0 only, and heads=H one mask per head (specialize with heads=H; heads that all see
    what head 0 sees share one set of bounds). mask_mod is called as Plan.check_mask_mod calls
    it, a block of rows at a time: b and h 0-d int64, q_idx [rows, 1], k_idx [1, nk], torch
    tensors on `device` (default: the GPU if there is one, as create_block_mask's, else the CPU)
    when torch imports, numpy arrays otherwise. Cost: nq * nk predicate evaluations per (b, h)
    evaluated, as create_block_mask's; only each row's bounds are kept (row_intervals), so
    specialize with this nq and nk. A row that sees three or more runs raises ValueError naming
    it."""
    check_callable("from_mask_mod", mask_mod)
    nq = _count("nq", nq)
    nk = nq if nk is None else _count("nk", nk)
    batches = 1 if batch is None else _count("batch", batch)
    head_count = 1 if heads is None else _count("heads", heads)
    indices = Indices(device)
    if device is None and indices.torch is not None and indices.torch.cuda.is_available():
        indices.device = "cuda"  # create_block_mask's default
    keys = indices.array(np.arange(nk, dtype=np.int64)[None, :])
    step = rows_per_block(nk, GPU_BLOCK_ELEMENTS if indices.on_gpu else None)

    def rows_of(b: int, h: int, q0: int, q1: int) -> Any:
        queries = np.arange(q0, q1, dtype=np.int64)[:, None]
        return predicate_rows("from_mask_mod", mask_mod, indices, b, h, queries, keys, nk)

    # Only the axes asked for: batch=None and heads=None name no batch row or head.
    axes = ("batch row",) * (batch is not None) + ("head",) * (heads is not None)
    shape = (batches,) * (batch is not None) + (head_count,) * (heads is not None) + (nq,)

    blocks = (rows_of(b, h, q0, min(nq, q0 + step))
              for b in range(batches) for h in range(head_count) for q0 in range(0, nq, step))
    bounds = _row_bounds("from_mask_mod", blocks, shape, axes)
    if axes == ("head",):
        bounds = [x[None] for x in bounds]  # [1, heads, nq]: every batch row alike
    return _row_intervals("from_mask_mod", _without_empty_second(bounds), nk)


def _count(name: str, value: Any) -> int:
    """`value` if it is an int >= 1; else ValueError naming from_mask_mod's argument."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"from_mask_mod: {name} must be an int >= 1, got {value!r}")
    return int(value)


def _row_bounds(helper: str, blocks: Iterable[Any], shape: tuple[int, ...],
                axes: tuple[str, ...]) -> list[np.ndarray]:
    """The bounds (starts, ends, starts2, ends2, each of `shape`: the leading axes named by
    `axes`, then the rows) of boolean rows given as blocks ([rows, nk], numpy or torch) that
    together hold the rows of `shape` in order; ValueError naming the first row of three or
    more runs, raised at the block that holds it (the later blocks are never evaluated)."""
    parts, rows_before = [], 0
    for block in blocks:
        runs, bounds = _row_runs(block)
        if bounds is None:
            local = int(np.argmax(to_numpy(runs > 2)))
            at = np.unravel_index(rows_before + local, shape)
            where = " of ".join([f"row {at[-1]}"] + [f"{axis} {i}" for axis, i in
                                                      reversed(list(zip(axes, at)))])
            raise ValueError(f"{helper}: {where} sees {int(runs[local])} separate runs of keys; "
                             f"{helper} takes at most two per row (write a program for more)")
        parts.append(bounds)
        rows_before += len(block)
    xp = np if isinstance(parts[0][0], np.ndarray) else sys.modules["torch"]
    # One copy to the host per array, after the last block.
    return [to_numpy(xp.concatenate([part[i] for part in parts])).reshape(shape)
            for i in range(4)]


def _without_empty_second(bounds: list[np.ndarray]) -> list[np.ndarray]:
    """starts, ends alone when no row has a second interval: the one-interval program."""
    return bounds if (bounds[3] > bounds[2]).any() else bounds[:2]


def _row_runs(rows: Any) -> tuple[Any, list[Any] | None]:
    """For each row of the boolean [rows, nk] array `rows` (numpy, or torch on any device): how
    many runs of True it has, and the bounds of its first and second runs (starts, ends,
    starts2, ends2; a run it lacks as 0, 0), arrays of the same kind on the same device; the
    bounds are None when some row has more than two runs. Read from the row's edges, the keys
    c where a run starts or the one after a run ends: c = 0 if key 0 is True, c = nk if key
    nk - 1 is, and c where key c differs from key c - 1. In ascending order they alternate
    start, end; a row of at most two runs has at most four, so listing them (nonzero) is cheap,
    and the mask is read about four times, with one reduction over each row (a sum)."""
    xp = np if isinstance(rows, np.ndarray) else sys.modules["torch"]
    nk = rows.shape[1]
    lead, trail = rows[:, 0], rows[:, -1]
    inner = rows[:, 1:] != rows[:, :-1]  # True at c - 1 for an edge at key c
    # Edges inside the row (torch sums bools as they are, numpy far faster into int32).
    per_row = inner.sum(-1, dtype=np.int32) if xp is np else inner.sum(-1)
    runs = (per_row + lead + trail) // 2
    if bool((runs > 2).any()):
        return runs, None
    # Flat indices (numpy's nonzero over two axes is 15x slower): row r's inner edges are
    # entries first[r] to first[r] + per_row[r] - 1.
    flat = np.flatnonzero(inner) if xp is np else inner.reshape(-1).nonzero()[:, 0]
    first = per_row.cumsum(0) - per_row
    # The inner edges as keys, and a spare entry that rows without any read harmlessly.
    spare = np.zeros(1, flat.dtype) if xp is np else flat.new_zeros(1)
    col = xp.concatenate([flat % max(nk - 1, 1) + 1, spare])
    # Each row's edges 0 to 3 at once, [rows, 4]: edge j is inner edge j - lead (the leading
    # edge at key 0 first, where the row starts visible), the trailing edge at key nk after the
    # inner ones, or 0 where the row has fewer edges.
    which = (np.arange(4) if xp is np else xp.arange(4, device=rows.device)) - lead[:, None] * 1
    per_row, trail = per_row[:, None], trail[:, None]
    listed = (which >= 0) & (which < per_row)
    edges = xp.where(listed, col[xp.clip(first[:, None] + which, 0, len(col) - 1)], 0)
    edges = edges + ((which == per_row) & trail) * nk
    return runs, [edges[:, j] for j in range(4)]


def _row_intervals(helper: str, bounds: list[np.ndarray], nk: int | None = None) -> BoundMask:
    """A bundled program bound to the bounds (starts, ends, and starts2, ends2 when given; each
    [nq], [batch, nq] or [batch, heads, nq], checked): row_intervals or row_intervals_2 when
    every head has the same bounds, else row_intervals_per_head. An axis of 1 serves every
    batch row or head. At specialize it checks that nq (and nk if given, batch and heads) fit
    the bounds."""
    shape = bounds[0].shape
    per_head = len(shape) == 3 and not all((x == x[:, :1]).all() for x in bounds)
    if len(shape) == 3 and not per_head:
        bounds = [x[:, 0] for x in bounds]  # every head alike: one set of bounds serves all
    if bounds[0].ndim > 1 and bounds[0].shape[0] == 1:
        bounds = [x[0] for x in bounds]  # one batch row serves every batch row

    def check(kwargs: dict[str, Any]) -> None:
        rows = shape[-1]
        if kwargs.get("nq") != rows:
            raise ValueError(f"{helper}: the bounds hold {rows} rows, so nq must be {rows}, "
                             f"got {kwargs.get('nq')}")
        if nk is not None and kwargs.get("nk", rows) != nk:
            raise ValueError(f"{helper}: the mask has {nk} keys, so nk must be {nk}, got "
                             f"{kwargs.get('nk', rows)}")
        if len(shape) > 1 and shape[0] != 1:
            check_batch(helper, "bounds", shape[0], kwargs)
        if len(shape) == 3 and shape[1] != 1 and kwargs.get("heads", 1) != shape[1]:
            raise ValueError(f"{helper}: the bounds hold {shape[1]} heads, so heads must be "
                             f"{shape[1]}, got {kwargs.get('heads', 1)}")

    names = ("starts", "ends", "starts2", "ends2")
    if per_head:  # [batch, heads, nq], or [heads, nq] for every batch row
        second = bounds[2:] or [np.zeros_like(bounds[0])] * 2
        arrays = {n: x.reshape(-1) for n, x in zip(names, bounds[:2] + second)}
        return program("row_intervals_per_head").bind(Nh=shape[1], **arrays).with_check(check)
    name = "row_intervals" if len(bounds) == 2 else "row_intervals_2"
    return program(name).bind(**{n: x.reshape(-1) for n, x in zip(names, bounds)}).with_check(
        check)


def check_batch(helper: str, what: str, batches: int, kwargs: dict[str, Any]) -> None:
    """Raises ValueError unless specialize's batch (default 1) is `batches`."""
    if kwargs.get("batch", 1) != batches:
        raise ValueError(f"{helper}: the {what} hold {batches} batch rows, so batch must be "
                         f"{batches}, got {kwargs.get('batch', 1)}")


def integer_array(helper: str, values: Any, name: str) -> np.ndarray:
    """`values` (a list, numpy array or torch tensor) as an int64 numpy array; raises TypeError
    naming the helper and the argument for other element types."""
    array = to_numpy(values)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{helper}: {name} must be integers, got dtype {array.dtype}")
    return array.astype(np.int64)
