"""The CPU reference attention (the C++ oracle of the GPU kernels) on numpy arrays."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional

import numpy as np

from . import _core
from ._logits import check_logit_factors
from ._plan import Plan


class ReferenceResult(NamedTuple):
    out: np.ndarray  # [B, Hq, Nq, D]
    lse: np.ndarray  # [B, Hq, Nq], natural log; -inf (the head's sink) for rows that see no key
    dq: Optional[np.ndarray] = None  # [B, Hq, Nq, D], with backward=
    dk: Optional[np.ndarray] = None  # [B, Hkv, Nk, D]
    dv: Optional[np.ndarray] = None  # [B, Hkv, Nk, D]
    dsinks: Optional[np.ndarray] = None  # [Hq], with backward= and sinks=


def _float32(name: str, value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point values, got dtype {array.dtype}")
    if array.ndim != 4:
        raise ValueError(f"{name} must be 4-D [batch, heads, rows, head_dim], got {array.shape}")
    return np.ascontiguousarray(array, dtype=np.float32)


def reference_attention(
    q: Any,
    k: Any,
    v: Any,
    plan: Plan,
    scale: Optional[float] = None,
    backward: Any = None,
    accumulate: str = "float32",
    backward_lse: Any = None,
    softcap: Optional[float] = None,
    sinks: Any = None,
    alibi_slopes: Any = None,
) -> ReferenceResult:
    """softmax(scale * q kᵀ, masked by `plan`) v on the CPU, in [batch, heads, rows, head_dim]
    layout (q: [B, Hq, Nq, D]; k, v: [B, Hkv, Nk, D], Hq a multiple of Hkv). Inputs are
    converted to float32; `accumulate` is "float32" or "float64". With `backward=dout`, also
    returns dq, dk, dv; `backward_lse=dlse` ([B, Hq, Nq]) adds the gradient of a loss that
    uses the LSE too. scale defaults to 1/sqrt(D); softcap caps the logits as in cm.attention
    (with an exact tanh here), and sinks ([Hq]) are attention sinks as in cm.attention; with
    backward=, their gradient is returned as dsinks; alibi_slopes ([Hq]) adds ALiBi as in
    cm.attention, and as there needs a plan without a token order. A plan with a token order
    takes and returns rows in the arrays' own order, as cm.attention does: they are gathered
    into the mask's order and back. As there, a plan of batch 1 (heads 1) serves any batch
    (head count)."""
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a compilemask.Plan, got {type(plan).__name__}")
    into = _row_gather(plan.token_order)
    back = _row_gather(None if plan.token_order is None else np.argsort(plan.token_order))
    if accumulate not in ("float32", "float64"):
        raise ValueError(f"accumulate must be 'float32' or 'float64', got {accumulate!r}")
    check_logit_factors(scale, softcap)
    q32, k32, v32 = (into(_float32(name, x)) for name, x in (("q", q), ("k", k), ("v", v)))
    scale32 = 0.0 if scale is None else float(scale)
    cap32 = 0.0 if softcap is None else float(softcap)
    wide = accumulate == "float64"
    sinks32 = None if sinks is None else _per_head("sinks", "logit", sinks)
    slopes32 = None if alibi_slopes is None else _per_head("alibi_slopes", "slope", alibi_slopes)
    if slopes32 is not None and plan.token_order is not None:
        raise ValueError("alibi_slopes needs a plan without a token_order (as cm.attention)")
    if slopes32 is not None and plan.query_positions is not None:
        raise ValueError("alibi_slopes needs a plan of every query row (no query_positions; "
                         "as cm.attention)")
    out, lse = _core.reference_forward(plan._core, q32, k32, v32, scale32, cap32, sinks32,
                                       slopes32, wide)
    if backward is None:
        if backward_lse is not None:
            raise ValueError("backward_lse needs backward (the output's gradient) too")
        return ReferenceResult(back(out), back(lse))
    dout = into(_float32("backward (dout)", backward))
    dlse = None
    if backward_lse is not None:
        dlse = np.ascontiguousarray(backward_lse, dtype=np.float32)
        if dlse.shape != lse.shape:
            raise ValueError(f"backward_lse must have the LSE's shape {lse.shape}, got "
                             f"{dlse.shape}")
        dlse = into(dlse)
    dq, dk, dv, dsinks = _core.reference_backward(plan._core, q32, k32, v32, out, dout, lse, dlse,
                                                  scale32, cap32, sinks32, slopes32, wide)
    return ReferenceResult(*(back(x) for x in (out, lse, dq, dk, dv)), dsinks)


def _per_head(name: str, what: str, value: Any) -> np.ndarray:
    """The argument `name`, one `what` per query head, as a contiguous float32 vector (the core
    checks the count and the values)."""
    array = np.asarray(value)
    if array.dtype.kind != "f" or array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D floating-point array of one {what} per query "
                         f"head, got dtype {array.dtype} and shape {array.shape}")
    return np.ascontiguousarray(array, dtype=np.float32)


def _row_gather(order: Optional[np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """x with its rows (axis 2) gathered into `order`. Arrays whose axis 2 does not have
    len(order) rows pass unchanged, for the core to name the length that does not fit; all
    pass unchanged without an order."""
    def gather(x: np.ndarray) -> np.ndarray:
        if order is None or x.ndim < 3 or x.shape[2] != len(order):
            return x
        return np.take(x, order, axis=2)
    return gather
