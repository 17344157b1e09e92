"""GPU tests of cm.attention (torch, CUDA, sm90 forward and backward kernels): forward and
autograd (including the LSE's gradient) against a float64 dense reference at head dims 40 to
256, also through plans with a token order and with split keys; the forward on paged K/V
against the same float64 reference; bitwise determinism, every argument error,
torch.compile(fullgraph=True) of forward and backward without recompiles for new parameter
values, and CUDA graph replay of forward and backward.
Skipped without torch, a GPU or a build with the CUDA kernels."""
from __future__ import annotations

import math
import warnings

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
    "clear": lambda n: cm.masks.clear(n - 20 * 20, 20, 5, strip=None),
    "clear_strips": lambda n: cm.masks.clear(n - 20 * 20, 20, 5, strip=6),
    "neighbourhood_2d": lambda n: cm.masks.neighbourhood_2d(20, n // 20, 3, 4, "ellipse",
                                                            strip=None),
    "sinks_window": lambda n: cm.masks.sinks_window(4, 97),
    "chunked_causal": lambda n: cm.masks.chunked_causal(200),
    "prefix_lm": lambda n: cm.masks.prefix_lm(n // 5),
    "block_causal_video": lambda n: cm.masks.block_causal_video(n // 7),
    "row_intervals": lambda n: cm.masks.row_intervals(*random_bounds(n)),
}


def random_bounds(n):
    """Key intervals for n rows: some empty, some reaching past either end, the rest anywhere."""
    rng = np.random.default_rng(n)
    starts = rng.integers(-50, n, size=n)
    return starts, starts + rng.integers(-10, 300, size=n)


def reference(q, k, v, visible, scale, dout=None, dlse=None, dtype=torch.float64, softcap=None):
    """Dense attention in [B, H, S, D] computed in `dtype` with autograd, the logits capped at
    softcap * tanh(logit / softcap) when softcap is set; visible [Bm, Hm, Nq, Nk] broadcasts.
    Returns out, lse (-inf where a row sees no key) and the gradients dq, dk, dv of
    sum(out * dout) + sum(lse * dlse) over the rows that see a key (None without dout)."""
    q, k, v = (x.detach().to(dtype).requires_grad_(dout is not None) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kh, vh = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    seen = visible.any(-1, keepdim=True)
    logits = scale * q @ kh.transpose(-1, -2)
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    s = torch.where(visible, logits, float("-inf"))
    s = torch.where(seen, s, 0)  # rows that see nothing: finite here, cut off below
    lse = torch.logsumexp(s, -1, keepdim=True)
    out = torch.where(visible, torch.exp(s - lse), 0) @ vh
    if dout is not None:
        outputs, grads = [out], [dout.to(dtype)]
        if dlse is not None:
            outputs.append(torch.where(seen, lse, 0)[..., 0])
            grads.append(dlse.to(dtype))
        torch.autograd.backward(outputs, grads)
    lse = torch.where(seen, lse, float("-inf"))[..., 0]
    return out.detach(), lse.detach(), q.grad, k.grad, v.grad


def visible_of(plan):
    masks = [[torch.from_numpy(plan.to_dense(b, h)) for h in range(plan.heads)]
             for b in range(plan.batch)]
    return torch.stack([torch.stack(row) for row in masks]).to(DEVICE)


def check_against_references(got, q, k, v, visible, scale, dout=None, dlse=None, softcap=None):
    """FlashAttention's rule for (out, dq, dk, dv) in [B, H, S, D] (got: out alone without
    dout): the kernel's error against float64 is at most 3 times that of the same dense
    computation done by torch in the input dtype, plus a small floor relative to the values'
    size. Returns the float64 reference (out, lse, dq, dk, dv)."""
    exact = reference(q, k, v, visible, scale, dout, dlse, softcap=softcap)
    rounded = reference(q, k, v, visible, scale, dout, dlse, dtype=q.dtype, softcap=softcap)
    for name, g, want, low in zip(["out", "dq", "dk", "dv"], got, exact[:1] + exact[2:],
                                  rounded[:1] + rounded[2:]):
        bound = 3 * (low.double() - want).abs().max().item()
        bound += 2e-3 * max(1.0, want.abs().max().item())
        err = (g.double() - want).abs().max().item()
        assert err <= bound, f"{name}: error {err} above {bound}"
    return exact


def assert_lse_matches(lse, want):
    """lse is -inf exactly where the float64 reference `want` is, and close to it elsewhere."""
    finite = torch.isfinite(want)
    assert torch.equal(torch.isfinite(lse), finite)
    torch.testing.assert_close(lse[finite].double(), want[finite], atol=1e-3, rtol=1e-4)


def to_bhsd(x, layout):
    return x if layout == "bhsd" else x.transpose(1, 2)


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("dtype, dim", [(torch.bfloat16, 128), (torch.float16, 64),
                                        (torch.bfloat16, 96), (torch.float16, 40),
                                        (torch.bfloat16, 256), (torch.float16, 200)])
def test_forward_and_backward_match_float64(mask, layout, dtype, dim):
    torch.manual_seed(0)
    n, batch, heads_q, heads_kv = 700, 2, 4, 2  # GQA: dk, dv summed over 2 query heads
    plan = MASKS[mask](n).specialize(nq=n, device=DEVICE)
    shape_q = (batch, n, heads_q, dim) if layout == "bshd" else (batch, heads_q, n, dim)
    shape_k = (batch, n, heads_kv, dim) if layout == "bshd" else (batch, heads_kv, n, dim)
    q = torch.randn(shape_q, device=DEVICE, dtype=dtype, requires_grad=True)
    k = torch.randn(shape_k, device=DEVICE, dtype=dtype, requires_grad=True)
    v = torch.randn(shape_k, device=DEVICE, dtype=dtype, requires_grad=True)
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout=layout)
    dout = torch.randn_like(out)
    out.backward(dout)
    got = [to_bhsd(x, layout) for x in (out, q.grad, k.grad, v.grad)]
    exact = check_against_references(got, *(to_bhsd(x, layout) for x in (q, k, v)),
                                     visible_of(plan), 1 / math.sqrt(dim), to_bhsd(dout, layout))
    assert_lse_matches(lse, exact[1])


@pytest.mark.parametrize("mask", ["causal", "doc_causal", "clear", "sliding"])
@pytest.mark.parametrize("dtype, dim", [(torch.bfloat16, 128), (torch.float16, 64),
                                        (torch.bfloat16, 256)])
def test_soft_capped_logits_match_float64(mask, dtype, dim):
    # The logits have a standard deviation of 1: a cap of 1.5 bends them. The LSE's gradient
    # goes through the cap too.
    torch.manual_seed(2)
    n, softcap = 700, 1.5
    plan = MASKS[mask](n).specialize(nq=n, device=DEVICE)
    q = torch.randn(2, 4, n, dim, device=DEVICE, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(2, 2, n, dim, device=DEVICE, dtype=dtype, requires_grad=True)
            for _ in range(2))
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd", softcap=softcap)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    torch.autograd.backward([out, lse], [dout, dlse])
    exact = check_against_references([out, q.grad, k.grad, v.grad], q, k, v, visible_of(plan),
                                     1 / math.sqrt(dim), dout, dlse, softcap)
    assert_lse_matches(lse, exact[1])
    uncapped = cm.attention(q, k, v, plan, layout="bhsd")
    assert (uncapped - out).abs().max() > 0.1, "the cap changed nothing: not applied"


@pytest.mark.parametrize("mask, nq, nk", [("causal", 3, 3000), ("sliding", 17, 2500),
                                          ("causal", 200, 2100), ("causal", 300, 200)])
@pytest.mark.parametrize("num_splits", [0, 1, 6])
def test_split_keys_match_float64(mask, nq, nk, num_splits):
    # Few query rows against many keys, rows aligned bottom-right: the automatic count splits
    # these (fewer work items than SMs); 6 parts split every row, 1 none. With nq > nk the first
    # rows see no key. The backward reads the merged LSE, so its gradients check the merge too.
    torch.manual_seed(3)
    plan = MASKS[mask](nq).specialize(nq=nq, nk=nk, device=DEVICE)
    q = torch.randn(2, 4, nq, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 2, nk, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd", num_splits=num_splits)
    dout = torch.randn_like(out)
    out.backward(dout)
    exact = check_against_references([out, q.grad, k.grad, v.grad], q, k, v, visible_of(plan),
                                      1 / math.sqrt(128), dout)
    assert_lse_matches(lse, exact[1])
    finite = torch.isfinite(exact[1])
    assert torch.equal(out[..., ~finite[0, 0], :], torch.zeros_like(out[..., ~finite[0, 0], :]))


TOKEN_ORDERS = {
    # clear_strips' image in 6-column strips, the tensors' image row-major.
    "strips": lambda n: cm.masks.clear(n - 20 * 20, 20, 5, strip=6, reorder=True),
    # Each of 7 frames of 10 x 10 tokens in 4-column strips.
    "video_strips": lambda n: cm.masks.video_neighbourhood(7, 10, n // 70, 2, 3, 4, strip=4,
                                                           reorder=True),
    "random": lambda n: MASKS["doc_causal"](n).with_token_order(
        lambda nq: np.random.default_rng(5).permutation(nq)),
}


@pytest.mark.parametrize("order", sorted(TOKEN_ORDERS))
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_a_plan_with_a_token_order_attends_in_the_tensors_order(order, layout):
    """Row i of the mask's sequence is token order[i] of q, k and v: the mask in the tensors'
    order is the plan's with rows and columns at the inverse positions."""
    torch.manual_seed(1)
    n, batch, heads_q, heads_kv, dim = 700, 2, 4, 2, 128
    plan = TOKEN_ORDERS[order](n).specialize(nq=n, device=DEVICE)
    token_order = plan.token_order
    shape_q = (batch, n, heads_q, dim) if layout == "bshd" else (batch, heads_q, n, dim)
    shape_k = (batch, n, heads_kv, dim) if layout == "bshd" else (batch, heads_kv, n, dim)
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for shape in (shape_q, shape_k, shape_k))
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout=layout)
    dout = torch.randn_like(out)
    out.backward(dout)
    position = torch.from_numpy(np.argsort(token_order)).to(DEVICE)  # of each token
    visible = visible_of(plan)[..., position, :][..., position]
    assert not torch.equal(visible, visible_of(plan)), "the order must change the mask"
    got = [to_bhsd(x, layout) for x in (out, q.grad, k.grad, v.grad)]
    exact = check_against_references(got, *(to_bhsd(x, layout) for x in (q, k, v)), visible,
                                     1 / math.sqrt(dim), to_bhsd(dout, layout))
    assert_lse_matches(lse, exact[1])


def test_moving_a_plan_to_the_device_does_not_wait_for_the_gpu():
    """A plan made per training step is uploaded while the GPU still runs earlier work, and the
    kernels queued after it read the uploaded descriptor and token order."""
    torch.manual_seed(6)
    n = 500
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    host = cm.masks.clear(n - 20 * 20, 20, 5, strip=6, reorder=True).specialize(nq=n)
    host.to(DEVICE)  # the pinned-memory allocator's first blocks, which may sync, come here
    torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time queued ahead of the upload
    plan = host.to(DEVICE)
    assert not torch.cuda.current_stream().query(), "the upload waited for the queued GPU work"
    out = cm.attention(q, k, v, plan)
    position = torch.from_numpy(np.argsort(plan.token_order)).to(DEVICE)
    visible = visible_of(plan)[..., position, :][..., position]
    want = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), visible, 1 / 8,
                     torch.zeros_like(q).transpose(1, 2))[0]
    torch.testing.assert_close(out.transpose(1, 2).double(), want, atol=2e-2, rtol=2e-2)


def test_a_pickled_plan_attends_as_the_original_once_moved_to_the_device():
    """Plans made on the host (DataLoader workers) pickle to the training process, which moves
    them to its device: the same outputs, bit for bit, as the plan they were pickled from."""
    import pickle

    torch.manual_seed(2)
    n = 700
    host = TOKEN_ORDERS["strips"](n).specialize(nq=n, heads=4)
    back = pickle.loads(pickle.dumps(host))
    assert back.device is None
    with pytest.raises(ValueError, match="device"):
        cm.attention(*(torch.randn(1, n, 4, 64, device=DEVICE, dtype=torch.bfloat16)
                       for _ in range(3)), back)
    q, k, v = (torch.randn(1, n, 4, 64, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    assert torch.equal(cm.attention(q, k, v, back.to(DEVICE)),
                       cm.attention(q, k, v, host.to(DEVICE)))


def test_clear_by_default_reorders_where_strips_are_faster_and_means_the_same():
    """At 6416 tokens (an 80 x 80 image, radius 16) cm.masks.clear's default takes the strip
    plan with its token order; on row-major tensors it computes the row-major mask."""
    torch.manual_seed(2)
    text, side, radius, dim = 16, 80, 16, 64
    n = text + side * side
    plan = cm.masks.clear(text, side, radius).specialize(nq=n, device=DEVICE)
    assert plan.token_order is not None, "strips are estimated faster at this size"
    row_major = cm.masks.clear(text, side, radius, strip=None).specialize(nq=n)
    q, k, v = (torch.randn(1, n, heads, dim, device=DEVICE, dtype=torch.bfloat16,
                           requires_grad=True) for heads in (2, 1, 1))
    out = cm.attention(q, k, v, plan)
    dout = torch.randn_like(out)
    out.backward(dout)
    got = [x.transpose(1, 2) for x in (out, q.grad, k.grad, v.grad)]
    check_against_references(got, *(x.transpose(1, 2) for x in (q, k, v)), visible_of(row_major),
                             1 / math.sqrt(dim), dout.transpose(1, 2))


@pytest.mark.parametrize("dim", [64, 256])
@pytest.mark.parametrize("packing", ["offsets", "k_offsets", "offsets without gaps",
                                     "one sequence"])
@pytest.mark.parametrize("mask", ["doc_causal", "token order"])
def test_jagged_inputs_give_the_batch_they_pack(mask, packing, dim):
    """Jagged q, k, v and dO holding the sequences of a [B, S, H, D] batch, with NaN in the rows
    between them that no sequence owns, give that batch's out, LSE and (deterministic) gradients
    bit for bit, 0 and -inf on the rows outside, and no gradient there. The kernels read the
    jagged rows where they are (doc_causal: a sequence's last key tile and its last 64-row query
    step take rows of the gap, and at head dim 256 a whole 64-key item lies past the end); a plan
    with a token order gathers each sequence first. Without gaps the sequences cover every row."""
    torch.manual_seed(3)
    n, heads_q, heads_kv = 300, 4, 2
    batch = 1 if packing == "one sequence" else 2
    gap = 5 if packing in ("offsets", "k_offsets") else 0
    plan = (MASKS["doc_causal"](n) if mask == "doc_causal"
            else TOKEN_ORDERS["random"](n)).specialize(nq=n, device=DEVICE)
    q4, k4, v4 = (torch.randn(batch, n, heads, dim, device=DEVICE, dtype=torch.bfloat16)
                  for heads in (heads_q, heads_kv, heads_kv))
    dout4, dlse4 = torch.randn_like(q4), torch.randn(batch, heads_q, n, device=DEVICE)
    stride = n + gap
    starts = torch.arange(batch, device=DEVICE, dtype=torch.int32) * stride
    rows = (starts.long()[:, None] + torch.arange(n, device=DEVICE)[None, :]).flatten()

    def packed(x, fill):  # the batch's sequences at `starts`, `fill` between them
        t = torch.full((batch * stride, *x.shape[2:]), fill, device=DEVICE, dtype=x.dtype)
        return t.index_copy(0, rows, x.flatten(0, 1))

    want = [x.detach().requires_grad_() for x in (q4, k4, v4)]
    got = [packed(x, math.nan).requires_grad_() for x in (q4, k4, v4)]
    kwargs = {} if packing == "one sequence" else {"offsets": starts}
    if packing == "k_offsets":
        kwargs = {"offsets": starts, "k_offsets": starts.clone()}
    out4, lse4 = cm.attention(*want, plan, return_lse=True, deterministic=True)
    torch.autograd.backward([out4, lse4], [dout4, dlse4])
    out, lse = cm.attention(*got, plan, return_lse=True, deterministic=True, **kwargs)
    torch.autograd.backward([out, lse], [packed(dout4, math.nan),
                                         packed(dlse4.transpose(1, 2), math.nan).transpose(0, 1)])
    outside = torch.ones(batch * stride, dtype=torch.bool, device=DEVICE)
    outside[rows] = False
    assert torch.equal(out.index_select(0, rows), out4.flatten(0, 1))
    assert torch.equal(lse.index_select(1, rows), lse4.transpose(0, 1).flatten(1))
    for g, w in zip(got, want):
        assert torch.equal(g.grad.index_select(0, rows), w.grad.flatten(0, 1))
        assert not g.grad[outside].any()
    assert not out[outside].any() and bool((lse[:, outside] == float("-inf")).all())
    assert (gap == 0) == (not outside.any())


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize("mask", ["doc_causal", "token order"])
def test_offsets_outside_the_tensors_give_nan_on_their_rows_inside(mask, deterministic):
    """A sequence whose offsets put rows outside q (or k and v) is not computed: its rows of out
    and the LSE that lie in the tensors are NaN, and so are its gradient rows there (0 through a
    plan with a token order, whose NaN output passes no gradient back); no other row changes (the
    other sequence's results and gradients as without it, bit for bit; the rows outside every
    sequence 0, and -inf in the LSE, also where the sequences' lengths add up to the rows of q
    and a bad offset leaves rows uncovered), and check_offsets=True raises instead."""
    torch.manual_seed(9)
    n, heads_q, heads_kv, dim = 300, 4, 2, 64
    plan = (MASKS["doc_causal"](n) if mask == "doc_causal"
            else TOKEN_ORDERS["random"](n)).specialize(nq=n, device=DEVICE)
    cases = {"q past the end": ([0, 2 * n + 10 - n // 2], [0, n], 2 * n + 10),
             "k before the start": ([0, n], [n, -5], 2 * n + 10),
             "q past the end of 2n rows": ([0, n + n // 2], [0, n], 2 * n)}
    for name, (q_starts, k_starts, total) in cases.items():
        q, k, v = (torch.randn(total, heads, dim, device=DEVICE, dtype=torch.bfloat16)
                   for heads in (heads_q, heads_kv, heads_kv))
        dout = torch.randn_like(q)
        offsets, k_offsets = (torch.tensor(x, dtype=torch.int32, device=DEVICE)
                              for x in (q_starts, k_starts))
        results = []
        for batch in (2, 1):  # both sequences, then the good one alone
            inputs = [x.detach().requires_grad_() for x in (q, k, v)]
            out, lse = cm.attention(*inputs, plan, return_lse=True, deterministic=deterministic,
                                    num_splits=1, offsets=offsets[:batch],
                                    k_offsets=k_offsets[:batch])
            out.backward(dout)
            results.append([out, lse.transpose(0, 1)] + [x.grad for x in inputs])
        with pytest.raises(ValueError, match="sequence 1's rows"):
            cm.attention(q, k, v, plan, offsets=offsets, k_offsets=k_offsets, check_offsets=True)
        rows = torch.arange(total, device=DEVICE)
        bad_q = (rows >= q_starts[1]) & (rows < q_starts[1] + n)
        bad_k = (rows >= k_starts[1]) & (rows < k_starts[1] + n)
        outside_q = ~bad_q & ((rows < q_starts[0]) | (rows >= q_starts[0] + n))
        outside_k = ~bad_k & ((rows < k_starts[0]) | (rows >= k_starts[0] + n))
        for index, (got, alone) in enumerate(zip(*results)):
            bad = bad_k if index >= 3 else bad_q  # dk and dv: the key rows
            outside = outside_k if index >= 3 else outside_q
            unseen = float("-inf") if index == 1 else 0.0  # the LSE's rows, the others'
            assert bool((got[outside] == unseen).all()), f"{name}: result {index} outside"
            if index >= 2 and mask == "token order":
                assert not got[bad].any(), f"{name}: gradient {index} not 0 on the bad rows"
            else:
                assert got[bad].isnan().all(), f"{name}: result {index} not NaN on the bad rows"
            if deterministic or index != 2:  # dq adds may come in another order by default
                assert torch.equal(got[~bad], alone[~bad]), f"{name}: result {index} changed"
            else:
                assert not got[~bad].isnan().any(), f"{name}: dq NaN on a good row"


@pytest.mark.parametrize("layout", ["bshd", "bhsd", "jagged"])
def test_the_lse_gradient_matches_float64(layout):
    torch.manual_seed(4)
    n, heads_q, heads_kv, dim = 520, 4, 1, 64
    plan = MASKS["doc_causal"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(1, heads, n, dim, device=DEVICE, dtype=torch.bfloat16)
               for heads in (heads_q, heads_kv, heads_kv))
    dout, dlse = torch.randn_like(q), torch.randn(1, heads_q, n, device=DEVICE)

    def as_layout(x):
        if layout == "bhsd":
            return x
        return x.transpose(1, 2) if layout == "bshd" else x[0].transpose(0, 1).contiguous()

    inputs = [as_layout(x).detach().requires_grad_() for x in (q, k, v)]
    out, lse = cm.attention(*inputs, plan, return_lse=True,
                            layout="bhsd" if layout == "bhsd" else "bshd")
    torch.autograd.backward([out, lse], [as_layout(dout), dlse[0] if layout == "jagged" else dlse])

    def back(x):
        if layout == "bhsd":
            return x
        return x.transpose(1, 2) if layout == "bshd" else x.transpose(0, 1)[None]

    got = [back(x) for x in (out, *(x.grad for x in inputs))]
    check_against_references(got, q, k, v, visible_of(plan), 1 / math.sqrt(dim), dout, dlse)


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


# Plans whose masks differ per head, or whose queries and keys are packed sequences of other
# lengths: (plan, nq, nk, query heads, kv heads).
SHAPED_PLANS = {
    "per_head_window": lambda: (cm.masks.per_head_window([1, 40, 300, 700]).specialize(
        nq=700, heads=4, device=DEVICE), 700, 700, 4, 2),
    "cross_attention": lambda: (cm.masks.cross_attention([0, 100, 260, 300], [0, 30, 90, 520])
                                .specialize(nq=300, nk=520, device=DEVICE), 300, 520, 2, 1),
}


@pytest.mark.parametrize("case", sorted(SHAPED_PLANS))
def test_per_head_masks_and_packed_cross_attention_match_float64(case):
    torch.manual_seed(2)
    plan, nq, nk, heads_q, heads_kv = SHAPED_PLANS[case]()
    q = torch.randn(2, nq, heads_q, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, nk, heads_kv, 64, device=DEVICE, dtype=torch.bfloat16,
                        requires_grad=True) for _ in range(2))
    out = cm.attention(q, k, v, plan)
    dout = torch.randn_like(out)
    out.backward(dout)
    got = [x.transpose(1, 2) for x in (out, q.grad, k.grad, v.grad)]
    check_against_references(got, *(x.transpose(1, 2) for x in (q, k, v)), visible_of(plan),
                             1 / 8, dout.transpose(1, 2))


def test_a_padded_batch_leaves_the_padding_out():
    """Per-batch-row masks: a right-padded batch, one row all padding. The real rows match
    float64; padding rows give out 0 and LSE -inf, and padding tokens get zero gradients."""
    torch.manual_seed(4)
    n, lengths = 700, [700, 0, 333]
    plan = cm.masks.padded(lengths).specialize(nq=n, batch=3, device=DEVICE)
    q = torch.randn(3, n, 4, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(3, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    out, lse = cm.attention(q, k, v, plan, return_lse=True)
    dout = torch.randn_like(out)
    out.backward(dout)
    got = [x.transpose(1, 2) for x in (out, q.grad, k.grad, v.grad)]
    check_against_references(got, *(x.transpose(1, 2) for x in (q, k, v)), visible_of(plan),
                             1 / 8, dout.transpose(1, 2))
    for b, length in enumerate(lengths):
        for x in (out, q.grad, k.grad, v.grad):
            assert torch.equal(x[b, length:], torch.zeros_like(x[b, length:])), b
        assert torch.isneginf(lse[b, :, length:]).all() and torch.isfinite(lse[b, :, :length]).all()


def test_from_dense_takes_a_boolean_mask_on_the_gpu():
    mask = torch.ones(300, 300, dtype=torch.bool, device=DEVICE).tril()
    plan = cm.masks.from_dense(mask).specialize(nq=300, device=DEVICE)
    assert plan.descriptor.tobytes() == cm.masks.causal().specialize(nq=300).descriptor.tobytes()
    batched = torch.stack([mask, mask.flip(0)])  # a second batch row: row q sees k <= 299 - q
    plan = cm.masks.from_dense(batched).specialize(nq=300, batch=2)
    assert torch.equal(torch.from_numpy(plan.to_dense(1, 0)).to(DEVICE), batched[1])
    mask[5, 200] = True  # a second run: two intervals per row
    plan = cm.masks.from_dense(mask).specialize(nq=300)
    assert torch.equal(torch.from_numpy(plan.to_dense()).to(DEVICE), mask)
    mask[5, 250] = True
    with pytest.raises(ValueError, match="row 5 sees 3 separate runs of keys"):
        cm.masks.from_dense(mask)


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
    # Both sequences packed with a gap of 16 NaN rows between them, addressed by offsets.
    gap = torch.full((16, heads, dim), math.nan, device=DEVICE, dtype=torch.bfloat16)
    packed = [torch.cat([x[0], gap, x[1]]).requires_grad_() for x in (q, k, v)]
    starts = torch.tensor([0, n + 16], device=DEVICE, dtype=torch.int32)
    out = cm.attention(*packed, plan, offsets=starts)
    torch.testing.assert_close(out[:n], want[0], atol=0, rtol=0)
    torch.testing.assert_close(out[n + 16:], want[1], atol=0, rtol=0)
    assert not out[n:n + 16].any()
    # Gradients of the packed call equal those of the padded call, and are 0 in the gap.
    dout = torch.randn_like(out)
    dout[n:n + 16] = math.nan
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


def test_deterministic_gradients_are_bitwise_identical_over_10_runs():
    torch.manual_seed(5)
    # Up to 8 key tiles add into a query tile's dQ; 32 key tiles leave the SMs idle, so each kv
    # head's 2 query heads run as 2 head splits whose dK and dV a second kernel sums.
    n = 1024
    plan = MASKS["causal"](n).specialize(nq=n, device=DEVICE)
    q = torch.randn(2, n, 4, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, n, 2, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    dout = torch.randn_like(q)

    def grads(deterministic):
        out = cm.attention(q, k, v, plan, deterministic=deterministic)
        return torch.autograd.grad(out, (q, k, v), dout)

    first = grads(True)
    for _ in range(9):
        for g, f in zip(grads(True), first):
            assert torch.equal(g, f)
    # The fast mode differs only in the order of the dQ additions.
    for g, f in zip(grads(False), first):
        torch.testing.assert_close(g, f, atol=2e-2, rtol=2e-2)


def test_views_off_a_16_byte_boundary_are_copied_not_misread():
    torch.manual_seed(6)
    plan = plan_256()
    flat = [torch.randn(256 * 2 * 64 + 1, device=DEVICE, dtype=torch.float16) for _ in range(3)]
    shifted = [x[1:].view(1, 256, 2, 64).detach().requires_grad_() for x in flat]  # 2 bytes off
    aligned = [x.detach().clone().requires_grad_() for x in shifted]
    dout = torch.randn(1, 256, 2, 64, device=DEVICE, dtype=torch.float16)
    for inputs in (shifted, aligned):
        cm.attention(*inputs, plan, deterministic=True).backward(dout)
    assert torch.equal(cm.attention(*shifted, plan), cm.attention(*aligned, plan))
    for s_, a in zip(shifted, aligned):
        assert torch.equal(s_.grad, a.grad)


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
    ("head dim", lambda q, k, v: (torch.randn(1, 256, 2, 40, device=DEVICE,
                                              dtype=torch.bfloat16)[..., :36], k, v, {}),
     ValueError, "head dim 36; the kernels support a multiple of 8 from 8 to 256"),
    ("wide head dim", lambda q, k, v: (torch.randn(1, 256, 2, 264, device=DEVICE,
                                                   dtype=torch.bfloat16), k, v, {}),
     ValueError, "head dim 264; the kernels support a multiple of 8 from 8 to 256"),
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
    ("deterministic", lambda q, k, v: (q, k, v, {"deterministic": 1}), TypeError,
     "deterministic must be a bool"),
    ("scale", lambda q, k, v: (q, k, v, {"scale": -1.0}), ValueError, "scale must be"),
    ("softcap", lambda q, k, v: (q, k, v, {"softcap": 0.0}), ValueError,
     "softcap must be None or a finite number > 0"),
    ("softcap nan", lambda q, k, v: (q, k, v, {"softcap": math.nan}), ValueError,
     "softcap must be None or a finite number > 0"),
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


# ---- paged K/V -------------------------------------------------------------------------------

def cache_lengths(lengths, nq):
    """Decoding a batch of caches of other lengths: the nq rows of sequence b are its last
    tokens, row i token lengths[b] - nq + i, and each sees its cache up to itself."""
    ends = np.asarray(lengths)[:, None] - nq + 1 + np.arange(nq)[None, :]
    return cm.masks.row_intervals(np.zeros_like(ends), ends)


# Plans of (nq, nk, batch). padded and cache_lengths give the sequences other lengths: their
# pages past a sequence's keys, and sliding's pages before the window, are seen by no row.
PAGED_PLANS = {
    "causal": lambda nq, nk, batch: cm.masks.causal().specialize(nq=nq, nk=nk, device=DEVICE),
    "sliding": lambda nq, nk, batch: cm.masks.sliding(300).specialize(nq=nq, nk=nk,
                                                                      device=DEVICE),
    "padded": lambda nq, nk, batch: cm.masks.padded([nk, nk // 2 + 3, 7][:batch]).specialize(
        nq=nq, nk=nk, batch=batch, device=DEVICE),
    "cache_lengths": lambda nq, nk, batch: cache_lengths([nk, nk // 3, nq + 40][:batch],
                                                         nq).specialize(nq=nq, nk=nk,
                                                                        batch=batch,
                                                                        device=DEVICE),
}


def random_page_table(seen, page_size, spare_pages):
    """(page table, pool pages) for sequences whose keys seen ([B, nk] bool) are the only ones
    any row sees: each page holding a seen key gets its own page of the pool, in a random
    order, with spare_pages pages left unused; pages without one get indices outside the pool
    (read as zeros), alternately -1 and past its end. Two more columns, past the sequence's
    pages and never read, point to an unused page."""
    batch, nk = seen.shape
    pages = -(-nk // page_size)
    used = torch.zeros(batch, pages * page_size, dtype=torch.bool, device=DEVICE)
    used[:, :nk] = seen
    used = used.view(batch, pages, page_size).any(-1)
    num_pages = int(used.sum()) + spare_pages
    shuffled = torch.randperm(num_pages, device=DEVICE).int()
    outside = torch.where(torch.arange(pages, device=DEVICE) % 2 == 0, -1, num_pages + 3)
    table = torch.full((batch, pages + 2), shuffled[-1].item(), dtype=torch.int32, device=DEVICE)
    table[:, :pages] = outside.int()
    table[:, :pages][used] = shuffled[:int(used.sum())]
    return table, num_pages


def paged_pool(x, seen, table, num_pages, page_size):
    """x [B, nk, H, D] in a pool [num_pages, page_size, H, D] of NaN: key j of sequence b at
    row j % page_size of page table[b, j // page_size], where that index is in the pool and
    some row sees the key (seen [B, nk]). The rows of each sequence's last page past nk and the
    keys no row sees stay NaN."""
    batch, nk = x.shape[:2]
    pages = -(-nk // page_size)
    padded = torch.full((batch, pages * page_size, *x.shape[2:]), float("nan"), dtype=x.dtype,
                        device=DEVICE)
    padded[:, :nk] = torch.where(seen[:, :, None, None], x, float("nan"))
    pool = torch.full((num_pages, page_size, *x.shape[2:]), float("nan"), dtype=x.dtype,
                      device=DEVICE)
    table = table[:, :pages]
    inside = (table >= 0) & (table < num_pages)
    pool[table[inside].long()] = padded.unflatten(1, (pages, page_size))[inside]
    return pool


# (dtype, head dim, query heads, kv heads, page size, nq, nk, plan, batch, layout)
PAGED_CASES = [
    (torch.bfloat16, 128, 32, 8, 16, 1, 1000, "causal", 2, "bshd"),
    (torch.float16, 64, 8, 1, 64, 17, 4097, "sliding", 2, "bshd"),
    (torch.bfloat16, 256, 32, 8, 128, 128, 300, "causal", 1, "bhsd"),
    (torch.float16, 96, 16, 4, 256, 1, 4097, "sliding", 3, "bhsd"),
    (torch.bfloat16, 128, 32, 8, 32, 17, 1000, "padded", 3, "bshd"),
    (torch.float16, 128, 8, 1, 128, 1, 4097, "cache_lengths", 3, "bshd"),
    (torch.bfloat16, 64, 32, 8, 16, 128, 4097, "causal", 1, "bhsd"),
    (torch.float16, 256, 32, 8, 64, 128, 1000, "cache_lengths", 3, "bhsd"),
]


@pytest.mark.parametrize("case", PAGED_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("num_splits", [0, 1])
def test_paged_kv_matches_float64(case, num_splits):
    """K and V scattered into a shuffled pool of pages whose every slot outside the keys some
    row sees is NaN (unused pages, the tail of each last page, a shorter sequence's keys below
    nk): out and LSE match float64 attention on the contiguous K and V, and hold no NaN."""
    dtype, dim, heads_q, heads_kv, page_size, nq, nk, plan_name, batch, layout = case
    torch.manual_seed(7)
    plan = PAGED_PLANS[plan_name](nq, nk, batch)
    visible = visible_of(plan)
    q = torch.randn(batch, heads_q, nq, dim, device=DEVICE, dtype=dtype)
    k, v = (torch.randn(batch, heads_kv, nk, dim, device=DEVICE, dtype=dtype) for _ in range(2))
    seen = visible.any(1).any(1).expand(batch, nk)
    table, num_pages = random_page_table(seen, page_size, spare_pages=5)
    pools = [paged_pool(x.transpose(1, 2), seen, table, num_pages, page_size)
             for x in (k, v)]
    if layout == "bhsd":
        pools = [x.transpose(1, 2).contiguous() for x in pools]
    out, lse = cm.attention(q if layout == "bhsd" else q.transpose(1, 2), *pools, plan,
                            return_lse=True, layout=layout, page_table=table,
                            num_splits=num_splits)
    assert not out.isnan().any() and not lse.isnan().any()
    exact = check_against_references([to_bhsd(out, layout)], q, k, v, visible,
                                     1 / math.sqrt(dim))
    assert_lse_matches(lse, exact[1])


PAGED_PLAN = None


def paged_plan():
    """Causal, 17 query rows against 50 keys: four pages of 16 rows."""
    global PAGED_PLAN
    if PAGED_PLAN is None:
        PAGED_PLAN = cm.masks.causal().specialize(nq=17, nk=50, device=DEVICE)
    return PAGED_PLAN


def paged_good():
    """q [1, 17, 4, 64], k and v pools of 4 pages of 16 rows and 2 heads, a page table."""
    q = torch.randn(1, 17, 4, 64, device=DEVICE, dtype=torch.bfloat16)
    k, v = (torch.randn(4, 16, 2, 64, device=DEVICE, dtype=torch.bfloat16) for _ in range(2))
    return q, k, v, torch.arange(4, dtype=torch.int32, device=DEVICE)[None]


PAGED_ERRORS = [
    ("table not a tensor", lambda q, k, v, t: (q, k, v, t.tolist()), TypeError,
     "page_table must be a torch.Tensor"),
    ("table int64", lambda q, k, v, t: (q, k, v, t.long()), TypeError,
     "page_table must be an int32 tensor on cuda"),
    ("table on cpu", lambda q, k, v, t: (q, k, v, t.cpu()), TypeError,
     "page_table must be an int32 tensor on cuda"),
    ("table 1-D", lambda q, k, v, t: (q, k, v, t[0]), ValueError,
     "page_table must be 2-D \\[B, pages per sequence\\] with B = 1"),
    ("table batch", lambda q, k, v, t: (q, k, v, t.repeat(2, 1)), ValueError, "with B = 1"),
    ("too few pages", lambda q, k, v, t: (q, k, v, t[:, :3]), ValueError,
     "nk=50 keys need at least 4 pages of 16 rows"),
    ("table strides", lambda q, k, v, t: (q, k, v, t.repeat_interleave(2, 1)[:, ::2]), ValueError,
     "stride\\(1\\) == 1"),
    ("page size 48", lambda q, k, v, t: (q, *(torch.randn(2, 48, 2, 64, device=DEVICE,
                                                          dtype=q.dtype) for _ in range(2)), t),
     ValueError, "pools of at least one page of 16, 32, 64 or a multiple of 128 rows, got 2 "
     "pages of 48 rows"),
    ("no pages", lambda q, k, v, t: (q, k[:0], v[:0], t), ValueError, "got 0 pages"),
    ("pool shapes", lambda q, k, v, t: (q, k, v[:3], t), ValueError, "k and v must have one shape"),
    ("jagged q", lambda q, k, v, t: (q[0], k, v, t), ValueError,
     "page_table needs 4-D q .* jagged \\[T, H, D\\] inputs take no page table"),
    ("nq", lambda q, k, v, t: (q[:, :16], k, v, t), ValueError,
     "specialized for nq=17, but q has 16 rows"),
    ("autograd", lambda q, k, v, t: (q.requires_grad_(), k, v, t), ValueError,
     "paged K/V has no backward"),
]


@pytest.mark.parametrize("case", PAGED_ERRORS, ids=[e[0] for e in PAGED_ERRORS])
def test_bad_paged_arguments_raise_before_any_launch(case):
    _, change, error, message = case
    q, k, v, table = change(*paged_good())
    with pytest.raises(error, match=message):
        cm.attention(q, k, v, paged_plan(), page_table=table)
    torch.cuda.synchronize()


def test_paged_kv_runs_without_grad_and_refuses_plans_it_cannot_page():
    q, k, v, table = paged_good()
    with torch.no_grad():  # inputs that require grad are fine where autograd is off
        cm.attention(q.requires_grad_(), k, v, paged_plan(), page_table=table)
    q = torch.randn(1, 700, 2, 64, device=DEVICE, dtype=torch.bfloat16)
    pools = [torch.randn(6, 128, 2, 64, device=DEVICE, dtype=torch.bfloat16) for _ in range(2)]
    table = torch.arange(6, dtype=torch.int32, device=DEVICE)[None]
    order = cm.masks.causal().with_token_order(
        lambda nq: np.random.default_rng(5).permutation(nq)).specialize(nq=700, device=DEVICE)
    with pytest.raises(ValueError, match="paged K/V does not take a plan with a token_order"):
        cm.attention(q, *pools, order, page_table=table)
    # Key tiles restart at the document boundary 300: a tile would span two pages' rows.
    documents = cm.masks.doc_causal([0, 300, 700]).specialize(nq=700, device=DEVICE)
    with pytest.raises(ValueError, match="key tiles do not restart"):
        cm.attention(q, *pools, documents, page_table=table)
    torch.cuda.synchronize()


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


def test_torch_compile_fullgraph_runs_plans_with_a_token_order():
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def layer(q, k, v, plan):
        return cm.attention(q, k, v, plan).float().square().sum()

    n = 20 * 20 + 112
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    for radius in (3, 5):
        plan = cm.masks.clear(112, 20, radius, strip=6, reorder=True).specialize(
            nq=n, device=DEVICE)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            grads = torch.autograd.grad(layer(q, k, v, plan), (q, k, v))
        assert not [w for w in caught if "not writable" in str(w.message)], \
            "dynamo guarded on the plan's numpy token order"
        eager = torch.autograd.grad(cm.attention(q, k, v, plan).float().square().sum(),
                                    (q, k, v))
        for g, e in zip(grads, eager):
            torch.testing.assert_close(g, e, rtol=2e-2, atol=2e-2)


def test_torch_compile_traces_the_backward_kernel_into_the_graph():
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    torch._dynamo.reset()
    backend = AotEagerAndRecordGraphs()

    @torch.compile(backend=backend, fullgraph=True)
    def layer(q, k, v, plan):
        out, lse = cm.attention(q, k, v, plan, return_lse=True, deterministic=True)
        return out.float().square().sum() + lse.sum()

    n = 384
    plan = MASKS["shared_prefix"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    grads = torch.autograd.grad(layer(q, k, v, plan), (q, k, v))
    out, lse = cm.attention(q, k, v, plan, return_lse=True, deterministic=True)
    eager = torch.autograd.grad(out.float().square().sum() + lse.sum(), (q, k, v))
    for g, e in zip(grads, eager):
        torch.testing.assert_close(g, e, rtol=1e-2, atol=1e-2)
    assert len(backend.bw_graphs) == 1
    assert "compilemask.attention_backward" in backend.bw_graphs[0].code
    assert "compilemask.attention_backward" not in backend.fw_graphs[0].code


def test_eager_calls_bypass_the_operator_that_dispatch_modes_see():
    """A plain eager call runs the kernels through compilemask._torch_ops._EagerAttention, without
    the dispatcher's custom-op layers; under a dispatch mode cm.attention goes through the
    operator compilemask::attention_forward, which the mode sees, and both give the same out,
    LSE and (deterministic) gradients, bit for bit."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(8)
    n = 300
    plan = MASKS["doc_causal"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout, dlse = torch.randn_like(q), torch.randn(1, 2, n, device=DEVICE)

    def run():
        out, lse = cm.attention(q, k, v, plan, return_lse=True, deterministic=True)
        grads = torch.autograd.grad((out, lse), (q, k, v), (dout, dlse))
        return out, (out, lse, *grads)

    out, eager = run()
    assert type(out.grad_fn).__name__ == "_EagerAttentionBackward"
    recorder = Recorder()
    with recorder:
        out, moded = run()
    assert type(out.grad_fn).__name__ != "_EagerAttentionBackward"
    assert "compilemask.attention_forward.default" in recorder.ops, recorder.ops
    for name, a, b in zip(("out", "lse", "dq", "dk", "dv"), eager, moded):
        assert torch.equal(a, b), f"{name} differs under the dispatch mode"


def test_differentiating_the_gradient_raises():
    """The kernels have no second derivative: differentiating a gradient of cm.attention raises
    instead of dropping the second-order term."""
    n = 256
    plan = MASKS["causal"](n).specialize(nq=n, device=DEVICE)
    q, k, v = (torch.randn(1, n, 2, 64, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    (dq,) = torch.autograd.grad(cm.attention(q, k, v, plan).float().square().sum(), q,
                                create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        dq.float().square().sum().backward()


def captured_graph(step):
    """step() captured in a CUDA graph, after two warm-up calls on a side stream (as capture
    needs): (the graph, what the captured call returned)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    return graph, captured


def test_cuda_graph_replay_of_split_keys():
    # A decoding step: split keys and shared GQA tiles, so the forward is the main kernel and
    # the combine, its programmatic dependent; replayed on fresh inputs it matches eager calls.
    plan = MASKS["causal"](1).specialize(nq=1, nk=3000, device=DEVICE)
    static = [torch.randn(2, 1, 8, 128, device=DEVICE, dtype=torch.bfloat16)]
    static += [torch.randn(2, 3000, 2, 128, device=DEVICE, dtype=torch.bfloat16)
               for _ in range(2)]
    graph, captured = captured_graph(lambda: cm.attention(*static, plan))
    for seed in range(3):
        torch.manual_seed(seed)
        fresh = [torch.randn_like(x) for x in static]
        for s_, f in zip(static, fresh):
            s_.copy_(f)
        captured.fill_(float("nan"))
        graph.replay()
        assert torch.equal(captured, cm.attention(*fresh, plan))


@pytest.mark.parametrize("order", ["tensors' own", "random token order"])
def test_cuda_graph_replay_with_new_inputs(order):
    n = 640
    mask = MASKS["doc_causal"](n)
    if order == "random token order":
        mask = mask.with_token_order(lambda nq: np.random.default_rng(2).permutation(nq))
    plan = mask.specialize(nq=n, device=DEVICE)
    static = [torch.randn(2, n, 4, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
              for _ in range(3)]
    static_dout = torch.randn_like(static[0])

    def step(inputs, dout):
        out = cm.attention(*inputs, plan, deterministic=True)
        return (out, *torch.autograd.grad(out, inputs, dout))

    graph, captured = captured_graph(lambda: step(static, static_dout))
    for seed in range(3):
        torch.manual_seed(seed)
        fresh = [torch.randn_like(x).requires_grad_() for x in static]
        fresh_dout = torch.randn_like(static_dout)
        with torch.no_grad():
            for s_, f in zip(static, fresh):
                s_.copy_(f)
            static_dout.copy_(fresh_dout)
        graph.replay()
        for got, want in zip(captured, step(fresh, fresh_dout)):
            assert torch.equal(got, want)
