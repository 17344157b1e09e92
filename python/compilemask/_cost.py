"""The forward time a plan is expected to take on an H200.

The estimate exists to choose between plans that mean the same attention on the caller's
tensors, such as a row-major plan and a strip plan carrying its token order (PlanChoice); only
how two estimates compare matters. It is calibrated on the sm90 forward at head dim 128
(docs/perf-notes.md): a full tile takes 1.62 µs of one SM, a partial tile 1.78 µs (doc_causal's
causal diagonals) to 2.2 µs (clear's disks), taken here as 2.0; a query tile's fixed cost is
left out, as both plans of a choice have the same query tiles. A token order adds the gathers
cm.attention makes (q, k and v in, out back), each moving its tensor at 0.075 ms per 134 MB
(session 22). Head dims scale both terms alike; GQA's smaller k and v are not counted, which
only favours the plan without a gather.
"""
from __future__ import annotations

from typing import Any

SMS = 132  # H200 streaming multiprocessors: the persistent grid's width
FULL_TILE_SECONDS = 1.62e-6  # one 128 x 128 tile on one SM, no mask code
PARTIAL_TILE_SECONDS = 2.0e-6  # the same, masked from per-row intervals
GATHER_SECONDS_PER_BYTE = 0.075e-3 / 134e6  # permute_rows, per byte of the tensor gathered
GATHERED_TENSORS = 4  # q, k and v into the token order, out back
HEAD_DIM_BYTES = 128 * 2  # head dim 128 in bf16


def estimated_forward_seconds(plan: Any) -> float:
    """Seconds for one forward of `plan` (a Plan) over its batch x heads masks: its stats sum
    the tiles over its distinct masks (instances), each standing for an equal share."""
    stats = plan.stats()
    tile_scale = plan.tile[0] * plan.tile[1] / (128 * 128)
    masks_per_instance = plan.batch * plan.heads / stats["instances"]
    tiles = (FULL_TILE_SECONDS * stats["full_tiles"] +
             PARTIAL_TILE_SECONDS * stats["partial_tiles"]) * tile_scale * masks_per_instance
    gathers = 0.0
    if plan.token_order is not None:
        tensor_bytes = plan.batch * plan.nq * plan.heads * HEAD_DIM_BYTES
        gathers = GATHERED_TENSORS * tensor_bytes * GATHER_SECONDS_PER_BYTE
    return tiles / SMS + gathers
