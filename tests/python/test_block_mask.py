"""Mask.block_grid and Mask.block_mask: masks on uniform blocks, read back pair by pair and block
by block against the plans' masks; as FlexAttention BlockMasks, compared with create_block_mask's
for the workloads' predicates and run through flex_attention (skipped without torch; the
compiled run without a GPU)."""
from __future__ import annotations

import numpy as np
import pytest

import compilemask as cm
from conftest import extra_workloads, workload_masks

WINDOWED = "mask w(W: int[]) { q in all: k in (diag - W[h], diag] }"

# (the bound mask's maker, specialize's arguments): every shape of row the helpers make, odd
# lengths, Nq != Nk. Makers, not masks: a mask held by the module outlives the interpreter's
# teardown of compilemask when torch.compile keeps the module's globals (nanobind reports it).
CASES = [
    (lambda: cm.masks.causal(), {"nq": 1000}),
    (lambda: cm.masks.causal(), {"nq": 300, "nk": 1000}),
    (lambda: cm.masks.sliding(100), {"nq": 777}),
    (lambda: cm.masks.doc_causal([0, 300, 700, 1000]), {"nq": 1000}),
    (lambda: cm.masks.shared_prefix(200, [150, 250, 300]), {"nq": 900}),
    (lambda: cm.masks.hstu([0, 700, 1500], ctx=8, targets=[4, 16]), {"nq": 1500}),
    (lambda: cm.masks.clear(64, 30, 5, strip=None), {"nq": 964}),
    (lambda: cm.compile(WINDOWED).bind(W=[5, 40, 5]), {"nq": 500, "batch": 2, "heads": 3}),
]


def expected_codes(dense: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """Each block's class from the mask itself: 0 empty, 1 full (whole and all visible), 2
    partial; a block the edge cuts counts its missing pairs as hidden."""
    block_q, block_k = block
    q_blocks, k_blocks = -(-dense.shape[0] // block_q), -(-dense.shape[1] // block_k)
    padded = np.zeros((q_blocks * block_q, k_blocks * block_k), bool)
    padded[: dense.shape[0], : dense.shape[1]] = dense
    seen = padded.reshape(q_blocks, block_q, k_blocks, block_k).sum(axis=(1, 3))
    return np.where(seen == 0, 0, np.where(seen == block_q * block_k, 1, 2))


@pytest.mark.parametrize("block", [(128, 128), (64, 32), (16, 48)])
@pytest.mark.parametrize("make, shape", CASES)
def test_grids_hold_the_plans_masks(make, shape, block):
    bound = make()
    grid = bound.block_grid(**shape, block=block)
    plan = bound.specialize(**shape)
    batch, heads = shape.get("batch", 1), shape.get("heads", 1)
    assert grid.instance_of.shape == (batch, heads)
    assert grid.bits.shape[1:] == (block[0], -(-block[1] // 32))
    for b in range(batch):
        for h in range(heads):
            dense = plan.to_dense(b, h)
            np.testing.assert_array_equal(grid.to_dense(b, h), dense)
            codes = grid.codes[grid.instance_of[b, h]]
            np.testing.assert_array_equal(np.minimum(codes, 2), expected_codes(dense, block))


def test_distinct_masks_are_stored_once():
    grid = cm.compile(WINDOWED).block_grid(W=[5, 40, 5], nq=500, batch=2, heads=3, block=64)
    assert grid.instance_of.tolist() == [[0, 1, 0], [0, 1, 0]]
    assert grid.codes.shape == (2, 8, 8)
    assert grid.block == (64, 64)
    # Bitmaps EMPTY and FULL come first, then one per partial block, none shared.
    assert grid.bits.shape[0] == 2 + int((grid.codes >= 2).sum())
    assert not grid.bits[grid.EMPTY].any()
    assert (grid.bits[grid.FULL] == 0xFFFFFFFF).all()


def test_bad_blocks_and_sizes_are_named():
    mask = cm.masks.causal()
    with pytest.raises(ValueError, match=r"tile n = 100 must be a multiple of 16"):
        mask.block_grid(nq=300, block=(128, 100))
    with pytest.raises(TypeError, match=r"block must be a \(block_q, block_k\) pair"):
        mask.block_grid(nq=300, block=(128, 128, 128))
    with pytest.raises(TypeError, match=r"block\[1\] must be an integer, got str"):
        mask.block_grid(nq=300, block=[128, "64"])
    with pytest.raises(ValueError, match=r"above 2\^26 cells"):
        mask.block_grid(nq=10000).to_dense()
    # 65,536 x 65,536 codes alone would take 16 GiB: refused before anything is allocated.
    with pytest.raises(ValueError, match=r"block_grid: 4294836225 block codes .* exceed 4 GiB"):
        mask.block_grid(nq=65535 * 16, block=16)


WORKLOADS = [("causal", {}), ("sliding", {"W": 300}), ("doc_causal", {"mean": 256}),
             ("hstu", {"mean": 256, "ctx": 8}), ("shared_prefix", {}),
             ("clear", {"r": 5, "text": 64})]


@pytest.mark.parametrize("name, args", WORKLOADS)
def test_block_masks_are_create_block_masks(workloads, name, args):
    """Every index tensor of our BlockMask equals create_block_mask's for the predicate, and
    our mask_mod gives its mask pair for pair."""
    torch = pytest.importorskip("torch")
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    mod, p = extra_workloads.workload(workloads, name)(1400, **args, xp=torch, device="cpu")
    n = p["N"]
    bound = workload_masks.helper_mask(name, p, {"strip": None} if name == "clear" else {})
    ours = bound.block_mask(nq=n, device="cpu")
    theirs = flex.create_block_mask(mod, None, None, n, n, device="cpu")
    for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                  "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"):
        assert torch.equal(getattr(ours, field), getattr(theirs, field)), field
    assert ours.seq_lengths == (n, n)
    dense = flex.create_mask(ours.mask_mod, 1, 1, n, n, device="cpu")
    assert torch.equal(dense, flex.create_mask(mod, 1, 1, n, n, device="cpu"))


def test_block_masks_broadcast_what_the_masks_do_not_read():
    torch = pytest.importorskip("torch")
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    per_head = cm.compile(WINDOWED).block_mask(W=[5, 40, 5], nq=300, batch=2, heads=3,
                                               device="cpu")
    assert per_head.kv_num_blocks.shape == (1, 3, 3)
    widths = torch.tensor([5, 40, 5])
    dense = flex.create_mask(per_head.mask_mod, 2, 3, 300, 300, device="cpu")
    q, k = torch.arange(300)[:, None], torch.arange(300)[None, :]
    for h in range(3):
        want = (k <= q) & (k > q - widths[h])
        assert torch.equal(dense[0, h], want) and torch.equal(dense[1, h], want)
    assert cm.masks.causal().block_mask(nq=300, batch=4, heads=2,
                                        device="cpu").kv_num_blocks.shape == (1, 1, 3)


def test_flex_attention_runs_on_block_masks(workloads):
    """Eager flex_attention (and compiled, on a GPU) with our BlockMask and a score_mod equals
    it with create_block_mask's."""
    torch = pytest.importorskip("torch")
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    mod, p = extra_workloads.workload(workloads, "doc_causal")(1000, mean=256, xp=torch,
                                                               device=device)
    bound = workload_masks.helper_mask("doc_causal", p, {})
    ours = bound.block_mask(nq=1000, device=device)
    theirs = flex.create_block_mask(mod, None, None, 1000, 1000, device=device)

    def tanh_cap(score, b, h, q, k):
        return 30.0 * torch.tanh(score / 30.0)

    run = torch.compile(flex.flex_attention) if device == "cuda" else flex.flex_attention
    generator = torch.Generator(device=device).manual_seed(0)
    q, k, v = (torch.randn(2, 4, 1000, 64, device=device, generator=generator)
               for _ in range(3))
    want = run(q, k, v, score_mod=tanh_cap, block_mask=theirs)
    got = run(q, k, v, score_mod=tanh_cap, block_mask=ours)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
