"""The torch operators over the sm90 kernels: compilemask::attention_forward (out, lse) and
compilemask::attention_backward (dq, dk, dv, dsinks), torch.library custom ops with fake (meta)
implementations joined by autograd, so that torch.compile traces the forward and the backward
without a graph break; and compilemask::permute_rows, the gather into a plan's token order,
whose gradient is the gather back. Plain eager calls reach the attention operators'
implementations without the dispatcher (differentiable_attention).

All arguments are tensors or plain numbers, and the plan's descriptor travels as tensors, so
a new plan of the same shape is new data to a compiled graph, not a new graph. Nothing here
syncs with the host, and memory (outputs, kernel workspaces) comes from torch's caching
allocator, so calls can be captured in a CUDA graph."""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

try:
    from . import _cuda
except ImportError:  # a build without the CUDA kernels; cm.attention says so before calling
    _cuda = None

_DTYPE_CODES = {torch.bfloat16: 0, torch.float16: 1}
_ALIGN = 8  # elements of 16 bytes: the kernels' stride and address granularity


def _bsh_strides(x: Tensor, heads_first: bool, packed: bool) -> tuple[int, int, int]:
    """Element strides {batch, row, head} of a [B, S, H, D], [B, H, S, D] or [T, H, D] tensor
    (of a paged K or V pool, {page, row, head})."""
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


def _lse_strides(lse: Tensor, packed: bool) -> tuple[int, int]:
    """Element strides {batch, head} of an LSE tensor made by attention_forward."""
    return (0, lse.stride(0)) if packed else (lse.stride(0), lse.stride(1))


def _dims(q: Tensor, k: Tensor, v: Tensor, q_offsets: Optional[Tensor], heads_first: bool,
          nq: int, nk: int) -> tuple[int, ...]:
    """The kernels' (dtype code, batch, heads_q, heads_kv, nq, nk, head_dim, head_dim_v). nq and
    nk are the plan's (a paged k has page_size rows), the batch q's."""
    if q_offsets is not None:
        batch, heads_q, heads_kv = q_offsets.shape[0], q.shape[1], k.shape[1]
    else:
        head_dim = 1 if heads_first else 2
        batch, heads_q, heads_kv = q.shape[0], q.shape[head_dim], k.shape[head_dim]
    return (_DTYPE_CODES[q.dtype], batch, heads_q, heads_kv, nq, nk, q.shape[-1], v.shape[-1])


def _out_shape(q: Tensor, v: Tensor) -> tuple[int, ...]:
    """The shape of out (and dout): q's, with v's columns."""
    return (*q.shape[:-1], v.shape[-1])


def _packing(q: Tensor, k: Tensor, q_offsets: Optional[Tensor],
             k_offsets: Optional[Tensor]) -> tuple[int, int, int, int]:
    """(q_offsets, k_offsets, total_q, total_k) as the kernels take them; zeros when strided."""
    if q_offsets is None:
        return (0, 0, 0, 0)
    return (q_offsets.data_ptr(), k_offsets.data_ptr(), q.shape[0], k.shape[0])


def _paging(k: Tensor, page_table: Optional[Tensor],
            heads_first: bool) -> tuple[int, int, int, int]:
    """(page_table, page_table_stride, page_size, num_pages) as the kernels take them, for k a
    pool [num_pages, page_size, H, D] ([num_pages, H, page_size, D] when heads_first); zeros
    when K and V are not paged."""
    if page_table is None:
        return (0, 0, 0, 0)
    page_size = k.shape[2] if heads_first else k.shape[1]
    return (page_table.data_ptr(), page_table.stride(0), page_size, k.shape[0])


def _current_stream(device: torch.device) -> int:
    # The raw handle, as torch.compile's generated code reads it: torch.cuda.current_stream
    # would build a Stream object on each call.
    return torch._C._cuda_getCurrentRawStream(device.index)


def _kernel_layout(x: Tensor) -> Tensor:
    """x, or a contiguous copy when its strides or address do not suit the kernels' loads: an
    incoming gradient may be expanded or transposed, and a view may start at an odd address
    (cm.attention checks strides, but an address check would break torch.compile's trace)."""
    suits = (x.stride(-1) == 1 and all(s > 0 and s % _ALIGN == 0 for s in x.stride()[:-1])
             and x.data_ptr() % (2 * _ALIGN) == 0)
    return x if suits else x.clone(memory_format=torch.contiguous_format)


def _attention_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    desc_host: Tensor,
    desc_device: Tensor,
    q_offsets: Optional[Tensor],
    k_offsets: Optional[Tensor],
    heads_first: bool,
    nq: int,
    nk: int,
    scale: float,
    softcap: float,
    sinks: Optional[Tensor],
    alibi_slopes: Optional[Tensor],
    num_splits: int,
    page_table: Optional[Tensor],
    lse_grad: bool,
    deterministic: bool,
) -> tuple[Tensor, Tensor]:
    """(out, lse). q/k/v: [B, S, H, D] (heads_first=False), [B, H, S, D] (True) or [T, H, D]
    (one sequence without offsets, else sequence b at rows offsets[b] + [0, n)). softcap: 0
    for no logit cap. sinks: None, or float32 [heads_q], the attention sinks' logits
    (cm::cuda::Problem::sinks). alibi_slopes: None, or float32 [heads_q], the ALiBi slopes
    (cm::cuda::Problem::alibi_slopes). num_splits: key parts (0 automatic, cm::cuda::ForwardArgs).
    page_table: None, or int32 [B, pages per sequence] with k and v pools [num_pages,
    page_size, H, D] ([num_pages, H, page_size, D] when heads_first; 4-D q only): key row j of
    sequence b is row j % page_size of page page_table[b, j // page_size] (cm::cuda::PagedKV).
    lse_grad (the caller sees the LSE, so the backward carries its gradient) and deterministic
    are read only by the backward. Inputs are checked by compilemask._attention."""
    q, k, v = (_kernel_layout(x) for x in (q, k, v))
    if q.dim() == 3 and q_offsets is None:  # one sequence: batch 1 of [S, H, D]
        out, lse = _launch_forward(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), desc_host,
                                   desc_device, None, None, False, nq, nk, scale, softcap, sinks,
                                   alibi_slopes, num_splits, None)
        return out.squeeze(0), lse.squeeze(0)
    return _launch_forward(q, k, v, desc_host, desc_device, q_offsets, k_offsets, heads_first,
                           nq, nk, scale, softcap, sinks, alibi_slopes, num_splits, page_table)


attention_forward = torch.library.custom_op(
    "compilemask::attention_forward", mutates_args=(), device_types="cuda")(_attention_forward)


def _address(x: Optional[Tensor]) -> int:
    """x's data pointer, 0 for None (the kernels' "none")."""
    return 0 if x is None else x.data_ptr()


def _launch_forward(q, k, v, desc_host, desc_device, q_offsets, k_offsets, heads_first, nq, nk,
                    scale, softcap, sinks, alibi_slopes, num_splits, page_table):
    packed = q_offsets is not None
    # With offsets the kernels write the rows outside every sequence too (0 and -inf).
    out = torch.empty(_out_shape(q, v), dtype=q.dtype, device=q.device)
    lse = torch.empty(_lse_shape(q, heads_first, nq), dtype=torch.float32, device=q.device)
    dims = _dims(q, k, v, q_offsets, heads_first, nq, nk)
    with torch.cuda.device(q.device):  # the split count depends on the device's SMs
        workspace = torch.empty(
            _cuda.workspace_bytes(desc_host.data_ptr(), desc_device.data_ptr(), dims, num_splits),
            dtype=torch.uint8, device=q.device)
        _cuda.forward(
            desc_host.data_ptr(), desc_device.data_ptr(), dims, scale, softcap, _address(sinks),
            _address(alibi_slopes), q.data_ptr(), _bsh_strides(q, heads_first, packed),
            k.data_ptr(), _bsh_strides(k, heads_first, packed),
            v.data_ptr(), _bsh_strides(v, heads_first, packed),
            out.data_ptr(), _bsh_strides(out, heads_first, packed),
            lse.data_ptr(), _lse_strides(lse, packed),
            *_packing(q, k, q_offsets, k_offsets), num_splits,
            *_paging(k, page_table, heads_first),
            workspace.data_ptr(), workspace.numel(), _current_stream(q.device),
        )
    return out, lse


@attention_forward.register_fake
def _attention_forward_fake(q, k, v, desc_host, desc_device, q_offsets, k_offsets, heads_first,
                            nq, nk, scale, softcap, sinks, alibi_slopes, num_splits, page_table,
                            lse_grad, deterministic):
    out = torch.empty(_out_shape(q, v), dtype=q.dtype, device=q.device)
    lse = torch.empty(_lse_shape(q, heads_first, nq), dtype=torch.float32, device=q.device)
    return out, lse


def _attention_backward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    output: Tensor,
    lse: Tensor,
    dout: Tensor,
    dlse: Optional[Tensor],
    desc_host: Tensor,
    desc_device: Tensor,
    q_offsets: Optional[Tensor],
    k_offsets: Optional[Tensor],
    heads_first: bool,
    nq: int,
    nk: int,
    scale: float,
    softcap: float,
    sinks: Optional[Tensor],
    alibi_slopes: Optional[Tensor],
    deterministic: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dsinks) of attention_forward's outputs for the gradients dout (of out) and
    dlse (of lse; None for none), in the shapes and dtype of q, k and v (dk and dv summed over
    the query heads of each GQA group; zero on the rows of a jagged layout outside every
    sequence), and the sinks' gradient, float32 [heads_q] (empty without sinks).
    output and lse are the forward's outputs (named `output`: schemas reserve `out` for out=
    variants); the other arguments are the forward's."""
    q, k, v, out, dout = (_kernel_layout(x) for x in (q, k, v, output, dout))
    if dlse is not None:  # the kernel reads it with the LSE's strides
        dlse = dlse.to(torch.float32).expand(lse.shape).contiguous()
    if q.dim() == 3 and q_offsets is None:  # one sequence: batch 1 of [S, H, D]
        grads = _launch_backward(*(x.unsqueeze(0) for x in (q, k, v, out, lse, dout)),
                                 None if dlse is None else dlse.unsqueeze(0), desc_host,
                                 desc_device, None, None, False, nq, nk, scale, softcap, sinks,
                                 alibi_slopes, deterministic)
        return (*(g.squeeze(0) for g in grads[:3]), grads[3])
    return _launch_backward(q, k, v, out, lse, dout, dlse, desc_host, desc_device, q_offsets,
                            k_offsets, heads_first, nq, nk, scale, softcap, sinks, alibi_slopes,
                            deterministic)


attention_backward = torch.library.custom_op(
    "compilemask::attention_backward", mutates_args=(), device_types="cuda")(_attention_backward)


def _sink_gradient_like(sinks: Optional[Tensor], device: torch.device) -> Tensor:
    """The sinks' gradient, uninitialised: float32 [heads_q], or empty without sinks."""
    return torch.empty(0 if sinks is None else sinks.shape[0], dtype=torch.float32, device=device)


def _launch_backward(q, k, v, out, lse, dout, dlse, desc_host, desc_device, q_offsets, k_offsets,
                     heads_first, nq, nk, scale, softcap, sinks, alibi_slopes, deterministic):
    packed = q_offsets is not None
    # With offsets the kernels write the rows outside every sequence too (0).
    dq, dk, dv = (torch.empty(x.shape, dtype=x.dtype, device=x.device) for x in (q, k, v))
    dsinks = _sink_gradient_like(sinks, q.device)
    dims = _dims(q, k, v, q_offsets, heads_first, nq, nk)
    tensors = [(x.data_ptr(), _bsh_strides(x, heads_first, packed))
               for x in (q, k, v, out, dout, dq, dk, dv)]
    with torch.cuda.device(q.device):
        # The automatic schedule (head splits 0) replays the dispatch on this device's SMs once
        # per problem; the workspace query and the launch then find it kept.
        workspace = torch.empty(
            _cuda.backward_workspace_bytes(desc_host.data_ptr(), desc_device.data_ptr(), dims, 0,
                                           deterministic),
            dtype=torch.uint8, device=q.device)
        _cuda.backward(
            desc_host.data_ptr(), desc_device.data_ptr(), dims, scale, softcap, _address(sinks),
            _address(alibi_slopes), tensors, lse.data_ptr(), _lse_strides(lse, packed),
            _address(dlse), 0 if sinks is None else dsinks.data_ptr(),
            *_packing(q, k, q_offsets, k_offsets),
            deterministic, 0, workspace.data_ptr(), workspace.numel(), _current_stream(q.device),
        )
    return dq, dk, dv, dsinks


@attention_backward.register_fake
def _attention_backward_fake(q, k, v, output, lse, dout, dlse, desc_host, desc_device, q_offsets,
                             k_offsets, heads_first, nq, nk, scale, softcap, sinks,
                             alibi_slopes, deterministic):
    return (torch.empty(q.shape, dtype=q.dtype, device=q.device),
            torch.empty(k.shape, dtype=k.dtype, device=k.device),
            torch.empty(v.shape, dtype=v.dtype, device=v.device),
            _sink_gradient_like(sinks, q.device))


def _setup_context(ctx, inputs, output):
    (q, k, v, desc_host, desc_device, q_offsets, k_offsets, heads_first, nq, nk, scale, softcap,
     sinks, alibi_slopes, _num_splits, page_table, lse_grad, deterministic) = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, desc_host, desc_device, q_offsets, k_offsets, sinks,
                          alibi_slopes)
    ctx.options = (heads_first, nq, nk, scale, softcap)
    ctx.lse_grad, ctx.deterministic = lse_grad, deterministic
    ctx.paged = page_table is not None


def _gradients(ctx, dout, dlse, backward):
    """The gradients of attention_forward's inputs, from those of its outputs (None: not used by
    the loss), computed by `backward` (the operator attention_backward or its implementation)."""
    # cm.attention refuses paged K/V with autograd; a direct call of the operator gets here.
    if ctx.paged:
        raise RuntimeError("compilemask::attention_forward with a page_table has no backward")
    (q, k, v, out, lse, desc_host, desc_device, q_offsets, k_offsets, sinks,
     alibi_slopes) = ctx.saved_tensors
    if dout is None:  # a loss of the LSE alone
        dout = torch.zeros_like(out)
    # Without lse_grad the caller never saw the LSE, so its gradient is zero.
    dlse = dlse if ctx.lse_grad else None
    dq, dk, dv, dsinks = backward(q, k, v, out, lse, dout, dlse, desc_host, desc_device,
                                  q_offsets, k_offsets, *ctx.options, sinks, alibi_slopes,
                                  ctx.deterministic)
    # One gradient slot per input of attention_forward; the ALiBi slopes have none.
    return (dq, dk, dv, None, None, None, None, None, None, None, None, None,
            None if sinks is None else dsinks, None, None, None, None, None)


torch.library.register_autograd(
    "compilemask::attention_forward",
    lambda ctx, dout, dlse: _gradients(ctx, dout, dlse, torch.ops.compilemask.attention_backward),
    setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """attention_forward and its gradient in plain eager calls: the same implementations, without
    the dispatcher's custom-op layers, which cost an eager forward + backward about half a
    millisecond of host time (docs/perf-notes.md, "Host time of an eager call")."""

    @staticmethod
    def forward(ctx, *inputs):
        outputs = _attention_forward(*inputs)
        _setup_context(ctx, inputs, outputs)
        ctx.set_materialize_grads(False)  # no zeros made for an unused LSE's gradient
        return outputs

    @staticmethod
    @torch.autograd.function.once_differentiable  # the kernels have no double backward
    def backward(ctx, dout, dlse):
        return _gradients(ctx, dout, dlse, _attention_backward)


_PLAIN_TENSORS = (Tensor, torch.nn.Parameter)
_SINKS_INPUT = 12  # attention_forward's sinks: the one input besides q, k, v with a gradient


def differentiable_attention(*inputs) -> tuple[Tensor, Tensor]:
    """attention_forward(*inputs) with autograd. Through the custom operator under torch.compile
    (which traces it), for tensor subclasses and under a dispatch mode (which see the operator
    rather than its kernels); else through _EagerAttention, or straight to the implementation
    when no gradient is wanted."""
    if (torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0
            or any(type(x) not in _PLAIN_TENSORS for x in inputs[:3])):
        return torch.ops.compilemask.attention_forward(*inputs)
    differentiable = [*inputs[:3], inputs[_SINKS_INPUT]]
    if not (torch.is_grad_enabled()
            and any(x is not None and x.requires_grad for x in differentiable)):
        return _attention_forward(*inputs)
    return _EagerAttention.apply(*inputs)


@torch.library.custom_op("compilemask::permute_rows", mutates_args=(), device_types="cuda")
def permute_rows(x: Tensor, order: Tensor, inverse: Tensor, heads_first: bool) -> Tensor:
    """x [B, S, H, D] (heads_first=False) or [B, H, S, D] with its rows gathered: row s of the
    result is row order[s] of x. order and inverse are int32 permutations of range(S), inverse
    order's inverse (the gradient gathers with it). Checked by compilemask._attention and the
    plan (the permutation)."""
    x = _kernel_layout(x)
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    heads, rows = (x.shape[1], x.shape[2]) if heads_first else (x.shape[2], x.shape[1])
    with torch.cuda.device(x.device):
        _cuda.permute_rows(x.data_ptr(), _bsh_strides(x, heads_first, False), y.data_ptr(),
                           _bsh_strides(y, heads_first, False),
                           (x.shape[0], heads, rows, x.shape[3]), order.data_ptr(),
                           _current_stream(x.device))
    return y


@permute_rows.register_fake
def _permute_rows_fake(x, order, inverse, heads_first):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _permute_rows_setup_context(ctx, inputs, output):
    _, order, inverse, heads_first = inputs
    ctx.save_for_backward(order, inverse)
    ctx.heads_first = heads_first


def _permute_rows_backward(ctx, grad):
    order, inverse = ctx.saved_tensors
    back = torch.ops.compilemask.permute_rows(grad, inverse, order, ctx.heads_first)
    return back, None, None, None


torch.library.register_autograd(
    "compilemask::permute_rows", _permute_rows_backward, setup_context=_permute_rows_setup_context
)
