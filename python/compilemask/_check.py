"""Checking a plan against a FlexAttention-style mask_mod: the same mask stated as a predicate
on (b, h, q_idx, k_idx), evaluated a block of rows at a time, compared pair by pair with the
plan's descriptor decoded to the same rows."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._errors import MaskMismatch

_BLOCK_ELEMENTS = 1 << 24  # pairs per block of rows: 16 MB of booleans per side


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Indices:
    """Index arrays handed to mask_mod: torch tensors on `device` when torch imports, numpy
    arrays otherwise."""

    def __init__(self, device: Any):
        self.torch = _import_torch()
        self.device = device

    def array(self, values: np.ndarray) -> Any:
        if self.torch is None:
            return values
        tensor = self.torch.from_numpy(np.array(values))  # a writable copy: orders are read-only
        return tensor if self.device is None else tensor.to(self.device)

    def scalar(self, value: int) -> Any:
        return self.array(np.asarray(value, dtype=np.int64))

    @staticmethod
    def to_numpy(result: Any) -> np.ndarray:
        if hasattr(result, "detach"):
            result = result.detach().cpu().numpy()
        return np.asarray(result)


def check_mask_mod(plan: Any, mask_mod: Callable[..., Any], device: Any,
                   examples: int) -> None:
    """Plan.check_mask_mod (see there)."""
    if not callable(mask_mod):
        raise TypeError(f"check_mask_mod: mask_mod must be callable as mask_mod(b, h, q_idx, "
                        f"k_idx), got {type(mask_mod).__name__}")
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise ValueError(f"check_mask_mod: examples must be an int >= 0, got {examples!r}")
    indices = _Indices(device)
    order = (np.arange(max(plan.nq, plan.nk), dtype=np.int64) if plan.token_order is None
             else plan.token_order)
    keys = indices.array(order[None, :plan.nk])
    rows_per_block = max(1, _BLOCK_ELEMENTS // max(plan.nk, 1))
    counts: dict[tuple[int, int], int] = {}
    found: list[tuple[int, int, int, int, bool]] = []
    for b in range(plan.batch):
        for h in range(plan.heads):
            for q0 in range(0, plan.nq, rows_per_block):
                q1 = min(plan.nq, q0 + rows_per_block)
                queries = order[q0:q1, None]
                wanted = _predicate_block(mask_mod, indices, b, h, queries, keys, plan.nk)
                differ = np.argwhere(wanted != plan.to_dense(b, h, rows=(q0, q1)))
                if len(differ) == 0:
                    continue
                counts[(b, h)] = counts.get((b, h), 0) + len(differ)
                for i, k in differ[:max(0, examples - len(found))]:
                    found.append((b, h, int(queries[i, 0]), int(order[k]), bool(wanted[i, k])))
    if counts:
        raise MaskMismatch(_mismatch_message(plan, counts, found), counts, found)


def _predicate_block(mask_mod: Callable[..., Any], indices: _Indices, b: int, h: int,
                     queries: np.ndarray, keys: Any, nk: int) -> np.ndarray:
    """mask_mod on rows `queries` x all keys, as a [rows, nk] bool array."""
    result = indices.to_numpy(mask_mod(indices.scalar(b), indices.scalar(h),
                                       indices.array(queries), keys))
    if result.dtype != np.bool_:
        raise TypeError(f"check_mask_mod: mask_mod must return booleans (as FlexAttention's do), "
                        f"got dtype {result.dtype}")
    try:
        return np.broadcast_to(result, (len(queries), nk))
    except ValueError:
        raise ValueError(f"check_mask_mod: mask_mod(b, h, q_idx, k_idx) with q_idx of shape "
                         f"({len(queries)}, 1) and k_idx of shape (1, {nk}) must broadcast "
                         f"to ({len(queries)}, {nk}), got shape {result.shape}") from None


def _mismatch_message(plan: Any, counts: dict[tuple[int, int], int],
                      found: list[tuple[int, int, int, int, bool]]) -> str:
    total = sum(counts.values())
    where = ", ".join(f"(b={b}, h={h}): {n}" for (b, h), n in list(counts.items())[:8])
    if len(counts) > 8:
        where += f", ... ({len(counts)} masks in all)"
    lines = [f"plan '{plan.mask_name}' (nq={plan.nq}, nk={plan.nk}) and mask_mod disagree on "
             f"{total} (q, k) pairs; per mask {where}"]
    for b, h, q, k, visible in found:
        says = ("visible to mask_mod, hidden by the plan" if visible
                else "hidden by mask_mod, visible to the plan")
        lines.append(f"  b={b} h={h} q={q} k={k}: {says}")
    return "\n".join(lines)
