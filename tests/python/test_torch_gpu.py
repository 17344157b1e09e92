"""GPU tests of cm.attention (torch, CUDA, sm90 forward and backward kernels) against a float64
dense reference: forward and autograd (the LSE's gradient included) at head dims 40 to 256, V
with a head dim of its own (MLA), soft capping, split keys, plans with a token order, jagged
and packed inputs, offsets outside their tensors, per-head masks, padding, fully masked rows,
and bitwise determinism. Errors, paged K/V,
torch.compile and CUDA graphs have their own modules (test_torch_*_gpu.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

# torch_gpu first: it skips this module where the kernels cannot run.
from torch_gpu import (DEVICE, MASKS, assert_lse_matches, check_against_references, plan_256,
                       reference, to_bhsd, visible_of)
import torch  # noqa: E402
import compilemask as cm  # noqa: E402


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("dtype, dim", [(torch.bfloat16, 128), (torch.float16, 64),
                                        (torch.bfloat16, 96), (torch.float16, 40),
                                        (torch.bfloat16, 256), (torch.float16, 200),
                                        (torch.bfloat16, 160)])  # dq_accum rows of 192
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


@pytest.mark.parametrize("mask", ["causal", "doc_causal", "clear", "hstu"])
@pytest.mark.parametrize("balanced", [True, False])
def test_context_parallel_ranks_match_float64(mask, balanced):
    # Each rank's plan: its shard of the query rows against every key. Its out, LSE and dq are
    # its rows of the whole attention, and the ranks' dk and dv add up to the whole's.
    torch.manual_seed(1)
    n, world, dim = 1024, 4, 128
    bound = MASKS[mask](n)
    q, k, v = (torch.randn(1, 2, n, dim, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    dout = torch.randn_like(q)
    whole = reference(q, k, v, visible_of(bound.specialize(nq=n)), 1 / math.sqrt(dim), dout)
    dk, dv = torch.zeros_like(whole[3]), torch.zeros_like(whole[4])
    for rank in range(world):
        positions = cm.context_parallel_positions(n, world, rank, balanced=balanced)
        plan = bound.specialize(nq=n, query_positions=positions, device=DEVICE)
        rows = torch.from_numpy(positions).long().to(DEVICE)
        q_rank = q[:, :, rows].clone().requires_grad_()
        k_rank, v_rank = k.clone().requires_grad_(), v.clone().requires_grad_()
        out, lse = cm.attention(q_rank, k_rank, v_rank, plan, return_lse=True, layout="bhsd")
        out.backward(dout[:, :, rows])
        exact = check_against_references(
            [out, q_rank.grad, k_rank.grad, v_rank.grad], q_rank, k_rank, v_rank,
            visible_of(plan), 1 / math.sqrt(dim), dout[:, :, rows])
        assert_lse_matches(lse, exact[1])
        torch.testing.assert_close(exact[0], whole[0][:, :, rows])
        dk, dv = dk + exact[3], dv + exact[4]
    torch.testing.assert_close(dk, whole[3])
    torch.testing.assert_close(dv, whole[4])


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


@pytest.mark.parametrize("mask, nq, nk, num_splits", [
    ("causal", 700, 700, 1), ("doc_causal", 700, 700, 1), ("hstu", 700, 700, 1),
    ("clear", 700, 700, 1),
    ("causal", 3, 3000, 0),  # split keys and shared GQA tiles: the combine kernel adds the sink
    ("causal", 300, 200, 6),  # the first 100 rows see no key: out 0, LSE the sink
])
@pytest.mark.parametrize("deterministic", [False, True])
def test_attention_sinks_match_float64(mask, nq, nk, num_splits, deterministic):
    # bf16 sinks, as gpt-oss keeps them, about the rows' largest logits; head 1 has none.
    torch.manual_seed(5)
    plan = MASKS[mask](nq).specialize(nq=nq, nk=nk, device=DEVICE)
    q = torch.randn(2, 4, nq, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 2, nk, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    sinks = torch.tensor([0.5, -math.inf, 2.5, -1.0], device=DEVICE, dtype=torch.bfloat16,
                         requires_grad=True)
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd", num_splits=num_splits,
                            sinks=sinks, deterministic=deterministic)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    torch.autograd.backward([out, lse], [dout, dlse])
    exact = check_against_references([out, q.grad, k.grad, v.grad, sinks.grad], q, k, v,
                                     visible_of(plan), 1 / math.sqrt(128), dout, dlse,
                                     sinks=sinks.float())
    assert_lse_matches(lse, exact[1])
    assert sinks.grad.dtype == torch.bfloat16 and sinks.grad[1] == 0
    # Against the same call without sinks: the sink adds e^{sink} to each row's sum (over long
    # rows its share of out can be below the rounding the reference check allows).
    without, lse_without = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd",
                                        num_splits=num_splits)
    torch.testing.assert_close(lse, torch.logaddexp(lse_without, sinks.detach().float()[:, None]),
                               atol=1e-3, rtol=1e-4)


def alibi_slopes(heads):
    """The ALiBi slopes of Press et al. for `heads` heads: 2^(-8 (h + 1) / heads)."""
    return torch.tensor([2.0 ** (-8 * (h + 1) / heads) for h in range(heads)], device=DEVICE)


@pytest.mark.parametrize("mask, nq, nk, num_splits", [
    ("causal", 700, 700, 1), ("doc_causal", 700, 700, 1), ("hstu", 700, 700, 1),
    ("clear", 700, 700, 1), ("sliding", 700, 700, 1),
    ("causal", 3, 3000, 0),  # split keys and shared GQA tiles: rows of two heads in one tile
    ("causal", 300, 200, 6),  # the first 100 rows see no key; the last row aligns with the last key
    ("causal", 200, 2100, 1),  # the bias's offset nk - nq over whole tiles
])
@pytest.mark.parametrize("extras", ["alibi", "alibi, softcap and sinks"])
def test_alibi_matches_float64(mask, nq, nk, num_splits, extras):
    torch.manual_seed(8)
    plan = MASKS[mask](nq).specialize(nq=nq, nk=nk, device=DEVICE)
    q = torch.randn(2, 4, nq, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(2, 2, nk, 128, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    slopes = alibi_slopes(4).to(torch.bfloat16)  # any float dtype; read as float32
    more = {} if extras == "alibi" else {
        "softcap": 1.5, "sinks": torch.tensor([0.5, -math.inf, 2.5, -1.0], device=DEVICE)}
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd", num_splits=num_splits,
                            alibi_slopes=slopes, **more)
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    torch.autograd.backward([out, lse], [dout, dlse])
    exact = check_against_references([out, q.grad, k.grad, v.grad], q, k, v, visible_of(plan),
                                     1 / math.sqrt(128), dout, dlse, alibi_slopes=slopes.float(),
                                     **more)
    assert_lse_matches(lse, exact[1])
    # The bias matters at these distances: without it the result is far from the reference.
    unbiased = cm.attention(q, k, v, plan, layout="bhsd", num_splits=num_splits, **more)
    assert (unbiased.double() - exact[0]).abs().max() > 0.1, "ALiBi changed nothing"


@pytest.mark.parametrize("mask, nq, nk, num_splits, dims", [
    ("causal", 700, 700, 1, (192, 128)),  # DeepSeek's MLA, on the kernels for 256
    ("doc_causal", 700, 700, 1, (192, 128)),
    ("hstu", 700, 700, 1, (64, 128)),  # V wider than Q and K
    ("clear", 700, 700, 1, (128, 64)),  # V narrower
    ("causal", 3, 3000, 0, (192, 128)),  # split keys and shared GQA tiles: fwd_combine's rows
    ("causal", 300, 200, 1, (256, 40)),  # the first 100 rows see no key
])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_value_head_dim_matches_float64(mask, nq, nk, num_splits, dims, layout):
    torch.manual_seed(10)
    dim, dim_v = dims
    plan = MASKS[mask](nq).specialize(nq=nq, nk=nk, device=DEVICE)

    def randn(heads, rows, columns):
        shape = (2, rows, heads, columns) if layout == "bshd" else (2, heads, rows, columns)
        return torch.randn(shape, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)

    q, k, v = randn(4, nq, dim), randn(2, nk, dim), randn(2, nk, dim_v)
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout=layout, num_splits=num_splits)
    assert out.shape == randn(4, nq, dim_v).shape
    dout, dlse = torch.randn_like(out), torch.randn_like(lse)
    torch.autograd.backward([out, lse], [dout, dlse])
    assert v.grad.shape == v.shape
    got = [to_bhsd(x, layout) for x in (out, q.grad, k.grad, v.grad)]
    exact = check_against_references(got, *(to_bhsd(x, layout) for x in (q, k, v)),
                                     visible_of(plan), 1 / math.sqrt(dim), to_bhsd(dout, layout),
                                     dlse)
    assert_lse_matches(lse, exact[1])


def test_value_head_dim_in_jagged_sequences_matches_the_batch():
    """Jagged sequences with V narrower than Q and K give the batch they pack, bit for bit in
    deterministic mode."""
    torch.manual_seed(11)
    n, heads = 500, 4
    plan = MASKS["doc_causal"](n).specialize(nq=n, device=DEVICE)
    q4, k4, v4 = (torch.randn(2, n, heads, dim, device=DEVICE, dtype=torch.bfloat16,
                              requires_grad=True) for dim in (192, 192, 128))
    starts = torch.tensor([5, 5 + n + 9], device=DEVICE, dtype=torch.int32)
    rows = (starts.long()[:, None] + torch.arange(n, device=DEVICE)[None, :]).flatten()

    def packed(x):  # the batch's sequences at `starts`, zeros around them
        t = torch.zeros((2 * n + 30, *x.shape[2:]), device=DEVICE, dtype=x.dtype)
        return t.index_copy(0, rows, x.detach().flatten(0, 1))

    dout4 = torch.randn_like(cm.attention(q4, k4, v4, plan))
    out4 = cm.attention(q4, k4, v4, plan, deterministic=True)
    out4.backward(dout4)
    got = [packed(x).requires_grad_() for x in (q4, k4, v4)]
    out = cm.attention(*got, plan, offsets=starts, deterministic=True)
    out.backward(packed(dout4))
    assert out.shape == (2 * n + 30, heads, 128)
    assert torch.equal(out.index_select(0, rows), out4.flatten(0, 1))
    for g, w in zip(got, (q4, k4, v4)):
        assert torch.equal(g.grad.index_select(0, rows), w.grad.flatten(0, 1))


def test_alibi_in_jagged_sequences_counts_from_each_sequences_first_row():
    """Jagged sequences give the batch they pack with ALiBi too, bit for bit in deterministic
    mode: each sequence's distances count from its own first row, whatever its offset."""
    torch.manual_seed(9)
    n, heads = 500, 4
    plan = MASKS["hstu"](n).specialize(nq=n, device=DEVICE)
    q4, k4, v4 = (torch.randn(2, n, heads, 64, device=DEVICE, dtype=torch.bfloat16,
                              requires_grad=True) for _ in range(3))
    slopes = alibi_slopes(heads)
    starts = torch.tensor([7, 7 + n + 3], device=DEVICE, dtype=torch.int32)
    rows = (starts.long()[:, None] + torch.arange(n, device=DEVICE)[None, :]).flatten()

    def packed(x):  # the batch's sequences at `starts`, zeros around them
        t = torch.zeros((2 * n + 20, *x.shape[2:]), device=DEVICE, dtype=x.dtype)
        return t.index_copy(0, rows, x.detach().flatten(0, 1))

    dout4 = torch.randn_like(q4)
    out4 = cm.attention(q4, k4, v4, plan, alibi_slopes=slopes, deterministic=True)
    out4.backward(dout4)
    check_against_references([x.transpose(1, 2) for x in (out4, q4.grad, k4.grad, v4.grad)],
                             *(x.transpose(1, 2) for x in (q4, k4, v4)), visible_of(plan),
                             1 / math.sqrt(64), dout4.transpose(1, 2), alibi_slopes=slopes)
    got = [packed(x).requires_grad_() for x in (q4, k4, v4)]
    out = cm.attention(*got, plan, offsets=starts, alibi_slopes=slopes, deterministic=True)
    out.backward(packed(dout4))
    assert torch.equal(out.index_select(0, rows), out4.flatten(0, 1))
    for g, w in zip(got, (q4, k4, v4)):
        assert torch.equal(g.grad.index_select(0, rows), w.grad.flatten(0, 1))


def test_a_thread_that_made_no_cuda_call_yet_launches_the_kernels():
    """A fresh thread has no CUDA context bound until some runtime call binds one, and torch may
    make none there (its allocator's cache serves the outputs): the launchers bind it before
    their driver calls (cuTensorMapEncodeTiled), as autograd's backward worker needs."""
    import threading
    plan = MASKS["causal"](256).specialize(nq=256, device=DEVICE)
    q, k, v = (torch.randn(1, 256, 2, 64, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
    want = cm.attention(q, k, v, plan)
    cm.attention(q, k, v, plan)  # freed: the thread's outputs and workspace come from the cache
    got = {}

    def worker():
        try:
            got["out"] = cm.attention(q, k, v, plan)
        except Exception as error:  # re-raised in the test's thread
            got["error"] = error

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    if "error" in got:
        raise got["error"]
    assert torch.equal(got["out"], want)


def test_sinks_gradient_is_bitwise_reproducible():
    torch.manual_seed(6)
    plan = MASKS["doc_causal"](1000).specialize(nq=1000, device=DEVICE)
    q, k, v = (torch.randn(2, 1000, 4, 64, device=DEVICE, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    sinks = torch.randn(4, device=DEVICE, requires_grad=True)
    dout = torch.randn_like(q)
    grads = []
    for _ in range(3):
        sinks.grad = None
        cm.attention(q, k, v, plan, sinks=sinks).backward(dout)
        grads.append(sinks.grad.clone())
    assert all(torch.equal(g, grads[0]) for g in grads[1:])


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


def test_from_mask_mod_reads_a_predicate_on_the_gpu():
    # The plan's attention is the row_intervals program's, which MASKS checks.
    lengths = torch.tensor([0, 100, 250, 300], device=DEVICE)
    doc = torch.bucketize(torch.arange(300, device=DEVICE), lengths[1:], right=True)
    seen = []

    def doc_causal(b, h, q, k):
        seen.append(q.device)
        return (doc[q] == doc[k]) & (k <= q)

    plan = cm.masks.from_mask_mod(doc_causal, 300, device=DEVICE).specialize(nq=300,
                                                                           device=DEVICE)
    assert seen and all(d.type == "cuda" for d in seen)
    plan.check_mask_mod(doc_causal)
    program = cm.masks.doc_causal(lengths.tolist()).specialize(nq=300)
    np.testing.assert_array_equal(plan.to_dense(), program.to_dense())


def test_from_mask_mod_reads_blocks_of_rows_per_head_on_the_gpu(monkeypatch):
    # Blocks of 7 rows (the GPU's block size shrunk), a mask per batch row and head: every
    # block's bounds are gathered on the device and copied to the host once.
    from compilemask import _data_masks
    monkeypatch.setattr(_data_masks, "GPU_BLOCK_ELEMENTS", 7 * 230)

    def windows(b, h, q, k):  # two runs (sinks, a window), some rows empty
        width = (q * 7 + b * 3 + h * 5) % 60
        return ((k < h) | ((k > q - width) & (k <= q))) & (q % 11 != 4)

    plan = cm.masks.from_mask_mod(windows, 200, 230, batch=2, heads=3, device=DEVICE).specialize(
        nq=200, nk=230, batch=2, heads=3)
    plan.check_mask_mod(windows)
    with pytest.raises(ValueError, match="row 100 of head 2 of batch row 1 sees 3 separate runs"):
        cm.masks.from_mask_mod(lambda b, h, q, k: windows(b, h, q, k) | (
            (b == 1) & (h == 2) & (q == 100) & (k == 150)), 200, 230, batch=2, heads=3,
            device=DEVICE)


def test_an_attn_mask_per_head_matches_float64():
    # SDPA's [batch, heads, nq, nk] boolean mask, a different window (plus sinks) per (b, h),
    # some rows seeing nothing: from_dense keeps the bounds per head; the reference reads the
    # dense mask itself.
    torch.manual_seed(4)
    batch, heads, n, dim = 2, 4, 333, 128
    q_idx = torch.arange(n, device=DEVICE)[:, None]
    k_idx = torch.arange(n, device=DEVICE)
    window = torch.randint(1, 200, (batch, heads, 1, 1), device=DEVICE)
    sinks = torch.randint(0, 8, (batch, heads, 1, 1), device=DEVICE)
    visible = (((k_idx > q_idx - window) | (k_idx < sinks)) & (k_idx <= q_idx)
               & (q_idx % 50 != 7))
    plan = cm.masks.from_dense(visible).specialize(nq=n, batch=batch, heads=heads, device=DEVICE)
    q = torch.randn(batch, heads, n, dim, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(batch, 2, n, dim, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    out, lse = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd")
    dout = torch.randn_like(out)
    out.backward(dout)
    exact = check_against_references([out, q.grad, k.grad, v.grad], q, k, v, visible,
                                      1 / math.sqrt(dim), dout)
    assert_lse_matches(lse, exact[1])
    assert torch.equal(out[:, :, 7::50], torch.zeros_like(out[:, :, 7::50]))


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
