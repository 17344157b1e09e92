"""Plan.check_mask_mod and Plan.to_dense's row windows: a plan checked against predicates that
state its mask, and against predicates that differ from it in known pairs."""
from __future__ import annotations

import numpy as np
import pytest

import compilemask as cm
from compilemask import _mask_mod
from conftest import extra_workloads, workload_masks

WINDOWED = "mask w(W: int[]) { q in all: k in (diag - W[h], diag] }"


def causal_mod(b, h, q, k):
    return q >= k


@pytest.fixture(params=["numpy", "torch"])
def backend(request, monkeypatch):
    """The index arrays mask_mod gets: numpy (torch hidden) or torch (skipped without it);
    returns the workloads' xp arguments for predicates of that kind."""
    if request.param == "numpy":
        monkeypatch.setattr(_mask_mod, "_import_torch", lambda: None)
        return {}
    torch = pytest.importorskip("torch")
    return {"xp": torch, "device": "cpu"}


def test_to_dense_rows_are_a_slice_of_the_whole():
    plan = cm.masks.sliding(37).specialize(nq=300, nk=260, tile=(64, 64))
    whole = plan.to_dense()
    np.testing.assert_array_equal(plan.to_dense(rows=(70, 203)), whole[70:203])
    assert plan.to_dense(rows=(300, 300)).shape == (0, 260)
    for rows in ((5, 2), (0, 301), (-1, 4)):
        with pytest.raises(ValueError, match=r"not a range inside \[0, 300\)"):
            plan.to_dense(rows=rows)


def test_the_workload_plans_pass_their_predicates(workloads, backend):
    for name, args, order in [("doc_causal", {"mean": 128}, {}),
                              ("hstu", {"mean": 128, "ctx": 8}, {}),
                              ("clear", {"r": 5, "text": 40}, {"strip": None}),
                              ("video", {}, {"strip": None})]:
        fn, p = extra_workloads.workload(workloads, name)(700, **args, **backend)
        workload_masks.helper_mask(name, p, order).specialize(nq=p["N"]).check_mask_mod(fn)


def test_a_differing_predicate_is_reported_pair_by_pair(backend):
    plan = cm.masks.causal().specialize(nq=50)
    with pytest.raises(cm.MaskMismatch) as caught:
        plan.check_mask_mod(lambda b, h, q, k: q > k, examples=3)  # the diagonal differs
    error = caught.value
    assert error.counts == {(0, 0): 50}
    assert error.examples == [(0, 0, 0, 0, False), (0, 0, 1, 1, False), (0, 0, 2, 2, False)]
    assert "disagree on 50 (q, k) pairs" in str(error)
    assert "b=0 h=0 q=1 k=1: hidden by mask_mod, visible to the plan" in str(error)
    assert isinstance(error, AssertionError)


def test_every_block_of_rows_is_checked(monkeypatch, backend):
    monkeypatch.setattr(_mask_mod, "BLOCK_ELEMENTS", 200)  # blocks of 2 rows at nk = 100
    plan = cm.masks.causal().specialize(nq=101, nk=100)  # bottom-right aligned: row q sees [0, q - 1]
    plan.check_mask_mod(lambda b, h, q, k: k < q)
    with pytest.raises(cm.MaskMismatch) as caught:
        plan.check_mask_mod(lambda b, h, q, k: (k < q) & (q != 100), examples=0)
    assert caught.value.counts == {(0, 0): 100}  # only the last row, in the last block
    assert caught.value.examples == []


def test_each_head_and_batch_is_checked(backend):
    widths = [3, 9, 3, 9]
    plan = cm.compile(WINDOWED).specialize(W=widths, nq=64, batch=2, heads=4)

    def windowed(b, h, q, k):
        return (k <= q) & (k > q - widths[int(h)])

    plan.check_mask_mod(windowed)
    with pytest.raises(cm.MaskMismatch) as caught:
        plan.check_mask_mod(lambda b, h, q, k: (k <= q) & (k > q - 3))
    # Heads 1 and 3 of both batches see 6 more keys per row (fewer near the start).
    per_mask = sum(min(q, 8) - min(q, 2) for q in range(64))
    assert caught.value.counts == {(b, h): per_mask for b in (0, 1) for h in (1, 3)}


def test_a_token_order_is_checked_in_the_tensors_order(workloads, backend):
    fn, p = workloads.clear(700, r=5, text=40, **backend)
    m = p["N"]
    plan = cm.masks.clear(p["text"], p["grid"][0], p["r"], strip=6, reorder=True).specialize(nq=m)
    plan.check_mask_mod(fn)  # the row-major predicate on the model's tokens
    in_mask_order = cm.masks.clear(p["text"], p["grid"][0], p["r"], strip=6).specialize(nq=m)
    with pytest.raises(cm.MaskMismatch):
        in_mask_order.check_mask_mod(fn)


@pytest.mark.parametrize("mask_mod, examples, error, message", [
    ("not callable", 5, TypeError, "must be callable"),
    (lambda b, h, q, k: (q - k) * 1.0, 5, TypeError, "must return booleans"),
    (lambda b, h, q, k: np.ones((3, 3), dtype=bool), 5, ValueError, "must broadcast to"),
    (causal_mod, -1, ValueError, "examples must be an int >= 0"),
])
def test_bad_arguments_name_the_rule(mask_mod, examples, error, message, backend):
    plan = cm.masks.causal().specialize(nq=20)
    with pytest.raises(error, match=message):
        plan.check_mask_mod(mask_mod, examples=examples)
