"""Plan: a mask bound to parameters, lengths and tiling, with its descriptor and stats."""
from __future__ import annotations

import copy
import os
from typing import Any, Callable

import numpy as np

from . import _core
from ._check import check_mask_mod
from ._layout import checked_query_positions, checked_token_order


class Plan:
    """The descriptor of one specialized mask, plus its shape and (after `to(device)` or
    `specialize(device=...)`) the device tensors cm.attention reads.

    Attributes: mask_name, nq, nk, batch, heads, tile (tile_m, tile_n), device (None or a
    torch.device), token_order (None, or the int64 permutation from specialize: position i of
    the mask's sequence is token token_order[i] of the tensors given to cm.attention),
    query_positions (None, or the int32 positions from specialize: row i of the plan is the
    mask's query position query_positions[i])."""

    def __init__(self, core: _core.Plan, mask_name: str, token_order: Any = None,
                 query_positions: Any = None):
        self._core = core
        self.mask_name = mask_name
        if token_order is not None and core.nq != core.nk:
            raise ValueError(f"token_order needs nq == nk (one order for q, k and v), got "
                             f"nq={core.nq}, nk={core.nk}")
        self.token_order = (None if token_order is None else
                            checked_token_order(token_order, core.nq))
        self.query_positions = (None if query_positions is None else
                                checked_query_positions(query_positions))
        if self.query_positions is not None and len(self.query_positions) != core.nq:
            raise ValueError(f"query_positions must have one entry per query row ({core.nq}), "
                             f"got {len(self.query_positions)}")
        # A plain flag for cm.attention, which must not read the array (torch.compile would
        # guard on its values).
        self._selects_rows = self.query_positions is not None
        self.nq, self.nk = core.nq, core.nk
        self.batch, self.heads = core.batch, core.heads
        self.tile = (core.tile_m, core.tile_n)
        self.device = None
        # Set by compilemask._torch_plan.attach: the descriptor in host and device memory, and
        # with a token order, it and its inverse as int32 device tensors.
        self._desc_host = None
        self._desc_device = None
        self._order_device = None
        self._inverse_device = None

    # ---- descriptor bytes ------------------------------------------------------------------

    @classmethod
    def from_descriptor(cls, data: Any, mask_name: str = "descriptor",
                        token_order: Any = None, query_positions: Any = None) -> "Plan":
        """The plan of descriptor bytes (bytes, bytearray or a uint8 array: a plan's
        `descriptor`, or a file of `compilemask compile --emit descriptor -o FILE`), on the
        host. The bytes are checked against every rule of docs/descriptor.md first (ValueError
        naming the broken one) and the stats are read back from them (build_seconds 0)."""
        try:
            raw = memoryview(data).tobytes()
        except TypeError:
            raise TypeError(f"Plan.from_descriptor takes bytes or a uint8 array, got "
                            f"{type(data).__name__}") from None
        return cls(_core.Plan.from_descriptor(raw), mask_name, token_order, query_positions)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as the descriptor bytes, so that plans made in DataLoader workers reach the
        # training process; they come back on the host (call .to(device) there).
        return (Plan.from_descriptor, (self.descriptor.tobytes(), self.mask_name,
                                       self.token_order, self.query_positions))

    def __copy__(self) -> "Plan":
        copied = Plan.__new__(Plan)
        copied.__dict__.update(self.__dict__)
        return copied

    # ---- inspection ------------------------------------------------------------------------

    @property
    def descriptor(self) -> np.ndarray:
        """The descriptor bytes (docs/descriptor.md) as a read-only uint8 array."""
        return self._core.descriptor

    def stats(self) -> dict[str, Any]:
        """Tile counts (tiles, full_tiles, partial_tiles, empty_tiles), density, visible_pairs,
        computed_pairs, bytes, instances, patterns, grid_formulas, build_seconds."""
        return self._core.stats()

    def estimated_forward_seconds(self) -> float:
        """The forward's expected time on an H200 at head dim 128, token-order gathers
        included (include/compilemask/estimate.h): for choosing between plans of one
        meaning."""
        return estimated_seconds(self.stats(), self.tile, self.batch, self.heads, self.nq,
                                 self.token_order is not None)

    def to_dense(self, b: int = 0, h: int = 0,
                 rows: tuple[int, int] | None = None) -> np.ndarray:
        """The boolean visibility of mask (b, h) in the mask's token order: [nq, nk], or with
        rows=(start, stop) only those query rows, [stop - start, nk]. At most 2^26 elements at
        a time (decode a large plan a block of rows at a time)."""
        start, stop = (0, -1) if rows is None else rows
        return self._core.dense(b, h, start, stop).view(np.bool_)

    def check_mask_mod(self, mask_mod: Callable[..., Any], *, device: Any = None,
                       examples: int = 5) -> None:
        """Raises compilemask.MaskMismatch unless this plan states the same mask as
        `mask_mod`, a FlexAttention-style predicate mask_mod(b, h, q_idx, k_idx) -> bool, on
        every (q, k) pair of every (b, h) mask the plan holds (one when batch and heads are
        1). mask_mod gets b and h as 0-d int64 tensors, q_idx of shape [rows, 1] and k_idx of
        shape [1, nk], a block of rows at a time: torch tensors on `device` (default: the
        plan's device, else the CPU) when torch imports, numpy arrays otherwise. Indices are
        the tensors' tokens: with a token order, mask position i is token token_order[i], so
        the model's row-major predicate checks a strip plan; with query_positions, plan row i is
        q_idx query_positions[i]. The error names the differing
        pairs' count per (b, h) and the first `examples` of them. Cost: one predicate call
        and one decode per 2^24 pairs."""
        check_mask_mod(self, mask_mod, self.device if device is None else device, examples)

    def tile_map(self, b: int = 0, h: int = 0, width: int = 80) -> str:
        """The ASCII tile map of mask (b, h): █ full, ░ partial, blank empty tiles."""
        return self._core.tile_map(b, h, width)

    def save_png(self, path: str | os.PathLike, b: int = 0, h: int = 0) -> None:
        """Writes a PNG of mask (b, h): the element mask next to the tile classes."""
        self._core.save_png(os.fspath(path), b, h)

    def __str__(self) -> str:
        return self.tile_map()

    def __repr__(self) -> str:
        s = self.stats()
        where = "host" if self.device is None else str(self.device)
        order = "" if self.token_order is None else " token_order"
        if self.query_positions is not None:
            order += " query_positions"
        return (
            f"<compilemask.Plan {self.mask_name} nq={self.nq} nk={self.nk} batch={self.batch} "
            f"heads={self.heads} tile={self.tile[0]}x{self.tile[1]} density={s['density']:.4f} "
            f"bytes={s['bytes']}{order} on {where}>"
        )

    # ---- devices ---------------------------------------------------------------------------

    def to(self, device: Any) -> "Plan":
        """A plan sharing this descriptor, uploaded to a torch CUDA device (needs torch). Do it
        once, outside CUDA graph capture and torch.compile regions."""
        from . import _torch_plan

        moved = copy.copy(self)  # the token order was checked when this plan was made
        _torch_plan.attach(moved, device)
        return moved


def estimated_seconds(counts: dict[str, Any], tile: tuple[int, int], batch: int, heads: int,
                      nq: int, reorders: bool, halves: dict[str, Any] | None = None) -> float:
    """Expected seconds on an H200 (include/compilemask/estimate.h) of the forward of a plan
    whose tile counts are `counts`, and with `halves` (its mask counted at
    _core.backward_halves(tile)) of the backward too; with `reorders`, its token order's
    gathers, one set per pass."""
    masks = batch * heads
    seconds = _core.estimated_forward_seconds(counts, *tile, masks)
    passes = 1
    if halves is not None:
        seconds += _core.estimated_backward_seconds(halves, *_core.backward_halves(*tile), masks)
        passes = 2
    if reorders:
        seconds += passes * _core.estimated_gather_seconds(batch, nq, heads)
    return seconds
