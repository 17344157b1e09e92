"""Plans of a context-parallel rank (specialize(query_positions=...)): the shards that
context_parallel_positions gives, each plan's rows against the whole plan's, the tile counts and
block grids of the same rows, the CPU reference attention of the ranks against the whole, the
predicate check, pickling, and the errors. The GPU kernels run such plans in
test_torch_gpu.py."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import compilemask as cm

N = 1024
WORLD = 4

MASKS = {
    "causal": cm.masks.causal(),
    "doc_causal": cm.masks.doc_causal([0, 300, 700, N]),
    "sliding": cm.masks.sliding(97),
    # Grid formulas: their rows are expanded for a shard (they are stated on positions).
    "clear": cm.masks.clear(N - 30 * 30, 30, 5, strip=7),
}


def shards(balanced):
    return [cm.context_parallel_positions(N, WORLD, r, balanced=balanced) for r in range(WORLD)]


@pytest.mark.parametrize("balanced", [True, False])
def test_shards_partition_the_sequence(balanced):
    parts = shards(balanced)
    assert all(p.dtype == np.int32 and np.all(np.diff(p) > 0) for p in parts)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(N))
    # Balanced: rank r holds chunks r and 2W - 1 - r of 2W, so under a causal mask each rank
    # sees the same number of pairs.
    pairs = [int((p + 1).sum()) for p in parts]
    assert (len(set(pairs)) == 1) == balanced


def test_balanced_shards_are_head_and_tail_chunks():
    size = N // (2 * WORLD)
    first = cm.context_parallel_positions(N, WORLD, 0)
    assert np.array_equal(first, np.r_[0:size, N - size:N])


@pytest.mark.parametrize("name", sorted(MASKS))
@pytest.mark.parametrize("balanced", [True, False])
def test_rank_plans_hold_their_rows_of_the_whole_plan(name, balanced):
    mask = MASKS[name]
    whole = mask.specialize(nq=N).to_dense()
    for positions in shards(balanced):
        plan = mask.specialize(nq=N, query_positions=positions)
        assert (plan.nq, plan.nk) == (len(positions), N)
        dense = plan.to_dense()
        assert np.array_equal(dense, whole[positions])
        counts = mask.count_tiles(nq=N, query_positions=positions)
        stats = plan.stats()
        assert {key: counts[key] for key in ("full_tiles", "partial_tiles", "visible_pairs")} == \
            {key: stats[key] for key in ("full_tiles", "partial_tiles", "visible_pairs")}
        assert counts["visible_pairs"] == int(dense.sum())
        grid = mask.block_grid(nq=N, query_positions=positions)
        assert grid.nq == len(positions)
        assert np.array_equal(grid.to_dense(), dense)


def test_per_head_masks_that_agree_on_the_rows_become_one():
    # Windows of 500 and 600 keys differ only on rows 500 on (the rows before see every key
    # up to themselves under both): a rank holding rows 0-127 stores one mask for both heads.
    mask = cm.masks.per_head_window([500, 600])
    head = np.arange(0, 128, dtype=np.int32)
    tail = np.arange(N - 128, N, dtype=np.int32)
    assert mask.specialize(nq=N, heads=2, query_positions=head).stats()["instances"] == 1
    assert mask.specialize(nq=N, heads=2, query_positions=tail).stats()["instances"] == 2
    whole = mask.specialize(nq=N, heads=2)
    for positions in (head, tail):
        plan = mask.specialize(nq=N, heads=2, query_positions=positions)
        for h in range(2):
            assert np.array_equal(plan.to_dense(0, h), whole.to_dense(0, h)[positions])


@pytest.mark.parametrize("name", ["causal", "doc_causal", "clear"])
def test_ranks_attention_adds_up_to_the_whole(name):
    rng = np.random.default_rng(0)
    q, k, v, dout = (rng.standard_normal((1, 2, N, 16)) for _ in range(4))
    mask = MASKS[name]
    whole = cm.reference_attention(q, k, v, mask.specialize(nq=N), backward=dout,
                                   accumulate="float64")
    dk, dv = np.zeros_like(whole.dk), np.zeros_like(whole.dv)
    for positions in shards(True):
        plan = mask.specialize(nq=N, query_positions=positions)
        part = cm.reference_attention(q[:, :, positions], k, v, plan,
                                      backward=dout[:, :, positions], accumulate="float64")
        np.testing.assert_allclose(part.out, whole.out[:, :, positions], atol=1e-5)
        np.testing.assert_allclose(part.lse, whole.lse[:, :, positions], atol=1e-5)
        np.testing.assert_allclose(part.dq, whole.dq[:, :, positions], atol=1e-5)
        dk, dv = dk + part.dk, dv + part.dv
    np.testing.assert_allclose(dk, whole.dk, atol=1e-4)
    np.testing.assert_allclose(dv, whole.dv, atol=1e-4)


def test_rank_plans_check_against_the_global_predicate():
    positions = cm.context_parallel_positions(N, WORLD, 1)
    plan = MASKS["causal"].specialize(nq=N, query_positions=positions)
    plan.check_mask_mod(lambda b, h, q, k: q >= k)
    with pytest.raises(cm.MaskMismatch, match=r"q=128 k=129"):
        plan.check_mask_mod(lambda b, h, q, k: q + 1 >= k)


def test_rank_plans_pickle_with_their_positions():
    positions = cm.context_parallel_positions(N, WORLD, 2)
    plan = MASKS["doc_causal"].specialize(nq=N, query_positions=positions)
    back = pickle.loads(pickle.dumps(plan))
    assert np.array_equal(back.query_positions, positions)
    assert np.array_equal(back.to_dense(), plan.to_dense())
    assert "query_positions" in repr(back)


@pytest.mark.parametrize("positions, error, match", [
    ([3, 3, 4], ValueError, r"query_positions\[1\] = 3 does not follow 3"),
    ([5, 2], ValueError, r"query_positions\[1\] = 2 does not follow 5"),
    ([0, N], ValueError, rf"query_positions\[1\] = {N} is outside \[0, nq\)"),
    ([-1, 0], ValueError, r"query_positions\[0\] = -1 is outside \[0, nq\) with nq = 1024"),
    ([0, 2**40], ValueError, r"query_positions\[1\] = 1099511627776 is outside \[0, nq\)"),
    ([], ValueError, r"query_positions must not be empty"),
    ([[0, 1]], ValueError, r"query_positions must be 1-D, got shape \(1, 2\)"),
    ([0.5, 1.0], TypeError, r"query_positions must hold integers, got dtype float64"),
])
def test_bad_positions_are_named(positions, error, match):
    with pytest.raises(error, match=match):
        MASKS["causal"].specialize(nq=N, query_positions=positions)
    with pytest.raises(error, match=match):
        MASKS["causal"].count_tiles(nq=N, query_positions=positions)


def test_positions_do_not_combine_with_a_token_order_or_alibi():
    with pytest.raises(ValueError, match="query_positions and token_order do not combine"):
        MASKS["causal"].specialize(nq=N, query_positions=[0, 1], token_order=np.arange(N))
    plan = MASKS["causal"].specialize(nq=N, query_positions=np.arange(N // 2, N))
    x = np.ones((1, 1, N // 2, 8))
    kv = np.ones((1, 1, N, 8))
    with pytest.raises(ValueError, match="alibi_slopes needs a plan of every query row"):
        cm.reference_attention(x, kv, kv, plan, alibi_slopes=np.ones(1))


@pytest.mark.parametrize("args, match", [
    ((N, 0, 0), r"world_size >= 1"),
    ((N, 4, 4), r"0 <= rank < world_size"),
    ((1000, 16, 0), r"n = 1000 must be a positive multiple of 32 \(2 \* world_size\)"),
    ((2**31, 1, 0), r"n = 2147483648 must be a positive multiple of 2 .* below 2\^31"),
    ((2**64, 1, 0), r"context_parallel_positions: n = 18446744073709551616 is outside the int64"),
])
def test_bad_shards_are_named(args, match):
    with pytest.raises(ValueError, match=match):
        cm.context_parallel_positions(*args)
    with pytest.raises(TypeError, match="rank must be an int"):
        cm.context_parallel_positions(N, 4, 1.0)
