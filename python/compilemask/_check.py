"""Checking a plan against a FlexAttention-style mask_mod: the same mask stated as a predicate
on (b, h, q_idx, k_idx), evaluated a block of rows at a time (_mask_mod), compared pair by pair
with the plan's descriptor decoded to the same rows."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ._errors import MaskMismatch
from ._mask_mod import Indices, check_callable, predicate_rows, rows_per_block, to_numpy


def check_mask_mod(plan: Any, mask_mod: Callable[..., Any], device: Any,
                   examples: int) -> None:
    """Plan.check_mask_mod (see there)."""
    check_callable("check_mask_mod", mask_mod)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise ValueError(f"check_mask_mod: examples must be an int >= 0, got {examples!r}")
    indices = Indices(device)
    order = (np.arange(max(plan.nq, plan.nk), dtype=np.int64) if plan.token_order is None
             else plan.token_order)
    rows = order if plan.query_positions is None else plan.query_positions.astype(np.int64)
    keys = indices.array(order[None, :plan.nk])
    step = rows_per_block(plan.nk)
    counts: dict[tuple[int, int], int] = {}
    found: list[tuple[int, int, int, int, bool]] = []
    for b in range(plan.batch):
        for h in range(plan.heads):
            for q0 in range(0, plan.nq, step):
                q1 = min(plan.nq, q0 + step)
                queries = rows[q0:q1, None]
                wanted = to_numpy(predicate_rows("check_mask_mod", mask_mod, indices, b, h,
                                                 queries, keys, plan.nk))
                differ = wanted != plan.to_dense(b, h, rows=(q0, q1))
                if not differ.any():  # the common case; argwhere would scan 20x longer
                    continue
                at = np.flatnonzero(differ)
                counts[(b, h)] = counts.get((b, h), 0) + len(at)
                for i, k in zip(*np.divmod(at[:max(0, examples - len(found))], plan.nk)):
                    found.append((b, h, int(queries[i, 0]), int(order[k]), bool(wanted[i, k])))
    if counts:
        raise MaskMismatch(_mismatch_message(plan, counts, found), counts, found)


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
