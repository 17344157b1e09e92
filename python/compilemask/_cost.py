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


def forward_seconds(counts: dict[str, Any], tile: tuple[int, int], masks: int) -> float:
    """Seconds for the forward's tiles: `counts` as Plan.stats() or Mask.count_tiles give them,
    at tile = (tile_m, tile_n), over `masks` = batch x heads masks."""
    tiles = FULL_TILE_SECONDS * counts["full_tiles"] + PARTIAL_TILE_SECONDS * counts["partial_tiles"]
    scale = tile[0] * tile[1] / (128 * 128)
    return tiles * scale * masks / counts["instances"] / SMS


def backward_seconds(halves: dict[str, Any], tile: tuple[int, int], masks: int) -> float:
    """Seconds for the backward's work: `halves` are the tile counts of the mask at tile =
    halves_tile(the plan's tile), whose full and partial tiles are the halves the backward
    computes."""
    tiles = FULL_HALF_SECONDS * halves["full_tiles"] + PARTIAL_HALF_SECONDS * halves["partial_tiles"]
    scale = tile[0] * tile[1] / (64 * 128)
    return tiles * scale * masks / halves["instances"] / SMS


def gather_seconds(batch: int, nq: int, heads: int) -> float:
    """Seconds for one pass's gathers into a token order and back (GATHERS_PER_PASS)."""
    return GATHERS_PER_PASS * batch * nq * heads * HEAD_DIM_BYTES * GATHER_SECONDS_PER_BYTE


def halves_tile(tile: tuple[int, int]) -> tuple[int, int]:
    """The tile whose counts are the backward's halves of `tile`'s tiles."""
    return max(16, tile[0] // 32 * 16), tile[1]


def estimated_forward_seconds(plan: Any) -> float:
    """Seconds for one forward of `plan` (a Plan) over its batch x heads masks, its token
    order's gathers included."""
    seconds = forward_seconds(plan.stats(), plan.tile, plan.batch * plan.heads)
    if plan.token_order is not None:
        seconds += gather_seconds(plan.batch, plan.nq, plan.heads)
    return seconds
