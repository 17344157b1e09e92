"""The torch operator compilemask::attention_forward: a torch.library custom op over the sm90
forward kernel, with a fake (meta) implementation for torch.compile and autograd through the
tile-gather backward of _tile_backward.py (no GPU backward kernel exists yet).

All arguments are tensors or plain numbers, and the plan's descriptor travels as tensors, so
a new plan of the same shape is new data to a compiled graph, not a new graph."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from ._tile_backward import tile_backward

try:
    from . import _cuda
except ImportError:  # a build without the CUDA kernels; cm.attention says so before calling
    _cuda = None

_DTYPE_CODES = {torch.bfloat16: 0, torch.float16: 1}


def _bsh_strides(x: Tensor, heads_first: bool, packed: bool) -> tuple[int, int, int]:
    """Element strides {batch, row, head} of a [B, S, H, D], [B, H, S, D] or [T, H, D] tensor."""
    if packed:
        return (0, x.stride(0), x.stride(1))
    if heads_first:
        return (x.stride(0), x.stride(2), x.stride(1))
    return (x.stride(0), x.stride(1), x.stride(2))


def _lse_shape(q: Tensor, heads_first: bool, nq: int) -> tuple[int, ...]:
    if q.dim() == 3:
        return (q.shape[1], q.shape[0])  # [H, T]
    heads = q.shape[1] if heads_first else q.shape[2]
    return (q.shape[0], heads, nq)


@torch.library.custom_op("compilemask::attention_forward", mutates_args=(), device_types="cuda")
def attention_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    desc_host: Tensor,
    desc_device: Tensor,
    tiles: list[Tensor],
    q_offsets: Optional[Tensor],
    k_offsets: Optional[Tensor],
    heads_first: bool,
    nq: int,
    nk: int,
    scale: float,
) -> tuple[Tensor, Tensor]:
    """(out, lse). q/k/v: [B, S, H, D] (heads_first=False), [B, H, S, D] (True) or [T, H, D]
    (one sequence without offsets, else sequence b at rows offsets[b] + [0, n)). `tiles` is
    only read by the backward. Inputs are checked by compilemask._attention."""
    if q.dim() == 3 and q_offsets is None:  # one sequence: batch 1 of [S, H, D]
        out, lse = _launch(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), desc_host,
                           desc_device, None, None, False, nq, nk, scale)
        return out.squeeze(0), lse.squeeze(0)
    return _launch(q, k, v, desc_host, desc_device, q_offsets, k_offsets, heads_first, nq, nk,
                   scale)


def _launch(q, k, v, desc_host, desc_device, q_offsets, k_offsets, heads_first, nq, nk, scale):
    packed = q_offsets is not None
    if packed:
        # Rows outside every sequence are never written by the kernel.
        out = torch.zeros(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.full(_lse_shape(q, heads_first, nq), float("-inf"), device=q.device)
        batch, heads_q, heads_kv = q_offsets.shape[0], q.shape[1], k.shape[1]
        lse_strides = (0, lse.stride(0))
    else:
        out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
        lse = torch.empty(_lse_shape(q, heads_first, nq), dtype=torch.float32, device=q.device)
        batch = q.shape[0]
        heads_q = q.shape[1] if heads_first else q.shape[2]
        heads_kv = k.shape[1] if heads_first else k.shape[2]
        lse_strides = (lse.stride(0), lse.stride(1))
    workspace = torch.empty(_cuda.workspace_bytes(), dtype=torch.uint8, device=q.device)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream(q.device).cuda_stream
        _cuda.forward(
            desc_host.data_ptr(), desc_device.data_ptr(),
            (_DTYPE_CODES[q.dtype], batch, heads_q, heads_kv, nq, nk, q.shape[-1]), scale,
            q.data_ptr(), _bsh_strides(q, heads_first, packed),
            k.data_ptr(), _bsh_strides(k, heads_first, packed),
            v.data_ptr(), _bsh_strides(v, heads_first, packed),
            out.data_ptr(), _bsh_strides(out, heads_first, packed),
            lse.data_ptr(), lse_strides,
            q_offsets.data_ptr() if packed else 0, k_offsets.data_ptr() if packed else 0,
            q.shape[0] if packed else 0, k.shape[0] if packed else 0,
            workspace.data_ptr(), workspace.numel(), stream,
        )
    return out, lse


@attention_forward.register_fake
def _attention_forward_fake(q, k, v, desc_host, desc_device, tiles, q_offsets, k_offsets,
                            heads_first, nq, nk, scale):
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    lse = torch.empty(_lse_shape(q, heads_first, nq), dtype=torch.float32, device=q.device)
    return out, lse


def _setup_context(ctx, inputs, output):
    q, k, v, _, _, tiles, q_offsets, k_offsets, heads_first, nq, nk, scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, q_offsets, k_offsets, *tiles)
    ctx.heads_first, ctx.nq, ctx.nk, ctx.scale = heads_first, nq, nk, scale
    ctx.tile_count = len(tiles)


def _backward(ctx, dout, dlse):
    q, k, v, out, lse, q_offsets, k_offsets, *tiles = ctx.saved_tensors
    dq, dk, dv = tile_backward(q, k, v, out, lse, dout, dlse, tiles, q_offsets, k_offsets,
                               ctx.heads_first, ctx.nq, ctx.nk, ctx.scale)
    # One gradient slot per input, with the list input `tiles` answered by a list.
    return dq, dk, dv, None, None, [None] * ctx.tile_count, None, None, None, None, None, None


torch.library.register_autograd(
    "compilemask::attention_forward", _backward, setup_context=_setup_context
)
