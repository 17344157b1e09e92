"""GPU tests of cm.attention's argument checks: every bad argument (tensors, plans, options) raises
a clear error before any kernel launch."""
from __future__ import annotations

import math

import pytest

# torch_gpu first: it skips this module where the kernels cannot run.
from torch_gpu import DEVICE, plan_256
import torch  # noqa: E402
import compilemask as cm  # noqa: E402


def good(n=256, heads=2, dim=64, dtype=torch.bfloat16):
    return [torch.randn(1, n, heads, dim, device=DEVICE, dtype=dtype) for _ in range(3)]


ERRORS = [
    ("q not a tensor", lambda q, k, v: ([1.0], k, v, {}), TypeError, "q must be a torch.Tensor"),
    ("float32", lambda q, k, v: (q.float(), k, v, {}), TypeError, "q has dtype torch.float32"),
    ("mixed dtypes", lambda q, k, v: (q, k.half(), v, {}), TypeError, "k has dtype|one dtype"),
    ("cpu", lambda q, k, v: (q.cpu(), k, v, {}), ValueError, "q is on cpu"),
    ("head dim", lambda q, k, v: (torch.randn(1, 256, 2, 40, device=DEVICE,
                                              dtype=torch.bfloat16)[..., :36], k, v, {}),
     ValueError, "head dim 36; the kernels support a multiple of 8 from 8 to 256"),
    ("wide head dim", lambda q, k, v: (torch.randn(1, 256, 2, 264, device=DEVICE,
                                                   dtype=torch.bfloat16), k, v, {}),
     ValueError, "head dim 264; the kernels support a multiple of 8 from 8 to 256"),
    ("k head dim", lambda q, k, v: (q, k[..., :32].contiguous(), v[..., :32].contiguous(), {}),
     ValueError, "head dim 32 but q has 64"),
    ("v head dim", lambda q, k, v: (q, k, torch.randn(1, 256, 2, 264, device=DEVICE,
                                                      dtype=torch.bfloat16), {}),
     ValueError, "v has head dim 264; the kernels support a multiple of 8 from 8 to 256"),
    ("last dim", lambda q, k, v: (q.transpose(-1, -2).contiguous().transpose(-1, -2), k, v, {}),
     ValueError, "last \\(head\\) dimension must be contiguous"),
    ("unaligned", lambda q, k, v: (torch.randn(1, 256, 2, 65, device=DEVICE,
                                               dtype=torch.bfloat16)[..., 1:], k, v, {}),
     ValueError, "multiples of 8"),
    ("2-D", lambda q, k, v: (q[0, 0], k, v, {}), ValueError, "q must be 4-D"),
    ("k/v shapes", lambda q, k, v: (q, k, v[:, :128], {}), ValueError,
     "k and v must have one shape"),
    ("lengths", lambda q, k, v: (q[:, :128], k, v, {}), ValueError, "specialized for nq=256"),
    ("heads", lambda q, k, v: (q, k.repeat(1, 1, 2, 1)[:, :, :3].contiguous(),
                               v.repeat(1, 1, 2, 1)[:, :, :3].contiguous(), {}),
     ValueError, "multiple of k's and v's 3"),
    ("batch", lambda q, k, v: (q, torch.cat([k, k]), torch.cat([v, v]), {}), ValueError,
     "q has batch 1 but k and v have 2"),
    ("layout", lambda q, k, v: (q, k, v, {"layout": "sbhd"}), ValueError, "layout must be"),
    ("deterministic", lambda q, k, v: (q, k, v, {"deterministic": 1}), TypeError,
     "deterministic must be a bool"),
    ("scale", lambda q, k, v: (q, k, v, {"scale": -1.0}), ValueError, "scale must be"),
    ("softcap", lambda q, k, v: (q, k, v, {"softcap": 0.0}), ValueError,
     "softcap must be None or a finite number > 0"),
    ("softcap nan", lambda q, k, v: (q, k, v, {"softcap": math.nan}), ValueError,
     "softcap must be None or a finite number > 0"),
    ("sinks list", lambda q, k, v: (q, k, v, {"sinks": [0.0, 1.0]}), TypeError,
     "sinks must be a torch.Tensor"),
    ("sinks int", lambda q, k, v: (q, k, v, {"sinks": torch.zeros(2, dtype=torch.int32,
                                                                   device=DEVICE)}),
     TypeError, "sinks must hold floating-point logits"),
    ("sinks shape", lambda q, k, v: (q, k, v, {"sinks": torch.zeros(3, device=DEVICE)}),
     ValueError, r"sinks must have shape \[2\] \(one logit per query head\), got \(3,\)"),
    ("sinks cpu", lambda q, k, v: (q, k, v, {"sinks": torch.zeros(2)}), ValueError,
     "sinks is on cpu"),
    ("alibi list", lambda q, k, v: (q, k, v, {"alibi_slopes": [0.5, 0.25]}), TypeError,
     "alibi_slopes must be a torch.Tensor"),
    ("alibi int", lambda q, k, v: (q, k, v, {"alibi_slopes": torch.ones(2, dtype=torch.int32,
                                                                        device=DEVICE)}),
     TypeError, "alibi_slopes must hold floating-point slopes"),
    ("alibi shape", lambda q, k, v: (q, k, v, {"alibi_slopes": torch.ones(1, 2, device=DEVICE)}),
     ValueError, r"alibi_slopes must have shape \[2\] \(one slope per query head\), got \(1, 2\)"),
    ("alibi cpu", lambda q, k, v: (q, k, v, {"alibi_slopes": torch.ones(2)}), ValueError,
     "alibi_slopes is on cpu"),
    ("alibi grad", lambda q, k, v: (q, k, v, {"alibi_slopes": torch.ones(
        2, device=DEVICE, requires_grad=True)}), ValueError, "alibi_slopes takes no gradient"),
    ("num_splits", lambda q, k, v: (q, k, v, {"num_splits": -1}), ValueError,
     "num_splits must be an int from 0 \\(automatic\\) to 256"),
    ("num_splits type", lambda q, k, v: (q, k, v, {"num_splits": 2.0}), ValueError,
     "num_splits must be an int"),
    ("num_splits too many", lambda q, k, v: (q, k, v, {"num_splits": 257}), ValueError,
     "num_splits must be an int from 0 \\(automatic\\) to 256"),
    ("offsets on 4-D", lambda q, k, v: (q, k, v, {"offsets": torch.zeros(1, dtype=torch.int32,
                                                                       device=DEVICE)}),
     ValueError, "jagged 3-D"),
    ("offsets dtype", lambda q, k, v: (q[0], k[0], v[0], {"offsets": torch.zeros(
        1, dtype=torch.int64, device=DEVICE)}), TypeError, "offsets must be an int32 tensor"),
    ("offsets past the end", lambda q, k, v: (q[0], k[0], v[0], {
        "offsets": torch.ones(1, dtype=torch.int32, device=DEVICE), "check_offsets": True}),
     ValueError, "offsets\\[0\\] = 1: sequence 0's rows \\[1, 257\\) do not lie in the 256 rows "
     "of q"),
    ("k_offsets before the start", lambda q, k, v: (q[0], k[0], v[0], {
        "offsets": torch.zeros(1, dtype=torch.int32, device=DEVICE),
        "k_offsets": torch.full((1,), -3, dtype=torch.int32, device=DEVICE),
        "check_offsets": True}), ValueError, "k_offsets\\[0\\] = -3: sequence 0's rows"),
    ("check_offsets without offsets", lambda q, k, v: (q, k, v, {"check_offsets": True}),
     ValueError, "check_offsets checks the offsets of jagged 3-D inputs"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments_raise_before_any_launch(case):
    _, change, error, message = case
    q, k, v, kwargs = change(*good())
    with pytest.raises(error, match=message):
        cm.attention(q, k, v, plan_256(), **kwargs)
    torch.cuda.synchronize()  # no asynchronous CUDA error was left behind


def test_plan_errors():
    q, k, v = good()
    with pytest.raises(ValueError, match="not on a CUDA device"):
        cm.attention(q, k, v, cm.masks.causal().specialize(nq=256))
    with pytest.raises(ValueError, match="specialized for heads=3"):
        cm.attention(q, k, v, cm.masks.causal().specialize(nq=256, heads=3, device=DEVICE))
    with pytest.raises(ValueError, match="specialized for batch=2"):
        cm.attention(q, k, v, cm.masks.causal().specialize(nq=256, batch=2, device=DEVICE))
    with pytest.raises(ValueError, match="tile=\\(128, 128\\)"):
        cm.attention(q, k, v, cm.masks.causal().specialize(nq=256, tile=(64, 64), device=DEVICE))
    with pytest.raises(TypeError, match="plan must be a compilemask.Plan"):
        cm.attention(q, k, v, "causal")
    with pytest.raises(ValueError, match="must be a CUDA device"):
        cm.masks.causal().specialize(nq=256, device="cpu")
    ordered = cm.masks.causal().specialize(nq=256, token_order=torch.randperm(256).numpy(),
                                           device=DEVICE)
    with pytest.raises(ValueError, match="alibi_slopes needs a plan without a token_order"):
        cm.attention(q, k, v, ordered, alibi_slopes=torch.ones(2, device=DEVICE))
