"""Masks on uniform blocks (Mask.block_grid) and as FlexAttention BlockMasks (Mask.block_mask):
what create_block_mask builds by calling mask_mod on every (q, k) pair, found from the rows'
intervals instead."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from . import _core


@dataclass(frozen=True)
class BlockGrid:
    """A mask on a grid of block = (block_q, block_k) blocks: block (i, j) holds query rows
    [i block_q, +block_q) and keys [j block_k, +block_k). Pairs past (nq, nk) count as hidden,
    so a block that the edge cuts is never full (as create_block_mask pads).

    instance_of [batch, heads]: each (b, h)'s mask among the distinct ones. codes [masks,
    q_blocks, k_blocks] int32: EMPTY (0), FULL (1), or the partial block's bitmap (>= 2).
    bits [bitmaps, block_q, ceil(block_k / 32)] uint32: bit x % 32 of word x / 32 of row y is
    pair (y, x) of the block. Bitmap EMPTY has no bit set and bitmap FULL all of them, so bits
    answer for every code."""

    nq: int
    nk: int
    block: tuple[int, int]
    instance_of: np.ndarray
    codes: np.ndarray
    bits: np.ndarray

    EMPTY = 0
    FULL = 1

    def to_dense(self, b: int = 0, h: int = 0) -> np.ndarray:
        """Mask (b, h) as an [nq, nk] bool array, read from the codes and bits (at most 2^26
        cells)."""
        if self.nq * self.nk > _core.MAX_DENSE_ELEMENTS:
            raise ValueError(f"to_dense: {self.nq} x {self.nk} is above 2^26 cells")
        block_q, block_k = self.block
        words = self.bits[self.codes[self.instance_of[b, h]]]  # [q_blocks, k_blocks, bq, words]
        bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")[..., :block_k]
        dense = bits.transpose(0, 2, 1, 3).reshape(words.shape[0] * block_q, -1)
        return dense[: self.nq, : self.nk].astype(bool)

    def block_mask(self, device: Any = None) -> Any:
        """This grid as a FlexAttention BlockMask on `device` (default: the GPU if there is one,
        else the CPU): the partial and full blocks of each query block, in create_block_mask's
        order, and a mask_mod that reads the bits, so Flex masks the partial blocks exactly."""
        torch, block_mask_type = _flex()
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        instance_of = self.instance_of
        # Batch or head dimensions the masks do not depend on broadcast, as in Flex.
        if (instance_of == instance_of[:1]).all():
            instance_of = instance_of[:1]
        if (instance_of == instance_of[:, :1]).all():
            instance_of = instance_of[:, :1]
        codes = torch.from_numpy(self.codes[instance_of]).to(device)  # [B, H, q_blocks, k_blocks]
        bits = torch.from_numpy(self.bits.view(np.int32)).to(device)
        partial_count, partial = _ordered(torch, codes >= 2)
        full_count, full = _ordered(torch, codes == self.FULL)
        return block_mask_type.from_kv_blocks(
            partial_count, partial, full_count, full, BLOCK_SIZE=self.block,
            mask_mod=_bits_mask_mod(codes, bits, self.block), seq_lengths=(self.nq, self.nk))


def _flex() -> tuple[Any, Any]:
    """torch and FlexAttention's BlockMask, or ImportError saying what block_mask needs."""
    try:
        import torch
        from torch.nn.attention.flex_attention import BlockMask
    except ImportError as e:
        raise ImportError(f"block_mask needs PyTorch with FlexAttention (torch >= 2.5): {e}") from e
    return torch, BlockMask


def _ordered(torch: Any, selected: Any) -> tuple[Any, Any]:
    """Per query block, the number of selected key blocks and all key block indices with the
    selected ones first, each group ascending: BlockMask's (num_blocks, indices) form."""
    selected = selected.to(torch.int32)
    indices = torch.argsort(selected, dim=-1, descending=True, stable=True)
    return selected.sum(dim=-1, dtype=torch.int32), indices.to(torch.int32)


def _bits_mask_mod(codes: Any, bits: Any, block: tuple[int, int]) -> Callable[..., Any]:
    """A mask_mod that reads pair (q, k) from its block's bitmap: exact on every pair of the
    grid, so Flex may call it anywhere; codes [B, H, q_blocks, k_blocks] with B, H 1 where
    they broadcast."""
    block_q, block_k = block
    one_batch, one_head = codes.shape[0] == 1, codes.shape[1] == 1

    def mask_mod(b: Any, h: Any, q_idx: Any, kv_idx: Any) -> Any:
        code = codes[0 if one_batch else b, 0 if one_head else h, q_idx // block_q,
                     kv_idx // block_k]
        column = kv_idx % block_k
        word = bits[code, q_idx % block_q, column // 32]
        return ((word >> (column % 32)) & 1) == 1

    return mask_mod
