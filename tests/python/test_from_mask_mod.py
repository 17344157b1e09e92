"""cm.masks.from_mask_mod: plans read off FlexAttention-style predicates, compared with the
predicates pair by pair, with the programs that state the same masks byte for byte, and the
errors for what it cannot take."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import compilemask as cm
from compilemask import _mask_mod


@pytest.fixture(params=["numpy", "torch"])
def backend(request, monkeypatch):
    """The index arrays mask_mod gets: numpy (torch hidden) or torch on the CPU (skipped
    without it)."""
    if request.param == "numpy":
        monkeypatch.setattr(_mask_mod, "_import_torch", lambda: None)
    else:
        pytest.importorskip("torch")
    return request.param


def test_a_formula_compiles_as_its_program_does(backend):
    """Causal, sinks plus a window, and a window per head give the programs' very descriptors."""
    assert (cm.masks.from_mask_mod(lambda b, h, q, k: k <= q, 700).specialize(nq=700)
            .descriptor.tobytes() == cm.masks.causal().specialize(nq=700).descriptor.tobytes())

    def sinks(b, h, q, k):
        return ((k < 4) | (k > q - 100)) & (k <= q)

    bound = cm.masks.from_mask_mod(sinks, 600)
    assert bound.mask.name == "row_intervals_2"
    assert (bound.specialize(nq=600).descriptor.tobytes() ==
            cm.masks.sinks_window(4, 100).specialize(nq=600).descriptor.tobytes())

    def window_per_head(b, h, q, k):
        return (k <= q) & (k > q - 64 * (h + 1))

    bound = cm.masks.from_mask_mod(window_per_head, 500, heads=3)
    assert bound.mask.name == "row_intervals_per_head"
    assert (bound.specialize(nq=500, heads=3).descriptor.tobytes() ==
            cm.masks.per_head_window([64, 128, 192]).specialize(nq=500, heads=3)
            .descriptor.tobytes())


def test_every_block_of_rows_and_batch_row_is_read(monkeypatch, backend):
    monkeypatch.setattr(_mask_mod, "BLOCK_ELEMENTS", 300)  # blocks of 2 rows at nk = 150

    def windows(b, h, q, k):  # rows of one window each, scattered, some empty (length 0)
        start = (q * 37 + b * 11) % 150
        return (k >= start) & (k < start + (q * 13 + b * 5) % 40)

    plan = cm.masks.from_mask_mod(windows, 101, 150, batch=2).specialize(nq=101, nk=150,
                                                                         batch=2)
    plan.check_mask_mod(windows)
    with pytest.raises(ValueError, match="hold 2 batch rows, so batch must be 2, got 1"):
        cm.masks.from_mask_mod(windows, 101, 150, batch=2).specialize(nq=101, nk=150)
    # batch=None reads batch row 0 only, as create_block_mask's B=None does.
    only_first = cm.masks.from_mask_mod(windows, 101, 150).specialize(nq=101, nk=150, batch=2)
    want = windows(0, 0, np.arange(101)[:, None], np.arange(150)[None, :])
    assert want.any(-1).sum() > 80 and not want.any(-1).all()
    for b in range(2):
        np.testing.assert_array_equal(only_first.to_dense(b, 0), want)


def test_a_mask_per_head(backend):
    def per_head(b, h, q, k):
        return (k <= q) & (k > q - 3 - 5 * h - 7 * b)

    def band(width):
        return np.tri(40, dtype=bool) & ~np.tri(40, k=-width, dtype=bool)

    # heads=None reads head 0 only, for every head.
    plan = cm.masks.from_mask_mod(per_head, 40).specialize(nq=40, heads=3)
    np.testing.assert_array_equal(plan.to_dense(0, 2), band(3))
    # heads=H reads a mask per head; batch=None serves every batch row.
    bound = cm.masks.from_mask_mod(per_head, 40, heads=3)
    assert bound.mask.name == "row_intervals_per_head"
    plan = bound.specialize(nq=40, heads=3, batch=2)
    for b in range(2):
        for h in range(3):
            np.testing.assert_array_equal(plan.to_dense(b, h), band(3 + 5 * h))
    with pytest.raises(ValueError, match="hold 3 heads, so heads must be 3, got 4"):
        bound.specialize(nq=40, heads=4)
    plan = cm.masks.from_mask_mod(per_head, 40, batch=2, heads=3).specialize(nq=40, heads=3,
                                                                             batch=2)
    plan.check_mask_mod(per_head)
    np.testing.assert_array_equal(plan.to_dense(1, 2), band(3 + 10 + 7))
    # Heads that agree share one set of bounds.
    assert cm.masks.from_mask_mod(lambda b, h, q, k: k <= q, 40, heads=4).mask.name == \
        "row_intervals"


@pytest.mark.parametrize("nk", [1, 2, 7])
def test_runs_at_both_ends_of_a_row(nk, backend):
    """Every row of at most two runs over nk keys, among them runs that start at key 0, end at
    key nk, cover the row or hold one key: the edges the run finder lists (a run at key 0 has
    no edge before it, a run to key nk none after it)."""
    rows = np.array([r for r in itertools.product([False, True], repeat=nk)
                     if sum(a and not b for a, b in zip(r, (False,) + r)) <= 2], dtype=bool)
    table = rows if backend == "numpy" else pytest.importorskip("torch").from_numpy(rows)
    # The table on the CPU, where the indices are asked to be (by default they go to the GPU).
    plan = cm.masks.from_mask_mod(lambda b, h, q, k: table[q, k], len(rows), nk, device="cpu")
    np.testing.assert_array_equal(plan.specialize(nq=len(rows), nk=nk).to_dense(), rows)


@pytest.mark.parametrize("call, error, message", [
    (lambda: cm.masks.from_mask_mod("no", 8), TypeError, "mask_mod must be callable"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: q - k, 8), TypeError,
     "from_mask_mod: mask_mod must return booleans"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: np.ones((3, 3), dtype=bool), 8),
     ValueError, r"must broadcast to \(8, 8\)"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: k <= q, 0), ValueError,
     "from_mask_mod: nq must be an int >= 1, got 0"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: k <= q, 8, 2.5), ValueError,
     "nk must be an int >= 1, got 2.5"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: k <= q, 8, batch=True), ValueError,
     "batch must be an int >= 1, got True"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: k <= q, 8, heads=-1), ValueError,
     "heads must be an int >= 1, got -1"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: (k % 4 == 0) & (q == 5), 20),
     ValueError, "from_mask_mod: row 5 sees 5 separate runs of keys; from_mask_mod takes at "
                 "most two"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: (k % 3 == 0) & (b == 1), 20, batch=2),
     ValueError, "row 0 of batch row 1 sees 7 separate runs"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: (k % 3 == 0) & (h == 1), 20, heads=2),
     ValueError, "row 0 of head 1 sees 7 separate runs"),
    (lambda: cm.masks.from_mask_mod(lambda b, h, q, k: (k % 3 == 0) & (h == 1) & (b == 1), 20,
                                    batch=2, heads=2),
     ValueError, "row 0 of head 1 of batch row 1 sees 7 separate runs"),
])
def test_bad_arguments_name_the_rule(call, error, message, backend):
    with pytest.raises(error, match=message):
        call()


def test_the_plan_fixes_its_lengths(backend):
    bound = cm.masks.from_mask_mod(lambda b, h, q, k: k <= q + 10, 30, 50)
    with pytest.raises(ValueError, match="the mask has 50 keys, so nk must be 50, got 30"):
        bound.specialize(nq=30)
    with pytest.raises(ValueError, match="hold 30 rows, so nq must be 30, got 31"):
        bound.specialize(nq=31, nk=50)
    assert bound.specialize(nq=30, nk=50).stats()["visible_pairs"] == sum(
        min(50, q + 11) for q in range(30))
