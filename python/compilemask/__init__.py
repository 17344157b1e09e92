"""CompileMask: attention masks written in a small region language, compiled to tile
descriptors that a Hopper attention kernel reads.

    import compilemask as cm
    mask = cm.compile("mask causal() { q in all: k in [0, diag] }")
    plan = mask.specialize(nq=4096, device="cuda")
    out = cm.attention(q, k, v, plan)          # torch CUDA tensors, [B, S, H, D]

The core (compile, specialize, plans, the CPU reference) needs only numpy; `attention` needs
torch and a build with the CUDA kernels.
"""
from __future__ import annotations

from typing import Any

from . import masks
from ._block_mask import BlockGrid
from ._choice import PlanChoice
from ._errors import Diagnostic, MaskError, MaskMismatch
from ._layout import context_parallel_positions, strip_order
from ._mask import BoundMask, Mask, compile
from ._params import Segments, segments
from ._plan import Plan
from ._reference import ReferenceResult, reference_attention

__all__ = [
    "BlockGrid",
    "BoundMask",
    "Diagnostic",
    "Mask",
    "MaskError",
    "MaskMismatch",
    "Plan",
    "PlanChoice",
    "ReferenceResult",
    "Segments",
    "attention",
    "compile",
    "context_parallel_positions",
    "cuda_available",
    "masks",
    "reference_attention",
    "segments",
    "strip_order",
]


def cuda_available() -> bool:
    """Whether this build has the GPU kernels (compilemask._cuda)."""
    try:
        from . import _cuda  # noqa: F401
    except ImportError:
        return False
    return True


try:
    from ._attention import attention
except ModuleNotFoundError as error:
    if error.name != "torch":
        raise

    def attention(*args: Any, **kwargs: Any) -> Any:
        """Masked attention on torch CUDA tensors (unavailable: torch is not installed)."""
        raise ModuleNotFoundError("compilemask.attention needs torch, which is not installed")
