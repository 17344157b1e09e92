"""GPU tests of cm.attention (torch, CUDA, sm90 kernels): forward and autograd against a
float64 dense reference, every argument error, torch.compile(fullgraph=True) without
recompiles for new parameter values, and CUDA graph replay. Skipped without torch, a GPU or a
build with the CUDA kernels."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
import compilemask as cm  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if torch.cuda.get_device_capability() < (9, 0):
    pytest.skip("the kernels need an sm_90 (Hopper) GPU", allow_module_level=True)
if not cm.cuda_available():
    pytest.skip("compilemask was built without the CUDA kernels", allow_module_level=True)

DEVICE = torch.device("cuda", torch.cuda.current_device())


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).tolist()


def hstu(n, lengths, ctx=4, targets=3):
    assert sum(lengths) == n
    return cm.masks.hstu(offsets(lengths), ctx=ctx, targets=targets)


MASKS = {
    "causal": lambda n: cm.masks.causal(),
    "sliding": lambda n: cm.masks.sliding(97),
    "doc_causal": lambda n: cm.masks.doc_causal(offsets([n // 3, n // 2, n - n // 3 - n // 2])),
    "hstu": lambda n: hstu(n, [n // 4, n // 4, n - 2 * (n // 4)]),
    "shared_prefix": lambda n: cm.masks.shared_prefix(n // 4, [n // 4, n // 4, n - 3 * (n // 4)]),
    "clear": lambda n: cm.masks.clear(n - 20 * 20, 20, 5),
}


def reference(q, k, v, visible, scale, dout):
    """Float64 dense attention in [B, H, S, D] with autograd; visible [Bm, Hm, Nq, Nk]."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kh, vh = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = torch.where(visible, scale * q @ kh.transpose(-1, -2), float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.where(visible, torch.exp(s - torch.where(lse.isinf(), 0, lse)[..., None]), 0)
    out = p @ vh
    out.backward(dout.double())
    return out.detach(), lse.detach(), q.grad, k.grad, v.grad


def visible_of(plan):
    masks = [[torch.from_numpy(plan.to_dense(b, h)) for h in range(plan.heads)]
             for b in range(plan.batch)]
    return torch.stack([torch.stack(row) for row in masks]).to(DEVICE)


def assert_close_to(got, want, low_precision_error, name):
    """FlashAttention's rule: the kernel's error against float64 is at most a few times that
    of the same computation done by torch in the input dtype, plus a small floor."""
    err = (got.double() - want).abs().max().item()
    assert err <= 3 * low_precision_error + 2e-3, f"{name}: error {err} vs {low_precision_error}"


def low_precision_error(q, k, v, visible, scale, want_out):
    group = q.shape[1] // k.shape[1]
    kh, vh = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = torch.where(visible, (q @ kh.transpose(-1, -2)).float() * scale, float("-inf"))
    p = torch.nan_to_num(torch.softmax(s, -1)).to(q.dtype)
    return ((p @ vh).double() - want_out).abs().max().item()


def to_bhsd(x, layout):
    return x if layout == "bhsd" else x.transpose(1, 2)


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("dtype, dim", [(torch.bfloat16, 128), (torch.float16, 64)])
def test_forward_and_backward_match_float64(mask, layout, dtype, dim):
    torch.manual_seed(0)
    n, batch, heads_q, heads_kv = 700, 2, 4, 2
    plan = MASKS[mask](n).specialize(nq=n, device=DEVICE)
    shape_q = (batch, n, heads_q, dim) if layout == "bshd" else (batch, heads_q, n, dim)
    shape_k = (batch, n, heads_kv, dim) if layout == "bshd" else (batch, heads_kv, n, dim)
    q = torch.randn(shape_q, device=DEVICE, dtype=dtype, requires_grad=True)
    k = torch.randn(shape_k, device=DEVICE, dtype=dtype, requires_grad=True)
    v = torch.randn(shape_k, device=DEVICE, dtype=dtype, requires_grad=True)
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout=layout)
    dout = torch.randn_like(out)
    out.backward(dout)
    scale = 1 / math.sqrt(dim)
    visible = visible_of(plan)
    qb, kb, vb, db = (to_bhsd(x, layout) for x in (q, k, v, dout))
    want = reference(qb, kb, vb, visible, scale, db)
    lp = low_precision_error(qb.detach(), kb.detach(), vb.detach(), visible, scale, want[0])
    assert_close_to(to_bhsd(out, layout), want[0], lp, "out")
    finite = torch.isfinite(want[1])
    assert torch.equal(torch.isfinite(lse), finite)
    torch.testing.assert_close(lse[finite].double(), want[1][finite], atol=1e-3, rtol=1e-4)
    grads = [to_bhsd(x.grad, layout) for x in (q, k, v)]
    for name, g, w in zip(["dq", "dk", "dv"], grads, want[2:]):
        # The backward runs in float32 from low-precision inputs: allow the input rounding.
        assert_close_to(g, w, 4 * lp * max(1.0, w.abs().max().item()), name)


def test_nq_differs_from_nk_and_a_custom_scale():
    torch.manual_seed(1)
    plan = cm.masks.causal().specialize(nq=300, nk=520, device=DEVICE)
    q = torch.randn(1, 300, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, 520, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, 520, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    out = cm.attention(q, k, v, plan, scale=0.05)
    dout = torch.randn_like(out)
    out.backward(dout)
    want = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), visible_of(plan),
                     0.05, dout.transpose(1, 2))
    torch.testing.assert_close(out.transpose(1, 2).double(), want[0], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(q.grad.transpose(1, 2).double(), want[2], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(k.grad.transpose(1, 2).double(), want[3], atol=2e-2, rtol=2e-2)


def test_jagged_layouts_match_the_padded_layout():
    torch.manual_seed(2)
    n, heads, dim = 384, 2, 64
    plan = MASKS["hstu"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(2, n, heads, dim, device=DEVICE, dtype=torch.bfloat16)
               for _ in range(3))
    want = cm.attention(q, k, v, plan)
    # One sequence as [T, H, D] without offsets.
    one = cm.attention(q[0], k[0], v[0], plan)
    torch.testing.assert_close(one, want[0], atol=0, rtol=0)
    # Both sequences packed with a gap of 16 rows between them, addressed by offsets.
    gap = torch.zeros(16, heads, dim, device=DEVICE, dtype=torch.bfloat16)
    packed = [torch.cat([x[0], gap, x[1]]).requires_grad_() for x in (q, k, v)]
    starts = torch.tensor([0, n + 16], device=DEVICE, dtype=torch.int32)
    out = cm.attention(*packed, plan, offsets=starts)
    torch.testing.assert_close(out[:n], want[0], atol=0, rtol=0)
    torch.testing.assert_close(out[n + 16:], want[1], atol=0, rtol=0)
    assert not out[n:n + 16].any()
    # Gradients of the packed call equal those of the padded call, and are 0 in the gap.
    dout = torch.randn_like(out)
    out.backward(dout)
    padded = [x.detach().requires_grad_() for x in (q, k, v)]
    cm.attention(*padded, plan).backward(torch.stack([dout[:n], dout[n + 16:]]))
    for p, d in zip(packed, padded):
        torch.testing.assert_close(p.grad[:n], d.grad[0], atol=1e-2, rtol=1e-2)
        torch.testing.assert_close(p.grad[n + 16:], d.grad[1], atol=1e-2, rtol=1e-2)
        assert not p.grad[n:n + 16].any()


def test_fully_masked_rows_give_zero_output_and_no_nan():
    mask = cm.compile("mask late() { q in all: k in [0, diag - 200] }")
    plan = mask.specialize(nq=256, device=DEVICE)
    q, k, v = (torch.randn(1, 256, 1, 64, device=DEVICE, dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    out, lse = cm.attention(q, k, v, plan, return_lse=True)
    out.sum().backward()
    assert not out[:, :200].any() and torch.isneginf(lse[:, :, :200]).all()
    assert all(torch.isfinite(x.grad).all() for x in (q, k, v))
    assert not q.grad[:, :200].any()


# ---- errors ----------------------------------------------------------------------------------

def good(n=256, heads=2, dim=64, dtype=torch.bfloat16):
    return [torch.randn(1, n, heads, dim, device=DEVICE, dtype=dtype) for _ in range(3)]


PLAN_256 = None


def plan_256():
    global PLAN_256
    if PLAN_256 is None:
        PLAN_256 = cm.masks.causal().specialize(nq=256, device=DEVICE)
    return PLAN_256


ERRORS = [
    ("q not a tensor", lambda q, k, v: ([1.0], k, v, {}), TypeError, "q must be a torch.Tensor"),
    ("float32", lambda q, k, v: (q.float(), k, v, {}), TypeError, "q has dtype torch.float32"),
    ("mixed dtypes", lambda q, k, v: (q, k.half(), v, {}), TypeError, "k has dtype|one dtype"),
    ("cpu", lambda q, k, v: (q.cpu(), k, v, {}), ValueError, "q is on cpu"),
    ("head dim", lambda q, k, v: (q[..., :32].contiguous(), k, v, {}), ValueError, "head dim 32"),
    ("k head dim", lambda q, k, v: (q, k[..., :32].contiguous(), v[..., :32].contiguous(), {}),
     ValueError, "head dim 32 but q has 64"),
    ("last dim", lambda q, k, v: (q.transpose(-1, -2).contiguous().transpose(-1, -2), k, v, {}),
     ValueError, "last \\(head\\) dimension must be contiguous"),
    ("unaligned", lambda q, k, v: (torch.randn(1, 256, 2, 65, device=DEVICE,
                                               dtype=torch.bfloat16)[..., 1:], k, v, {}),
     ValueError, "multiples of 8"),
    ("2-D", lambda q, k, v: (q[0, 0], k, v, {}), ValueError, "q must be 4-D"),
    ("k/v shapes", lambda q, k, v: (q, k, v[:, :128], {}), ValueError, "k and v must have one shape"),
    ("lengths", lambda q, k, v: (q[:, :128], k, v, {}), ValueError, "specialized for nq=256"),
    ("heads", lambda q, k, v: (q, k.repeat(1, 1, 2, 1)[:, :, :3].contiguous(),
                               v.repeat(1, 1, 2, 1)[:, :, :3].contiguous(), {}),
     ValueError, "multiple of k's and v's 3"),
    ("batch", lambda q, k, v: (q, torch.cat([k, k]), torch.cat([v, v]), {}), ValueError,
     "q has batch 1 but k and v have 2"),
    ("layout", lambda q, k, v: (q, k, v, {"layout": "sbhd"}), ValueError, "layout must be"),
    ("scale", lambda q, k, v: (q, k, v, {"scale": -1.0}), ValueError, "scale must be"),
    ("offsets on 4-D", lambda q, k, v: (q, k, v, {"offsets": torch.zeros(1, dtype=torch.int32,
                                                                       device=DEVICE)}),
     ValueError, "jagged 3-D"),
    ("offsets dtype", lambda q, k, v: (q[0], k[0], v[0], {"offsets": torch.zeros(
        1, dtype=torch.int64, device=DEVICE)}), TypeError, "offsets must be an int32 tensor"),
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


# ---- torch.compile and CUDA graphs -----------------------------------------------------------

def hstu_plans(n, count):
    """Plans of one mask and shape whose parameter values differ."""
    rng = np.random.default_rng(3)
    plans = []
    for _ in range(count):
        cuts = np.sort(rng.choice(np.arange(16, n - 16), size=3, replace=False))
        lengths = np.diff(np.concatenate([[0], cuts, [n]]))
        plans.append(hstu(n, lengths.tolist(), ctx=int(rng.integers(1, 6)),
                          targets=int(rng.integers(1, 6))).specialize(nq=n, device=DEVICE))
    return plans


def test_torch_compile_fullgraph_does_not_recompile_for_new_parameter_values():
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")

    @torch.compile(backend=counter, fullgraph=True)
    def layer(q, k, v, plan):
        return cm.attention(q, k, v, plan).float().square().sum()

    n = 512
    q, k, v = (torch.randn(2, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    for plan in hstu_plans(n, 4):
        loss = layer(q, k, v, plan)
        grads = torch.autograd.grad(loss, (q, k, v))
        eager = cm.attention(q, k, v, plan).float().square().sum()
        eager_grads = torch.autograd.grad(eager, (q, k, v))
        torch.testing.assert_close(loss, eager, rtol=1e-3, atol=1e-2)
        for g, e in zip(grads, eager_grads):
            torch.testing.assert_close(g, e, rtol=2e-2, atol=2e-2)
    assert counter.frame_count == 1, f"compiled {counter.frame_count} times for 4 plans"


def test_cuda_graph_replay_with_new_inputs():
    n = 640
    plan = MASKS["doc_causal"](n).specialize(nq=n, device=DEVICE)
    static = [torch.randn(2, n, 4, 128, device=DEVICE, dtype=torch.bfloat16) for _ in range(3)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):  # warm up outside the capture
            cm.attention(*static, plan)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = cm.attention(*static, plan)
    for seed in range(3):
        torch.manual_seed(seed)
        fresh = [torch.randn_like(x) for x in static]
        for s, f in zip(static, fresh):
            s.copy_(f)
        graph.replay()
        torch.testing.assert_close(static_out, cm.attention(*fresh, plan), atol=0, rtol=0)
