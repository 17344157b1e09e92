"""cm.attention: argument checks, then the compilemask::attention_forward operator (whose
autograd runs compilemask::attention_backward).

Every check reads only shapes, strides, dtypes and devices, so it costs no host sync, traces
under torch.compile without a graph break, and runs before anything reaches the GPU: bad
input raises TypeError or ValueError naming the argument and the rule, never a CUDA error."""
from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import Tensor

from . import _core, _torch_ops
from ._logits import check_logit_factors
from ._plan import Plan

_KERNEL_DTYPES = (torch.bfloat16, torch.float16)
# The head dims the kernels run (include/compilemask/cuda_limits.h), tabled at import: the
# check in cm.attention stays plain Python, which torch.compile traces without a graph break.
_HEAD_DIMS = frozenset(d for d in range(1, _core.MAX_HEAD_DIM + 1) if _core.head_dim_supported(d))
_HEAD_DIM_RULE = _core.HEAD_DIM_RULE
_KERNEL_TILE = (128, 128)
_MAX_SPLITS = _core.MAX_SPLITS
_ALIGN = 8  # elements of 16 bytes (2-byte types): the kernel's TMA and store granularity
_PAGE_SIZE_RULE = _core.PAGE_SIZE_RULE  # rows per page of paged K/V (cm::cuda::PagedKV)
_page_size_supported = _core.page_size_supported


def _check_tensor(name: str, x: Any, device: torch.device) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device}, but the plan is on {device}; all of q, k, v "
                         "and the plan must be on one CUDA device")
    if x.dtype not in _KERNEL_DTYPES:
        raise TypeError(f"{name} has dtype {x.dtype}; cm.attention needs torch.bfloat16 or "
                        "torch.float16")
    if x.dim() not in (3, 4):
        raise ValueError(f"{name} must be 4-D ([B, S, H, D] or [B, H, S, D]) or 3-D jagged "
                         f"[T, H, D], got shape {tuple(x.shape)}")
    if x.stride(-1) != 1:
        raise ValueError(f"{name}: the last (head) dimension must be contiguous (stride 1), got "
                         f"stride {x.stride(-1)}; call .contiguous()")
    # The data address is not checked here (storage_offset() breaks a torch.compile trace):
    # the operator copies a view that starts off a 16-byte boundary.
    if any(s % _ALIGN for s in x.stride()[:-1]):
        raise ValueError(f"{name}: strides {tuple(x.stride())} must be multiples of {_ALIGN} "
                         "elements (16 bytes) for the kernel's tensor loads; call .contiguous()")


def _check_offsets(name: str, offsets: Any, batch: int, device: torch.device) -> None:
    if not isinstance(offsets, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of int32 start rows, got "
                        f"{type(offsets).__name__}")
    if offsets.dtype != torch.int32 or offsets.device != device:
        raise TypeError(f"{name} must be an int32 tensor on {device}, got {offsets.dtype} on "
                        f"{offsets.device}")
    if offsets.dim() != 1 or offsets.shape[0] != batch or not offsets.is_contiguous():
        raise ValueError(f"{name} must be a contiguous 1-D tensor of {batch} start rows (one per "
                         f"sequence), got shape {tuple(offsets.shape)}")


def _check_sequences_inside(name: str, offsets: Tensor, rows: int, tensor: str,
                            total: int) -> None:
    """Raises unless every sequence of `rows` rows at `offsets` lies in the tensor's `total`
    rows. Reads the offsets: a host sync."""
    for b, start in enumerate(offsets.tolist()):
        if start < 0 or start + rows > total:
            raise ValueError(f"{name}[{b}] = {start}: sequence {b}'s rows [{start}, "
                             f"{start + rows}) do not lie in the {total} rows of {tensor}")


def _check_paged(page_table: Any, inputs: tuple[Optional[Tensor], ...], plan: Plan, batch: int,
                 nq: int, num_pages: int, page_size: int) -> None:
    """Raises unless q (nq rows) can attend to the k and v pools (of num_pages pages of
    page_size rows) through page_table, forward only: none of `inputs` (q, k, v and the sinks,
    None without) may require grad."""
    if not isinstance(page_table, Tensor):
        raise TypeError(f"page_table must be a torch.Tensor of int32 page indices, got "
                        f"{type(page_table).__name__}")
    if page_table.dtype != torch.int32 or page_table.device != plan.device:
        raise TypeError(f"page_table must be an int32 tensor on {plan.device}, got "
                        f"{page_table.dtype} on {page_table.device}")
    if not _page_size_supported(page_size) or num_pages < 1:
        raise ValueError(f"paged k and v must be pools of at least one page of {_PAGE_SIZE_RULE} "
                         f"rows, got {num_pages} pages of {page_size} rows")
    pages_needed = -(-plan.nk // page_size)
    if page_table.dim() != 2 or page_table.shape[0] != batch:
        raise ValueError(f"page_table must be 2-D [B, pages per sequence] with B = {batch} (q's "
                         f"batch), got shape {tuple(page_table.shape)}")
    if page_table.shape[1] < pages_needed:
        raise ValueError(f"page_table has {page_table.shape[1]} pages per sequence; the plan's "
                         f"nk={plan.nk} keys need at least {pages_needed} pages of {page_size} "
                         "rows")
    if page_table.stride(1) != 1:
        raise ValueError(f"page_table's rows must be contiguous (stride(1) == 1), got strides "
                         f"{tuple(page_table.stride())}; call .contiguous()")
    if plan.nq != nq:
        raise ValueError(f"the plan was specialized for nq={plan.nq}, but q has {nq} rows")
    # The device copy: reading the numpy order would make torch.compile guard on it.
    if plan._order_device is not None:
        raise ValueError("paged K/V does not take a plan with a token_order: the pages hold the "
                         "keys in the tensors' order")
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in inputs):
        raise ValueError("paged K/V has no backward; call cm.attention under torch.no_grad() "
                         "or torch.inference_mode(), or pass q, k, v and sinks detached")


def _split(x: Tensor, layout: str) -> tuple[int, int, int, int]:
    """(batch, rows, heads, head_dim) of a 4-D tensor, or (1, T, heads, head_dim) of 3-D."""
    if x.dim() == 3:
        return 1, x.shape[0], x.shape[1], x.shape[2]
    if layout == "bhsd":
        return x.shape[0], x.shape[2], x.shape[1], x.shape[3]
    return x.shape[0], x.shape[1], x.shape[2], x.shape[3]


def attention(q: Tensor, k: Tensor, v: Tensor, plan: Plan, scale: Optional[float] = None,
              return_lse: bool = False, *, layout: str = "bshd",
              offsets: Optional[Tensor] = None,
              k_offsets: Optional[Tensor] = None, deterministic: bool = False,
              softcap: Optional[float] = None, num_splits: int = 0,
              page_table: Optional[Tensor] = None, check_offsets: bool = False,
              sinks: Optional[Tensor] = None, alibi_slopes: Optional[Tensor] = None) -> Any:
    """softmax(scale * q kᵀ, masked by `plan`) v on torch CUDA tensors (bf16 or fp16, head dim
    a multiple of 8 up to 256), differentiable.

    Layouts: 4-D q [B, Sq, Hq, D] with k, v [B, Sk, Hkv, D] (layout="bshd", the default) or
    [B, H, S, D] (layout="bhsd"); Hq a multiple of Hkv (GQA/MQA). v may have a head dim Dv of
    its own, as multi-head latent attention's 128 against q's and k's 192 (DeepSeek's MLA);
    out then has Dv columns. Or jagged 3-D [T, H, D]:
    without offsets one sequence of T rows; with `offsets` (int32 CUDA tensor of B start rows)
    sequence b is rows offsets[b] + [0, plan.nq) of q and k_offsets[b] + [0, plan.nk) of k and
    v (k_offsets defaults to offsets). Those ranges must lie inside T. Reading the offsets
    would cost a host sync, so by default the kernels check them instead: a sequence whose rows
    do not all lie in q and k gives NaN on its rows of out, the LSE and the gradients that do
    (through a plan with a token_order, NaN out and LSE and zero gradients), and nothing outside
    the tensors is written. check_offsets=True reads them first and raises
    ValueError naming the sequence (a host sync: not under CUDA graph capture). Rows of a
    jagged q outside every sequence give 0.

    The plan must be specialized for these lengths with tile (128, 128), batch 1 or B and heads
    1 or Hq, and be on q's device (specialize(device=...) or plan.to(device)). A plan with a
    token_order (specialize(token_order=...)) takes q, k and v in their own order and returns
    out, the LSE and the gradients in it; the gathers into and out of the mask's order run on
    the GPU (4-D: at about the speed of a copy; jagged: each sequence's rows gathered by torch
    into a [B, S, H, D] batch, and out and the LSE put back).
    scale defaults to 1/sqrt(D). softcap caps the logits at softcap * tanh(scale * q kᵀ /
    softcap) (Gemma 2; FlashAttention's softcap, FlexAttention's tanh score_mod); the kernels
    take tanh from the GPU's special function unit (relative error about 2^-11). Returns out
    (q's shape with v's head dim, and q's dtype), and with return_lse also the float32
    natural-log LSE ([B, Hq, Sq], or [Hq, T] for 3-D; -inf where a row sees no key).

    sinks adds attention sinks (gpt-oss; FlashInfer's and FlashAttention 3's learnable sinks): a
    floating-point tensor [Hq] on q's device holding one logit per query head (natural log, not
    scaled and not capped) of a key of value 0 that every row of the head sees. It joins each
    row's softmax denominator only, out = sum_j e^{s_j} v_j / (e^{sinks[h]} + sum_j e^{s_j}),
    and the LSE includes it, so a row that sees no key gets out 0 and LSE sinks[h]; -inf is no
    sink for that head. It is differentiable: its gradient is summed over the batch and rows in
    a fixed order (bitwise reproducible in both modes). The kernels read it as float32.

    alibi_slopes adds ALiBi (Press et al.; FlashAttention 2's alibi_slopes): a floating-point
    tensor [Hq] on q's device, one slope per query head, and logit (i, j) of head h gains
    -alibi_slopes[h] * |i + nk - nq - j| for query row i and key j of a sequence (the last query
    row and the last key at distance 0), after the soft cap and before the mask. It takes no
    gradient (pass it without requires_grad) and needs a plan without a token_order, whose
    rows would put the distances in the mask's order. The kernels read it as float32.

    num_splits cuts each query tile's keys into that many parts, run in parallel and merged by
    their LSEs (FlashAttention's num_splits, for decoding and short query chunks against long
    keys): 0 (the default) splits only when the (batch, head, query tile) work items leave SMs
    idle, 1 never, 2 to 256 always.

    page_table runs the forward on K and V held in pages (decoding against a paged KV cache, as
    vLLM's block tables and FlashAttention's page_table): k and v are pools [num_pages,
    page_size, Hkv, D] ([num_pages, Hkv, page_size, D] with layout="bhsd"), page_size 16, 32,
    64 or a multiple of 128, and page_table an int32 [B, pages_per_seq] tensor on q's device
    with stride(1) == 1 and pages_per_seq >= ceil(plan.nk / page_size): key j of sequence b is
    row j % page_size of page page_table[b, j // page_size]. q is 4-D with plan.nq rows (no
    jagged layout); every sequence has plan.nk keys (a mask per batch row gives them other
    lengths). Entries outside [0, num_pages) read as zeros; the cache slots that no query row
    sees (a last page's rows past the sequence, a shorter sequence's keys below nk) never reach
    the output, even NaN, and a sequence's entries past ceil(nk / page_size) are never read (the
    entries are not checked: that would need a host sync). Forward only: q, k and v must not
    require grad (under torch.no_grad() or inference_mode() they may); no token_order; a plan
    whose key tiles restart at document boundaries (doc_causal, hstu) raises ValueError.

    Autograd runs the sm90 backward kernel; dk and dv are summed over each GQA group. With
    deterministic=True the gradients are bitwise identical from run to run (slower). With
    return_lse the LSE is differentiable too, at the cost of one read per row in the backward.
    Jagged sequences must not overlap (key sequences may, in the forward): each sequence's rows
    of the outputs and gradients are written, not added. The rows between them may hold
    anything, NaN included, in both passes; the backward needs every row inside a sequence
    finite, even one the mask hides (a masked product there is 0 * NaN)."""
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a compilemask.Plan, got {type(plan).__name__}")
    if plan.device is None:
        raise ValueError("plan is not on a CUDA device: specialize(..., device='cuda') or use "
                         "plan.to(device) once, before calling cm.attention")
    if _torch_ops._cuda is None:
        raise RuntimeError("this compilemask build has no CUDA kernels (built without nvcc or "
                           "CUTLASS, or with CM_CUDA=OFF)")
    if layout not in ("bshd", "bhsd"):
        raise ValueError(f"layout must be 'bshd' or 'bhsd', got {layout!r}")
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_tensor(name, x, plan.device)
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must have one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    paged = page_table is not None
    if paged and q.dim() != 4:
        raise ValueError(f"page_table needs 4-D q ([B, S, H, D] or [B, H, S, D]) and 4-D k and v "
                         f"pools; jagged [T, H, D] inputs take no page table, got q of shape "
                         f"{tuple(q.shape)}")
    if not (q.dim() == k.dim() == v.dim()):
        raise ValueError(f"q, k and v must have the same number of dimensions, got {q.dim()}, "
                         f"{k.dim()}, {v.dim()}")
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"k and v must have one shape but for the head dim, got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}")
    batch, nq, heads_q, dim = _split(q, layout)
    k_batch, nk, heads_kv, k_dim = _split(k, layout)  # paged: pages and the rows of a page
    if dim not in _HEAD_DIMS:
        raise ValueError(f"q has head dim {dim}; the kernels support {_HEAD_DIM_RULE}")
    if k_dim != dim:
        raise ValueError(f"k has head dim {k_dim} but q has {dim}")
    if v.shape[-1] not in _HEAD_DIMS:
        raise ValueError(f"v has head dim {v.shape[-1]}; the kernels support {_HEAD_DIM_RULE}")
    if heads_q % heads_kv:
        raise ValueError(f"q's {heads_q} heads must be a multiple of k's and v's {heads_kv}")
    if k_batch != batch and not paged:
        raise ValueError(f"q has batch {batch} but k and v have {k_batch}")

    jagged = q.dim() == 3 and offsets is not None
    if q.dim() == 4 and (offsets is not None or k_offsets is not None):
        raise ValueError("offsets and k_offsets are for jagged 3-D [T, H, D] inputs only")
    if q.dim() == 3 and offsets is None and k_offsets is not None:
        raise ValueError("k_offsets needs offsets")
    if jagged:
        k_offsets = offsets if k_offsets is None else k_offsets
        batch = offsets.shape[0] if isinstance(offsets, Tensor) else 0
        _check_offsets("offsets", offsets, batch, plan.device)
        _check_offsets("k_offsets", k_offsets, batch, plan.device)
        if nq < plan.nq or nk < plan.nk:
            raise ValueError(f"jagged q has {nq} rows and k {nk}, fewer than one sequence of the "
                             f"plan (nq={plan.nq}, nk={plan.nk})")
        if check_offsets:
            _check_sequences_inside("offsets", offsets, plan.nq, "q", nq)
            _check_sequences_inside("k_offsets", k_offsets, plan.nk, "k and v", nk)
    elif check_offsets:
        raise ValueError("check_offsets checks the offsets of jagged 3-D inputs; none were given")
    elif paged:
        _check_paged(page_table, (q, k, v, sinks), plan, batch, nq, num_pages=k_batch,
                     page_size=nk)
    elif (plan.nq, plan.nk) != (nq, nk):
        raise ValueError(f"the plan was specialized for nq={plan.nq}, nk={plan.nk}, but q has "
                         f"{nq} rows and k has {nk}")
    if plan.batch not in (1, batch):
        raise ValueError(f"the plan was specialized for batch={plan.batch}; the inputs have "
                         f"batch {batch} (plans of batch 1 serve any batch)")
    if plan.heads not in (1, heads_q):
        raise ValueError(f"the plan was specialized for heads={plan.heads}; q has {heads_q} heads "
                         "(plans of heads 1 serve any head count)")
    if plan.tile != _KERNEL_TILE:
        raise ValueError(f"the plan has tile {plan.tile}; the sm90 kernel needs tile=(128, 128)")
    if not isinstance(deterministic, bool):
        raise TypeError(f"deterministic must be a bool, got {type(deterministic).__name__}")
    check_logit_factors(scale, softcap)
    if scale is None:
        scale = 1.0 / math.sqrt(dim)
    if sinks is not None:
        _check_per_head("sinks", "logit", sinks, heads_q, plan.device)
        sinks = sinks.to(torch.float32).contiguous()  # differentiable: the gradient casts back
    if alibi_slopes is not None:
        _check_per_head("alibi_slopes", "slope", alibi_slopes, heads_q, plan.device)
        if alibi_slopes.requires_grad:
            raise ValueError("alibi_slopes takes no gradient: pass it detached (the bias "
                             "-slope * distance does not depend on q or k, and the kernels do not "
                             "differentiate it)")
        if plan._order_device is not None:
            raise ValueError("alibi_slopes needs a plan without a token_order: its kernels would "
                             "measure the distances between rows in the mask's order")
        if plan._selects_rows:
            raise ValueError("alibi_slopes needs a plan of every query row (no query_positions): "
                             "its kernels measure distances from the plan's own rows")
        alibi_slopes = alibi_slopes.to(torch.float32).contiguous()

    if not (isinstance(num_splits, int) and not isinstance(num_splits, bool)
            and 0 <= num_splits <= _MAX_SPLITS):
        raise ValueError(f"num_splits must be an int from 0 (automatic) to {_MAX_SPLITS}, got "
                         f"{num_splits!r}")

    heads_first = layout == "bhsd"
    # Read from the device copy: under torch.compile, a test on the numpy order would make
    # dynamo guard on that read-only array and warn that it is not writable.
    reorder = plan._order_device is not None
    sequence_rows = None
    if reorder and q.dim() == 3:  # gather each sequence in the mask's order: a [B, S, H, D] batch
        starts = offsets if jagged else torch.zeros(1, dtype=torch.int32, device=q.device)
        sequence_rows = _rows_in_order(starts, plan._order_device)
        same = (k_offsets is None or k_offsets is offsets) and k.shape[0] == q.shape[0]
        k_rows = sequence_rows if same else _rows_in_order(
            starts if k_offsets is None else k_offsets, plan._order_device)
        # A sequence whose rows leave q or k (the offsets are not read here: a host sync) gathers
        # clamped rows and gives NaN, as the kernels do in the packed layout.
        q_inside = _rows_inside(sequence_rows, q.shape[0])
        k_inside = q_inside if same else _rows_inside(k_rows, k.shape[0])
        fits = q_inside.view(-1, plan.nq).all(1) & k_inside.view(-1, plan.nk).all(1)
        packed_q = q
        q = q.index_select(0, sequence_rows.clamp(0, q.shape[0] - 1)).unflatten(0, (-1, plan.nq))
        k, v = (x.index_select(0, k_rows.clamp(0, k.shape[0] - 1)).unflatten(0, (-1, plan.nk))
                for x in (k, v))
        jagged = heads_first = False
    elif reorder:  # into the mask's order; gradients come back through the gathers
        q, k, v = (torch.ops.compilemask.permute_rows(x, plan._order_device,
                                                      plan._inverse_device, heads_first)
                   for x in (q, k, v))
    out, lse = _torch_ops.differentiable_attention(
        q, k, v, plan._desc_host, plan._desc_device, offsets if jagged else None,
        k_offsets if jagged else None, heads_first, plan.nq, plan.nk, float(scale),
        float(softcap or 0.0), sinks, alibi_slopes, num_splits, page_table, bool(return_lse),
        deterministic)
    if sequence_rows is not None:
        out, lse = _scatter_sequences(out, lse, fits, sequence_rows, q_inside, packed_q)
    elif reorder:  # back into the tensors' order
        out = torch.ops.compilemask.permute_rows(out, plan._inverse_device, plan._order_device,
                                                 heads_first)
        lse = lse.index_select(-1, plan._inverse_device)
    return (out, lse) if return_lse else out


def _check_per_head(name: str, what: str, x: Any, heads_q: int, device: torch.device) -> None:
    """Raises unless x (the argument `name`, one `what` per query head) is a floating-point
    tensor [heads_q] on `device`. Its values are not read (a host sync): NaN or inf give NaN
    rows."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must hold floating-point {what}s, got dtype {x.dtype}")
    if tuple(x.shape) != (heads_q,):
        raise ValueError(f"{name} must have shape [{heads_q}] (one {what} per query head), got "
                         f"{tuple(x.shape)}")
    if x.device != device:
        raise ValueError(f"{name} is on {x.device}, but the plan and q are on {device}")


def _rows_in_order(starts: Tensor, order: Tensor) -> Tensor:
    """Row starts[b] + order[i] of a packed [T, H, D] tensor for each sequence b and position i,
    flattened (int64): sequence b's rows in the mask's token order, some outside [0, T) when its
    offset puts it there."""
    return (starts.long()[:, None] + order.long()[None, :]).flatten()


def _rows_inside(rows: Tensor, total: int) -> Tensor:
    """Whether each of `rows` lies in [0, total)."""
    return (rows >= 0) & (rows < total)


def _scatter_sequences(out: Tensor, lse: Tensor, fits: Tensor, rows: Tensor, inside: Tensor,
                       packed: Tensor) -> tuple[Tensor, Tensor]:
    """out [B, S, H, D] and lse [B, H, S] of the gathered sequences back to their packed `rows`
    of a [T, H, D] tensor like `packed`: 0 and -inf on the rows outside every sequence, NaN on
    the rows of a sequence that does not fit (`fits` false), whose rows outside [0, T) (`inside`
    false) go to a spare row T that is cut off."""
    total, heads = packed.shape[0], packed.shape[1]
    out = torch.where(fits[:, None, None, None], out, float("nan")).flatten(0, 1)
    lse = torch.where(fits[:, None, None], lse, float("nan")).transpose(0, 1).flatten(1)
    target = torch.where(inside, rows, total)
    out = packed.new_zeros((total + 1, *out.shape[1:])).index_copy(0, target, out)[:total]
    lse = torch.full((heads, total + 1), float("-inf"), device=lse.device).index_copy(
        1, target, lse)[:, :total].contiguous()
    return out, lse
