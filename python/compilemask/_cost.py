"""The time a plan's forward and backward are expected to take on an H200.

The estimates exist to choose between plans that mean the same attention on the caller's
tensors, such as a row-major plan and a strip plan carrying its token order (PlanChoice); only
how two estimates compare matters. Both are calibrated on the sm90 kernels at head dim 128
(docs/perf-notes.md, sessions 18, 22 and 23):
- the forward computes whole tiles: 1.62 µs of one SM for a full tile, and for a partial one
  1.78 µs (doc_causal's causal diagonals) to 2.2 µs (clear's disks), taken here as 2.0;
- the backward skips the 64-row halves of a tile that see nothing, so its work is counted in
  halves: 2.8 µs for a half of a full tile, 3.8 µs for a half of a partial one (fitted to
  eleven masks and orders of run 150, each within 10%);
- a query tile's fixed cost is left out, as both plans of a choice have the same query tiles;
- a token order adds cm.attention's gathers, each moving its tensor at 0.075 ms per 134 MB
  (session 22): q, k and v in and out back in the forward, the gradient of out in and dq, dk
  and dv back in the backward.
Head dims scale every term alike; GQA's smaller k and v are not counted, which only favours
the plan without a gather.
"""
from __future__ import annotations

from typing import Any

SMS = 132  # H200 streaming multiprocessors: the persistent grids' width
FULL_TILE_SECONDS = 1.62e-6  # forward, one 128 x 128 tile on one SM, no mask code
PARTIAL_TILE_SECONDS = 2.0e-6  # the same, masked from per-row intervals
FULL_HALF_SECONDS = 2.8e-6  # backward, one 64-row half of a full tile
PARTIAL_HALF_SECONDS = 3.8e-6  # backward, one 64-row half of a partial tile that sees a key
GATHER_SECONDS_PER_BYTE = 0.075e-3 / 134e6  # permute_rows, per byte of the tensor gathered
GATHERS_PER_PASS = 4  # forward: q, k, v in, out back; backward: d(out) in, dq, dk, dv back
HEAD_DIM_BYTES = 128 * 2  # head dim 128 in bf16


def estimated_forward_seconds(plan: Any) -> float:
    """Seconds for one forward of `plan` (a Plan) over its batch x heads masks."""
    stats = plan.stats()
    tiles = FULL_TILE_SECONDS * stats["full_tiles"] + PARTIAL_TILE_SECONDS * stats["partial_tiles"]
    scale = plan.tile[0] * plan.tile[1] / (128 * 128)
    return tiles * scale * _masks_per_instance(plan, stats) / SMS + _gathers(plan)


def estimated_backward_seconds(plan: Any, halves: Any) -> float:
    """Seconds for one backward of `plan` (a Plan with tile (128, n)); `halves` is the same mask
    specialized with tile (64, n), whose full and partial tiles are the halves the backward
    computes."""
    stats = halves.stats()
    tiles = FULL_HALF_SECONDS * stats["full_tiles"] + PARTIAL_HALF_SECONDS * stats["partial_tiles"]
    scale = halves.tile[0] * halves.tile[1] / (64 * 128)
    return tiles * scale * _masks_per_instance(halves, stats) / SMS + _gathers(plan)


def _masks_per_instance(plan: Any, stats: dict[str, Any]) -> float:
    # The stats sum over the distinct masks (instances); each stands for an equal share.
    return plan.batch * plan.heads / stats["instances"]


def _gathers(plan: Any) -> float:
    if plan.token_order is None:
        return 0.0
    tensor_bytes = plan.batch * plan.nq * plan.heads * HEAD_DIM_BYTES
    return GATHERS_PER_PASS * tensor_bytes * GATHER_SECONDS_PER_BYTE
