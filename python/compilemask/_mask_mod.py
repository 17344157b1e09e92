"""Evaluating a FlexAttention-style mask_mod(b, h, q_idx, k_idx) -> bool a block of query rows
at a time, on index arrays of the kind the predicate expects: shared by Plan.check_mask_mod,
which compares it with a plan, and cm.masks.from_mask_mod, which reads a plan off it."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

BLOCK_ELEMENTS = 1 << 24  # pairs per block of rows: 16 MB of booleans
GPU_BLOCK_ELEMENTS = 1 << 27  # on a GPU: 128 MB, so that few launches read a long mask


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class Indices:
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

    @property
    def on_gpu(self) -> bool:
        return (self.torch is not None and self.device is not None
                and self.torch.device(self.device).type == "cuda")


def rows_per_block(nk: int, elements: int | None = None) -> int:
    """Query rows per call of mask_mod, so that a block holds about `elements` pairs (default
    BLOCK_ELEMENTS)."""
    return max(1, (BLOCK_ELEMENTS if elements is None else elements) // max(nk, 1))


def check_callable(helper: str, mask_mod: Any) -> None:
    if not callable(mask_mod):
        raise TypeError(f"{helper}: mask_mod must be callable as mask_mod(b, h, q_idx, k_idx), "
                        f"got {type(mask_mod).__name__}")


def predicate_rows(helper: str, mask_mod: Callable[..., Any], indices: Indices, b: int, h: int,
                   queries: np.ndarray, keys: Any, nk: int) -> Any:
    """mask_mod on rows `queries` ([rows, 1]) x `keys` ([1, nk]) as a [rows, nk] boolean array
    where mask_mod made it: a torch tensor on its device, or a numpy array."""
    result = mask_mod(indices.scalar(b), indices.scalar(h), indices.array(queries), keys)
    tensor = hasattr(result, "detach")
    result = result.detach() if tensor else np.asarray(result)
    if str(result.dtype) not in ("bool", "torch.bool"):
        raise TypeError(f"{helper}: mask_mod must return booleans (as FlexAttention's do), got "
                        f"dtype {result.dtype}")
    try:
        return (indices.torch if tensor else np).broadcast_to(result, (len(queries), nk))
    except (ValueError, RuntimeError):
        raise ValueError(f"{helper}: mask_mod(b, h, q_idx, k_idx) with q_idx of shape "
                         f"({len(queries)}, 1) and k_idx of shape (1, {nk}) must broadcast to "
                         f"({len(queries)}, {nk}), got shape {tuple(result.shape)}") from None


def to_numpy(array: Any) -> np.ndarray:
    """A numpy copy of a torch tensor (any device), or the numpy array itself."""
    return array.cpu().numpy() if hasattr(array, "cpu") else np.asarray(array)
