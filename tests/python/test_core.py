"""CPU tests of the compilemask package: compile, specialize, plan inspection, the bundled
helpers and the CPU reference attention. Expected values come from brute-force numpy
evaluation, never from the code under test."""
from __future__ import annotations

import math

import numpy as np
import pytest

import compilemask as cm
from compilemask import _core
from conftest import REPO, dense_attention64, extra_workloads, workload_masks

SLIDING = "mask w(W: int) { q in all: k in (diag - W, diag] }"


def numpy_sliding(nq, nk, w):
    q = np.arange(nq)[:, None] + nk - nq  # bottom-right aligned diagonal
    k = np.arange(nk)[None, :]
    return (k <= q) & (k > q - w)


# ---- compile ---------------------------------------------------------------------------------

def test_compile_source_and_path_give_the_same_mask():
    path = REPO / "examples" / "sliding_window.mask"
    from_path = cm.compile(path).specialize(nq=300, W=40)
    from_text = cm.compile(path.read_text()).specialize(nq=300, W=40)
    from_str_path = cm.compile(str(path)).specialize(nq=300, W=40)
    assert bytes(from_path.descriptor) == bytes(from_text.descriptor)
    assert bytes(from_str_path.descriptor) == bytes(from_text.descriptor)


def test_mask_reports_name_and_parameters():
    mask = cm.compile(REPO / "examples" / "hstu.mask")
    assert mask.name == "hstu"
    assert mask.params == {"seqs": "segments", "ctx": "int[]", "targets": "int[]"}


@pytest.mark.parametrize("source, line, column, fragment", [
    ("mask bad( { q in all }", 1, 11, "expected a parameter name"),
    ("mask m() {\n  q in all: k in [0, nope]\n}", 2, 22, "nope"),
])
def test_mask_error_has_line_column_and_caret(source, line, column, fragment):
    with pytest.raises(cm.MaskError) as caught:
        cm.compile(source)
    error = caught.value
    assert (error.line, error.column) == (line, column)
    assert fragment in str(error)
    text_lines = error.diagnostics[0].text.splitlines()
    assert text_lines[1].strip() == source.splitlines()[line - 1].strip()
    assert text_lines[2].index("^") - text_lines[1].index(source.splitlines()[line - 1].strip()[0]) \
        == column - 1 - (len(source.splitlines()[line - 1]) - len(source.splitlines()[line - 1].lstrip()))
    assert isinstance(error, ValueError)


def test_compile_rejects_a_non_string():
    with pytest.raises(TypeError, match="source text or a path"):
        cm.compile(42)


# ---- specialize and inspection ---------------------------------------------------------------

@pytest.mark.parametrize("nq, nk, w", [(300, 300, 1), (300, 300, 77), (200, 333, 150), (333, 200, 64)])
def test_dense_matches_brute_force_of_the_program(nq, nk, w):
    plan = cm.compile(SLIDING).specialize(nq=nq, nk=nk, W=w, tile=(64, 64))
    np.testing.assert_array_equal(plan.to_dense(), numpy_sliding(nq, nk, w))


def tile_classes(dense, tm, tn):
    counts = {"full": 0, "partial": 0, "empty": 0}
    for i in range(0, dense.shape[0], tm):
        for j in range(0, dense.shape[1], tn):
            block = dense[i:i + tm, j:j + tn]
            counts["full" if block.all() else "empty" if not block.any() else "partial"] += 1
    return counts


def test_stats_match_the_dense_mask():
    nq, nk, w = 700, 650, 100
    plan = cm.compile(SLIDING).specialize(nq=nq, nk=nk, W=w, tile=(64, 128))
    dense = numpy_sliding(nq, nk, w)
    stats = plan.stats()
    expected = tile_classes(dense, 64, 128)
    assert stats["full_tiles"] == expected["full"]
    assert stats["partial_tiles"] == expected["partial"]
    assert stats["empty_tiles"] == expected["empty"]
    assert stats["tiles"] == math.ceil(nq / 64) * math.ceil(nk / 128)
    assert stats["visible_pairs"] == dense.sum()
    assert stats["density"] == pytest.approx(dense.sum() / (nq * nk))
    assert stats["bytes"] == len(plan.descriptor) and stats["build_seconds"] >= 0


def test_descriptor_is_a_readonly_byte_view_with_the_magic():
    plan = cm.masks.causal().specialize(nq=256)
    d = plan.descriptor
    assert d.dtype == np.uint8 and bytes(d[:4]) == b"CMSK"
    with pytest.raises(ValueError):
        d[0] = 0


def test_print_shows_the_tile_map():
    plan = cm.masks.causal().specialize(nq=384)
    text = str(plan)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert rows == ["│░░    │", "│██░░  │", "│████░░│"]
    assert "causal" in repr(plan) and "nq=384" in repr(plan)


def test_save_png_writes_a_png(tmp_path):
    path = tmp_path / "mask.png"
    cm.masks.sliding(64).specialize(nq=512).save_png(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 100


def test_per_head_masks_and_instances():
    mask = cm.compile(REPO / "examples" / "per_head_window.mask")
    windows = [1, 50, 200]
    plan = mask.specialize(nq=300, heads=3, windows=np.array(windows))
    for h, w in enumerate(windows):
        np.testing.assert_array_equal(plan.to_dense(0, h), numpy_sliding(300, 300, w))
    assert plan.stats()["instances"] == 3


# ---- parameter forms -------------------------------------------------------------------------

DOC_FORMS = [
    [0, 100, 250, 300],
    np.array([0, 100, 250, 300], dtype=np.int32),
    [(0, 100), (100, 250), (250, 300)],
    np.array([[0, 100], [100, 250], [250, 300]]),
    cm.segments(lengths=[100, 150, 50]),
    cm.segments(boundaries=(0, 100, 250, 300)),
    cm.segments(starts=[0, 100, 250], ends=[100, 250, 300]),
]


@pytest.mark.parametrize("docs", DOC_FORMS, ids=range(len(DOC_FORMS)))
def test_segment_forms_agree(docs):
    mask = cm.compile(REPO / "examples" / "doc_causal.mask")
    plan = mask.specialize(nq=300, docs=docs, tile=(64, 64))
    doc = np.repeat(np.arange(3), [100, 150, 50])
    q, k = np.arange(300)[:, None], np.arange(300)[None, :]
    np.testing.assert_array_equal(plan.to_dense(), (doc[q] == doc[k]) & (k <= q))


def test_int_and_array_forms_agree():
    mask = cm.compile(REPO / "examples" / "hstu.mask")
    seqs = cm.segments(lengths=[100, 200])
    base = bytes(mask.specialize(nq=300, seqs=seqs, ctx=[5, 6], targets=[3, 4]).descriptor)
    for ctx, targets in [(np.array([5, 6]), (3, 4)), (np.array([5, 6], np.uint16), np.array([3, 4]))]:
        plan = mask.specialize(nq=300, seqs=seqs, ctx=ctx, targets=targets)
        assert bytes(plan.descriptor) == base
    w = cm.compile(SLIDING)
    assert bytes(w.specialize(nq=200, W=np.int64(9)).descriptor) == \
        bytes(w.specialize(nq=200, W=np.array(9)).descriptor)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"W": 4, "X": 1}, TypeError, "has no parameter 'X'"),
    ({"W": 2.5}, TypeError, "parameter 'W' \\(int\\) must be an integer"),
    ({"W": True}, TypeError, "got a bool"),
    ({"W": [1, 2]}, TypeError, "parameter 'W' \\(int\\) must be an integer"),
    ({}, ValueError, "missing parameter 'W'"),
    ({"W": 4, "nq": "10"}, TypeError, "nq must be an integer"),
    ({"W": 4, "nq": -1}, ValueError, "nq must be"),
    ({"W": 4, "tile": 64}, TypeError, "tile must be a \\(tile_m, tile_n\\) pair"),
    ({"W": 4, "tile": (100, 64)}, ValueError, "tile m = 100"),
])
def test_specialize_errors_name_the_argument(kwargs, error, message):
    args = {"nq": 200, **kwargs}
    with pytest.raises(error, match=message):
        cm.compile(SLIDING).specialize(**args)


@pytest.mark.parametrize("docs, error, message", [
    ([0, 50, 40], ValueError, "boundaries must not decrease"),
    ([[0, 1, 2]], ValueError, "must be boundaries"),
    (["a", "b"], TypeError, "must hold integers"),
    ([0.5, 1.5], TypeError, "must hold integers"),
])
def test_segment_errors(docs, error, message):
    with pytest.raises(error, match=message):
        cm.compile(REPO / "examples" / "doc_causal.mask").specialize(nq=100, docs=docs)


@pytest.mark.parametrize("bound, message", [
    (lambda: cm.masks.sliding(-1), r"parameter 'W' must be >= 1, got -1"),
    (lambda: cm.masks.sinks_window(4, 0), r"parameter 'W' must be >= 1, got 0"),
    (lambda: cm.masks.chunked_causal(-4), r"parameter 'C' must be >= 1, got -4"),
    (lambda: cm.masks.hstu([0, 8, 16], ctx=[1, -1]), r"parameter 'ctx' element 1 must be >= 0"),
    (lambda: cm.masks.clear(4, 8, 0, strip=None), r"parameter 'r' must be >= 1, got 0"),
])
def test_helper_values_below_the_programs_bounds_are_errors(bound, message):
    with pytest.raises(ValueError, match=message):
        bound().specialize(nq=100)


@pytest.mark.parametrize("make, nq, fits, message", [
    (lambda: cm.masks.clear(4, 3, 2, strip=None), 12, 13,
     r"clear.mask:\d+:\d+: requirement not met: 'require text \+ s \* s <= Nq && "),
    (lambda: cm.masks.doc_causal([0, 50, 120]), 100, 120,
     r"requirement not met: 'require d.end <= Nq && d.end <= Nk' \(at d=1: \[50, 120\)\)"),
    (lambda: cm.masks.hstu([0, 50, 120]), 100, 120,
     r"hstu.mask:\d+:\d+: requirement not met: 'require s.end <= Nq && s.end <= Nk' \(at s=1: \[50, 120\)\)"),
    (lambda: cm.masks.hstu([0, 50, 120], ctx=[4, 40], targets=[6, 31]), 120, None,
     r"requirement not met: 'require ctx\[s\] \+ targets\[s\] <= s.len' \(at s=1: \[50, 120\)\)"),
    (lambda: cm.masks.shared_prefix(40, [30, 50]), 100, 120,
     r"requirement not met: 'require r.end <= Nq && r.end <= Nk' \(at r=1: \[70, 120\)\)"),
    (lambda: cm.masks.neighbourhood_2d(9, 11, 2, 3, strip=None), 98, 99,
     r"neighbourhood_2d.mask:\d+:\d+: requirement not met: 'require rows \* cols <= Nq"),
])
def test_bundled_programs_reject_lengths_that_do_not_fit_their_parameters(make, nq, fits,
                                                                          message):
    """The images of clear and neighbourhood_2d and the segments of doc_causal, hstu and
    shared_prefix must fit the sequence, and an hstu sequence its context and targets: a
    mismatch is the program's `require` error, not a mask silently clipped to the length.
    `fits`: a length the parameters fit (None: no length mends them)."""
    with pytest.raises(ValueError, match=message):
        make().specialize(nq=nq)
    if fits is not None:
        make().specialize(nq=fits)


def test_segments_helper_errors():
    with pytest.raises(TypeError, match="exactly one of"):
        cm.segments([1, 2], boundaries=[0, 1])
    with pytest.raises(ValueError, match="lengths must be >= 0"):
        cm.segments(lengths=[3, -1])
    with pytest.raises(ValueError, match="differ in length"):
        cm.segments(starts=[0, 1], ends=[1])


def test_to_dense_outside_the_plan_raises():
    plan = cm.masks.causal().specialize(nq=64)
    with pytest.raises(ValueError, match=r"b 2 must be in \[0, batch 1\)"):
        plan.to_dense(b=2)
    with pytest.raises(ValueError, match=r"h -1 must be in \[0, heads 1\)"):
        plan.to_dense(h=-1)


# ---- bundled helpers vs the shared workload predicates ----------------------------------------

# Each workload at small parameters: (name, maker arguments, the grid helpers' order arguments).
SMALL_WORKLOADS = [
    ("causal", {}, {}), ("sliding", {"W": 100}, {}), ("doc_causal", {"mean": 128}, {}),
    ("hstu", {"mean": 128, "ctx": 8}, {}), ("shared_prefix", {"G": 4}, {}),
    ("clear", {"r": 5, "text": 40}, {"strip": None}), ("natten", {}, {"strip": None}),
    ("video", {}, {"strip": None}), ("random_window", {"max_window": 100}, {}),
]


def helper_plans(workloads, n):
    """(name, plan, dense reference) for each workload of the benchmark, its plan made by
    bench/gpu/workload_masks.py's helper call, the reference by its predicate."""
    for name, args, order in SMALL_WORKLOADS:
        fn, p = extra_workloads.workload(workloads, name)(n, **args)
        plan = workload_masks.helper_mask(name, p, order).specialize(nq=p["N"], tile=(64, 64))
        yield name, plan, workloads.dense(fn, p["N"])
    # Strip order: the row-major predicate on reordered tokens.
    fn, p = workloads.clear(n, r=5, text=40)
    m = p["N"]
    order = cm.strip_order(p["text"], p["grid"][0], p["grid"][1], 6, m)
    plan = cm.masks.clear(p["text"], p["grid"][0], p["r"], strip=6).specialize(nq=m, tile=(64, 64))
    yield "clear_strips", plan, fn(0, 0, order[:, None], order[None, :])


def test_helpers_match_the_workload_predicates(workloads):
    for name, plan, expected in helper_plans(workloads, 700):
        np.testing.assert_array_equal(plan.to_dense(), expected, err_msg=name)


def test_helpers_compile_the_bundled_programs():
    assert {"causal", "sliding_window", "doc_causal", "shared_prefix", "hstu", "clear"} <= set(
        cm.masks.names())
    assert cm.masks.program("hstu").params == cm.compile(REPO / "examples" / "hstu.mask").params
    with pytest.raises(ValueError, match="no bundled mask program"):
        cm.masks.program("nonexistent")


# ---- reference attention ---------------------------------------------------------------------

def random_inputs(rng, batch, heads_q, heads_kv, nq, nk, dim):
    q = rng.standard_normal((batch, heads_q, nq, dim))
    k = rng.standard_normal((batch, heads_kv, nk, dim))
    v = rng.standard_normal((batch, heads_kv, nk, dim))
    return q, k, v


@pytest.mark.parametrize("accumulate", ["float32", "float64"])
@pytest.mark.parametrize("lse_in_loss", [False, True])
@pytest.mark.parametrize("softcap", [None, 0.8])  # scale q·k has a deviation of 1.7: 0.8 bends it
# Sinks about the rows' largest logits, so that each weighs from little to most of a row; head
# 1 has none.
@pytest.mark.parametrize("sinks", [None, [0.5, -np.inf, 2.5, -1.0]])
# ALiBi slopes of FlashAttention's geometric form for 4 heads, one head without a bias.
@pytest.mark.parametrize("alibi_slopes", [None, [0.25, 0.0625, 0.0, 0.015625]])
@pytest.mark.parametrize("dim_v", [32, 24])  # v's head dim: q's and k's, and another (MLA)
def test_reference_attention_matches_float64_dense(accumulate, lse_in_loss, softcap, sinks,
                                                   alibi_slopes, dim_v):
    rng = np.random.default_rng(0)
    nq, nk, heads = 150, 200, 4
    # Rows q < 60 see nothing: out 0, lse -inf (or the sink), no gradient to q, k and v.
    mask = cm.compile("mask late() { q in all: k in [0, diag - 110] }")
    plan = mask.specialize(nq=nq, nk=nk, batch=2, heads=heads, tile=(64, 64))
    q, k, v = random_inputs(rng, 2, heads, 2, nq, nk, 32)
    v = v[..., :dim_v]
    dout = rng.standard_normal((*q.shape[:3], dim_v))
    dlse = rng.standard_normal(q.shape[:3]) if lse_in_loss else None
    got = cm.reference_attention(q, k, v, plan, scale=0.3, backward=dout, accumulate=accumulate,
                                 backward_lse=dlse, softcap=softcap, sinks=sinks,
                                 alibi_slopes=alibi_slopes)
    visible = plan.to_dense()
    assert not visible[:60].any() and visible[60:].any(axis=1).all()
    want = dense_attention64(q, k, v, visible, 0.3, dout, dlse, softcap, sinks, alibi_slopes)
    names = ["out", "lse", "dq", "dk", "dv"] + (["dsinks"] if sinks else [])
    for name, g, w in zip(names, [*got[:5], got.dsinks], want):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, err_msg=name)
    empty_lse = np.broadcast_to(np.float32(-np.inf) if sinks is None else
                                np.float32(sinks)[None, :, None], got.lse[:, :, :60].shape)
    np.testing.assert_array_equal(got.lse[:, :, :60], empty_lse)
    assert (got.dsinks is None) == (sinks is None)


def test_reference_attention_sink_errors():
    plan = cm.masks.causal().specialize(nq=8, tile=(16, 16))
    x = np.ones((1, 2, 8, 16))
    with pytest.raises(ValueError, match=r"sinks must hold one logit per query head: shape \[2\]"):
        cm.reference_attention(x, x, x, plan, sinks=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="sinks must be a 1-D floating-point array"):
        cm.reference_attention(x, x, x, plan, sinks=[1, 2])
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match=r"options.sinks\[1\] = .* must be finite or -inf"):
            cm.reference_attention(x, x, x, plan, sinks=[0.0, bad])


def test_reference_attention_alibi_errors():
    plan = cm.masks.causal().specialize(nq=8, tile=(16, 16))
    x = np.ones((1, 2, 8, 16))
    with pytest.raises(ValueError,
                       match=r"alibi_slopes must hold one slope per query head: shape \[2\]"):
        cm.reference_attention(x, x, x, plan, alibi_slopes=[0.5, 0.25, 0.125])
    with pytest.raises(ValueError, match="alibi_slopes must be a 1-D floating-point array"):
        cm.reference_attention(x, x, x, plan, alibi_slopes=[[0.5, 0.25]])
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match=r"options.alibi_slopes\[0\] = .* must be finite"):
            cm.reference_attention(x, x, x, plan, alibi_slopes=[bad, 0.5])
    strips = cm.masks.clear(4, 3, 2, strip=2, reorder=True).specialize(nq=13, tile=(16, 16))
    assert strips.token_order is not None
    y = np.ones((1, 2, 13, 16))
    with pytest.raises(ValueError, match="alibi_slopes needs a plan without a token_order"):
        cm.reference_attention(y, y, y, strips, alibi_slopes=[0.5, 0.25])


def test_reference_attention_default_scale_and_forward_only():
    rng = np.random.default_rng(1)
    plan = cm.masks.causal().specialize(nq=90, tile=(32, 32))
    q, k, v = random_inputs(rng, 1, 1, 1, 90, 90, 16)
    got = cm.reference_attention(q.astype(np.float32), k, v, plan)
    out, lse = dense_attention64(q, k, v, plan.to_dense(), 1 / math.sqrt(16))
    np.testing.assert_allclose(got.out, out, atol=1e-5)
    np.testing.assert_allclose(got.lse, lse, atol=1e-5)
    assert got.dq is None and got.dk is None and got.dv is None


def test_reference_attention_plan_of_one_head_serves_every_head():
    # As cm.attention: a plan of batch 1 and heads 1 serves any batch and head count.
    rng = np.random.default_rng(2)
    mask = cm.masks.sliding(20)
    q, k, v = (x.astype(np.float32) for x in random_inputs(rng, 2, 4, 2, 70, 70, 16))
    dout = rng.standard_normal(q.shape).astype(np.float32)
    one = cm.reference_attention(q, k, v, mask.specialize(nq=70, tile=(32, 32)), backward=dout)
    every = cm.reference_attention(q, k, v, mask.specialize(nq=70, batch=2, heads=4,
                                                            tile=(32, 32)), backward=dout)
    for name in ("out", "lse", "dq", "dk", "dv"):
        np.testing.assert_array_equal(getattr(one, name), getattr(every, name), err_msg=name)
    with pytest.raises(ValueError, match="shape.heads_q = 4 must equal the descriptor's heads = 2"):
        cm.reference_attention(q, k, v, mask.specialize(nq=70, heads=2, tile=(32, 32)))


@pytest.mark.parametrize("change, error, message", [
    (lambda q, k, v: (q.astype(np.int64), k, v), TypeError, "q must hold floating-point"),
    (lambda q, k, v: (q[0], k, v), ValueError, "q must be 4-D"),
    (lambda q, k, v: (q, k, v[:, :, :5]), ValueError, "v must have the shape of k"),
    (lambda q, k, v: (q[:, :, :10], k, v), ValueError, "nq"),
    (lambda q, k, v: (q[..., :8], k, v), ValueError, "head dim"),
])
def test_reference_attention_errors(change, error, message):
    rng = np.random.default_rng(2)
    plan = cm.masks.causal().specialize(nq=64, tile=(32, 32))
    q, k, v = random_inputs(rng, 1, 1, 1, 64, 64, 16)
    with pytest.raises(error, match=message):
        cm.reference_attention(*change(q, k, v), plan)


def test_reference_attention_argument_errors():
    plan = cm.masks.causal().specialize(nq=8, tile=(16, 16))
    x = np.zeros((1, 1, 8, 16))
    with pytest.raises(TypeError, match="plan must be a compilemask.Plan"):
        cm.reference_attention(x, x, x, "plan")
    with pytest.raises(ValueError, match="accumulate"):
        cm.reference_attention(x, x, x, plan, accumulate="half")
    for scale in (-1.0, 0, math.inf, True, "1"):
        with pytest.raises(ValueError, match="scale must be None or a finite number > 0"):
            cm.reference_attention(x, x, x, plan, scale=scale)
    for softcap in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="softcap must be None or a finite number > 0"):
            cm.reference_attention(x, x, x, plan, softcap=softcap)
    # numpy scalars are numbers too
    q, k, v = random_inputs(np.random.default_rng(4), 1, 1, 1, 8, 8, 16)
    np.testing.assert_array_equal(
        cm.reference_attention(q, k, v, plan, scale=np.float32(0.5), softcap=np.int64(2)).out,
        cm.reference_attention(q, k, v, plan, scale=0.5, softcap=2.0).out)
    with pytest.raises(ValueError, match="backward_lse needs backward"):
        cm.reference_attention(x, x, x, plan, backward_lse=np.zeros((1, 1, 8)))
    with pytest.raises(ValueError, match="backward_lse must have the LSE's shape"):
        cm.reference_attention(x, x, x, plan, backward=x, backward_lse=np.zeros((1, 8)))


def test_a_token_order_is_kept_checked_and_carried_by_the_plan():
    mask = cm.masks.clear(4, 3, 2, strip=2)
    order = cm.strip_order(4, 3, 3, 2, 13)
    plan = mask.specialize(nq=13, token_order=order)
    np.testing.assert_array_equal(plan.token_order, order)
    assert plan.token_order.dtype == np.int64 and not plan.token_order.flags.writeable
    mine = order.copy()
    kept = mask.specialize(nq=13, token_order=mine)
    mine[:] = 0  # the plan keeps its own copy
    np.testing.assert_array_equal(kept.token_order, order)
    assert "token_order" in repr(plan)
    assert mask.specialize(nq=13).token_order is None
    cases = [
        (order[:-1], ValueError, "token_order must have shape \\(13,\\)"),
        (order.astype(np.float32), TypeError, "token_order must hold integers"),
        (np.where(order == 5, 13, order), ValueError, "token_order\\[5\\] = 13 is outside"),
        (np.where(order == 5, 4, order), ValueError, "token 5 is missing"),
    ]
    for bad, error, message in cases:
        with pytest.raises(error, match=message):
            mask.specialize(nq=13, token_order=bad)
    with pytest.raises(ValueError, match="token_order needs nq == nk"):
        cm.masks.causal().specialize(nq=13, nk=14, token_order=order)


def test_clear_with_reorder_gives_its_plans_the_strip_order():
    mask = cm.masks.clear(4, 3, 2, strip=2, reorder=True)
    assert "token_order" in repr(mask)
    for n in (13, 20):  # each specialization gets the order of its own length
        np.testing.assert_array_equal(mask.specialize(nq=n).token_order,
                                      cm.strip_order(4, 3, 3, 2, n))
    given = np.arange(13)
    np.testing.assert_array_equal(mask.specialize(nq=13, token_order=given).token_order, given)
    with pytest.raises(ValueError, match="reorder=True needs a strip width"):
        cm.masks.clear(4, 3, 2, strip=None, reorder=True)
    with pytest.raises(ValueError, match="strip='auto' chooses the token order itself"):
        cm.masks.clear(4, 3, 2, reorder=True)


@pytest.mark.parametrize("objective", ["training", "forward"])
@pytest.mark.parametrize("n", [32768, 16384, 4096, 1024])
def test_clear_takes_strips_where_they_were_measured_faster(workloads, n, objective):
    """The benchmark's clear shapes (B * N = 32768, 16 heads): strips 16 columns wide with their
    token order at 16K and 32K, row-major below, the faster plans forward and forward +
    backward in runs 143 and 150 (bench_fwd.md and bench_bwd.md: clear against clear_strips;
    at 4K forward + backward the two are within 1.5%)."""
    _, p = workloads.clear(n)
    text, side, radius, m = p["text"], p["grid"][0], p["r"], p["N"]
    shape = dict(nq=m, batch=32768 // n, heads=16)
    chosen = cm.masks.clear(text, side, radius).specialize(objective=objective, **shape)
    row_major = cm.masks.clear(text, side, radius, strip=None).specialize(**shape)
    strips = cm.masks.clear(text, side, radius, strip=16, reorder=True).specialize(**shape)
    if n >= 16384:
        np.testing.assert_array_equal(chosen.token_order, strips.token_order)
        np.testing.assert_array_equal(chosen.descriptor, strips.descriptor)
    else:
        assert chosen.token_order is None
        np.testing.assert_array_equal(chosen.descriptor, row_major.descriptor)


def test_video_neighbourhoods_take_strips_for_training_and_row_major_for_inference():
    """Run 150 at 32K (8 frames of 64 x 64, radii 2, 8, 8): row-major 1.329 ms forward against
    1.425 in strips, but 6.113 ms forward + backward against 4.699: the backward skips the
    64-row halves that see nothing, and strips leave more of them empty."""
    video = cm.masks.video_neighbourhood(8, 64, 64, 2, 8, 8)
    n = 8 * 64 * 64
    assert video.specialize(nq=n, heads=16, objective="forward").token_order is None
    np.testing.assert_array_equal(video.specialize(nq=n, heads=16).token_order,
                                  cm.strip_order(0, 64, 64, 8, n, frames=8))


def test_the_estimate_counts_tiles_per_mask_and_the_gathers_of_a_token_order():
    mask = cm.masks.causal()
    one = mask.specialize(nq=4096)
    assert mask.specialize(nq=4096, heads=8, batch=2).estimated_forward_seconds() == \
        pytest.approx(16 * one.estimated_forward_seconds())
    assert mask.specialize(nq=8192).estimated_forward_seconds() > \
        3.9 * one.estimated_forward_seconds()
    gathered = mask.specialize(nq=4096, token_order=np.arange(4096))
    assert gathered.estimated_forward_seconds() > one.estimated_forward_seconds()
    # The backward is counted in 64-row halves, each costing more than a forward tile's half.
    assert _core.backward_halves(128, 128) == (64, 128)
    backward = _core.estimated_backward_seconds(mask.count_tiles(nq=4096, tile=(64, 128)),
                                                64, 128, 1)
    assert backward > 2 * one.estimated_forward_seconds()
    full = cm.compile("mask all_keys() { q in all: k in all }")
    assert _core.estimated_backward_seconds(full.count_tiles(nq=4096, tile=(64, 128)),
                                            64, 128, 1) > 1.8 * backward
    assert cm.masks.sliding(256).specialize(nq=4096).estimated_forward_seconds() < \
        one.estimated_forward_seconds()


@pytest.mark.parametrize("make, shape", [
    (lambda: cm.masks.clear(16, 30, 5, strip=5), {"nq": 16 + 30 * 30, "tile": (64, 32)}),
    (lambda: cm.masks.video_neighbourhood(3, 12, 10, 1, 3, 2, strip=4),
     {"nq": 360, "heads": 2, "tile": (16, 48)}),
    (lambda: cm.masks.hstu([0, 100, 333, 500], ctx=7, targets=[3, 9, 20]),
     {"nq": 500, "batch": 2}),
    (lambda: cm.masks.sliding(33), {"nq": 257, "nk": 300}),
])
def test_count_tiles_finds_the_counts_of_the_plans_stats(make, shape):
    """count_tiles skips the descriptor; its counts must be the built plan's, key by key."""
    mask = make()
    counts = mask.count_tiles(**shape)
    stats = mask.specialize(**shape).stats()
    assert counts["tiles"] > 0 and counts["partial_tiles"] > 0
    assert counts == {key: stats[key] for key in counts}


def paint_slices(q_ranges, k_ranges, types, nq, nk):
    """How many slices cover each pair, with row i of a slice of Lq rows seeing [k0, k1) (0),
    [k0, k1 - Lq + 1 + i) (1), [k0 + i, k1) (2) or both limits (3): MagiAttention's types."""
    count = np.zeros((nq, nk), dtype=np.int32)
    for (q0, q1), (k0, k1), t in zip(q_ranges.tolist(), k_ranges.tolist(), types.tolist()):
        for i in range(q1 - q0):
            lo = k0 + i if t in (2, 3) else k0
            hi = k1 - (q1 - q0) + 1 + i if t in (1, 3) else k1
            assert lo < hi, f"slice {(q0, q1, k0, k1, t)} has a row that sees no key"
            count[q0 + i, lo:hi] += 1
    return count


@pytest.mark.parametrize("make, shape, b, h", [
    (lambda: cm.masks.clear(16, 30, 5, strip=5), {"nq": 16 + 30 * 30}, 0, 0),
    (lambda: cm.masks.video_neighbourhood(3, 12, 10, 1, 3, 2, strip=4), {"nq": 360, "heads": 2},
     0, 1),
    (lambda: cm.masks.hstu([0, 100, 333, 500], ctx=7, targets=[3, 9, 20]),
     {"nq": 500, "batch": 2}, 1, 0),
    (lambda: cm.masks.sliding(33), {"nq": 257, "nk": 300}, 0, 0),
])
def test_slices_cover_each_visible_pair_once(make, shape, b, h):
    mask = make()
    q_ranges, k_ranges, types = mask.slices(**shape, b=b, h=h)
    assert q_ranges.dtype == k_ranges.dtype == types.dtype == np.int32
    assert q_ranges.shape == k_ranges.shape == (len(types), 2) and len(types) > 0
    dense = mask.specialize(**shape).to_dense(b, h)
    count = paint_slices(q_ranges, k_ranges, types, *dense.shape)
    np.testing.assert_array_equal(count, dense.astype(np.int32))


def test_slices_of_a_sliding_window_and_their_errors():
    q_ranges, k_ranges, types = cm.compile(SLIDING).slices(nq=300, W=64)
    # Rows [0, 64) see [0, q] (causal); later rows (q - 64, q], both ends moving (bi-causal).
    assert q_ranges.tolist() == [[0, 64], [64, 300]]
    assert k_ranges.tolist() == [[0, 64], [1, 300]]
    assert types.tolist() == [1, 3]
    np.testing.assert_array_equal(paint_slices(q_ranges, k_ranges, types, 300, 300),
                                  numpy_sliding(300, 300, 64))
    with pytest.raises(IndexError, match=r"h = 2 is outside \[0, 2\)"):
        cm.masks.sliding(8).slices(nq=64, heads=2, h=2)
    with pytest.raises(TypeError, match="b must be an integer"):
        cm.masks.sliding(8).slices(nq=64, b=0.5)
    with pytest.raises(TypeError, match="heads must be an integer"):
        cm.masks.sliding(8).slices(nq=64, heads="2")
    with pytest.raises(TypeError, match="parameter 'W' \\(int\\) must be an integer"):
        cm.compile(SLIDING).slices(nq=64, W=True)


def test_a_plan_choice_takes_the_fastest_candidate_that_fits_the_shape():
    reverse = cm.masks.causal().with_token_order(lambda nq: np.arange(nq)[::-1])
    choice = cm.PlanChoice(reverse, cm.masks.sliding(64), cm.masks.causal())
    assert choice.specialize(nq=1024).mask_name == "sliding_window"
    # A tie goes to the first; cross-attention leaves out the candidates with a token order.
    assert choice.specialize(nq=64).mask_name == "sliding_window"
    cross = cm.PlanChoice(reverse, cm.masks.causal()).specialize(nq=300, nk=500)
    assert cross.mask_name == "causal" and cross.token_order is None
    with pytest.raises(ValueError, match="every candidate has a token order"):
        cm.PlanChoice(reverse).specialize(nq=300, nk=500)
    assert choice.specialize(nq=1024, objective="forward").mask_name == "sliding_window"
    with pytest.raises(ValueError, match="objective must be 'training' or 'forward'"):
        choice.specialize(nq=64, objective="inference")
    with pytest.raises(TypeError, match="takes no token_order"):
        choice.specialize(nq=64, token_order=np.arange(64))
    with pytest.raises(ValueError, match="at least one candidate"):
        cm.PlanChoice()
    with pytest.raises(TypeError, match="candidate 1 must be a BoundMask"):
        cm.PlanChoice(reverse, cm.masks.program("causal"))


def test_the_reference_takes_a_token_order_plans_rows_in_the_arrays_order():
    n = 4 + 5 * 5
    order = cm.strip_order(4, 5, 5, 2, n)
    mask = cm.masks.clear(4, 5, 2, strip=2)
    plain = mask.specialize(nq=n, heads=2)
    ordered = mask.specialize(nq=n, heads=2, token_order=order)
    rng = np.random.default_rng(4)
    q, k, v, dout = (rng.standard_normal((1, 2, n, 8)) for _ in range(4))
    dlse = rng.standard_normal((1, 2, n))
    got = cm.reference_attention(q, k, v, ordered, backward=dout, backward_lse=dlse,
                                 accumulate="float64")
    # The same rows gathered by hand into the mask's order, the results put back.
    gathered = cm.reference_attention(*(x[:, :, order] for x in (q, k, v)), plain,
                                      backward=dout[:, :, order],
                                      backward_lse=dlse[:, :, order], accumulate="float64")
    position = np.argsort(order)
    assert got.dsinks is None and gathered.dsinks is None  # no sinks
    for name, g, w in zip(cm.ReferenceResult._fields[:5], got, gathered):
        np.testing.assert_allclose(g, w[:, :, position], rtol=1e-12, atol=1e-12, err_msg=name)
    unordered = cm.reference_attention(q, k, v, plain, accumulate="float64")
    assert not np.allclose(unordered.out, got.out), "the order must change the result"


def neighbourhood_visible(shape, radii, grid_shape):
    """The dense [n, n] visibility of a row-major grid's box or ellipse neighbourhoods (numpy,
    independent of the compiler)."""
    coords = np.stack(np.unravel_index(np.arange(np.prod(grid_shape)), grid_shape), axis=1)
    delta = np.abs(coords[:, None, :] - coords[None, :, :])
    if shape == "box":
        return (delta <= np.array(radii)).all(-1)
    return ((delta / np.array(radii, dtype=np.float64)) ** 2).sum(-1) < 1 - 1e-12


@pytest.mark.parametrize("helper, args, shape, grid_shape, radii", [
    (cm.masks.neighbourhood_2d, (9, 11, 2, 3, "box"), "box", (9, 11), (2, 3)),
    (cm.masks.neighbourhood_2d, (9, 11, 3, 2, "ellipse"), "ellipse", (9, 11), (3, 2)),
    (cm.masks.video_neighbourhood, (3, 6, 7, 2, 2, 3), "ellipse", (3, 6, 7), (2, 2, 3)),
])
def test_neighbourhood_helpers_in_every_token_order(helper, args, shape, grid_shape, radii):
    n = int(np.prod(grid_shape))
    want = neighbourhood_visible(shape, radii, grid_shape)
    row_major = helper(*args, strip=None).specialize(nq=n, tile=(16, 16))
    np.testing.assert_array_equal(row_major.to_dense(), want)
    frames = grid_shape[0] if len(grid_shape) == 3 else 1
    order = cm.strip_order(0, grid_shape[-2], grid_shape[-1], 3, n, frames=frames)
    in_strips = helper(*args, strip=3).specialize(nq=n, tile=(16, 16))
    np.testing.assert_array_equal(in_strips.to_dense(), want[order][:, order])
    reordered = helper(*args, strip=3, reorder=True).specialize(nq=n, tile=(16, 16))
    np.testing.assert_array_equal(reordered.token_order, order)
    np.testing.assert_array_equal(reordered.descriptor, in_strips.descriptor)


def test_neighbourhood_helpers_take_strips_on_large_images_only():
    large = cm.masks.neighbourhood_2d(181, 181, 8, 8).specialize(nq=181 * 181, heads=16)
    assert large.token_order is not None
    np.testing.assert_array_equal(large.token_order, cm.strip_order(0, 181, 181, 8, 181 * 181))
    small = cm.masks.neighbourhood_2d(64, 64, 3, 3).specialize(nq=64 * 64, heads=16)
    assert small.token_order is None
    video = cm.masks.video_neighbourhood(4, 90, 90, 2, 12, 12).specialize(nq=4 * 90 * 90)
    np.testing.assert_array_equal(video.token_order,
                                  cm.strip_order(0, 90, 90, 12, 4 * 90 * 90, frames=4))
    with pytest.raises(ValueError, match="shape must be 'box' or 'ellipse'"):
        cm.masks.neighbourhood_2d(9, 9, 2, 2, shape="disk")
    with pytest.raises(ValueError, match="video_neighbourhood: strip='auto' chooses"):
        cm.masks.video_neighbourhood(2, 9, 9, 1, 2, 2, reorder=False)
    with pytest.raises(ValueError, match="neighbourhood_2d: reorder=True needs a strip width"):
        cm.masks.neighbourhood_2d(9, 9, 2, 2, strip=None, reorder=True)


def test_strip_order_is_the_strip_layout_and_checks_its_input():
    order = cm.strip_order(2, 3, 5, 2, 18)
    # Rows of 5 from token 2; strips of columns {0, 1}, {2, 3}, {4}; token 17 stays.
    expected = [0, 1, 2, 3, 7, 8, 12, 13, 4, 5, 9, 10, 14, 15, 6, 11, 16, 17]
    np.testing.assert_array_equal(order, expected)
    video = cm.strip_order(0, 2, 3, 2, 12, frames=2)
    np.testing.assert_array_equal(video, [0, 1, 3, 4, 2, 5, 6, 7, 9, 10, 8, 11])
    with pytest.raises(ValueError, match="strip must be >= 1, got 0"):
        cm.strip_order(0, 4, 4, 0, 16)
    with pytest.raises(ValueError, match="from token 2 does not fit in 10 tokens"):
        cm.strip_order(2, 3, 3, 2, 10)
    with pytest.raises(ValueError, match="does not fit in 10 tokens"):  # no overflow
        cm.strip_order(0, 2**40, 2**40, 2, 10)
    with pytest.raises(TypeError):
        cm.strip_order(0, 4, 4, "2", 16)


# ---- plans from descriptor bytes, pickling ------------------------------------------------

def test_a_plan_comes_back_from_its_descriptor_bytes(tmp_path):
    plan = cm.masks.doc_causal([0, 100, 250, 300]).specialize(nq=300, batch=2, heads=3,
                                                               tile=(64, 32))
    path = tmp_path / "plan.desc"
    path.write_bytes(plan.descriptor.tobytes())
    for data in (path.read_bytes(), plan.descriptor, bytearray(path.read_bytes())):
        loaded = cm.Plan.from_descriptor(data, mask_name="doc_causal")
        assert (loaded.nq, loaded.nk, loaded.batch, loaded.heads, loaded.tile) == (
            300, 300, 2, 3, (64, 32))
        np.testing.assert_array_equal(loaded.to_dense(1, 2), plan.to_dense(1, 2))
        assert {**loaded.stats(), "build_seconds": 0} == {**plan.stats(), "build_seconds": 0}
        assert loaded.stats()["build_seconds"] == 0


def test_bad_descriptor_bytes_name_the_rule():
    plan = cm.masks.causal().specialize(nq=100)
    corrupt = bytearray(plan.descriptor.tobytes())
    corrupt[0] ^= 0xFF
    with pytest.raises(ValueError, match="bad magic"):
        cm.Plan.from_descriptor(corrupt)
    with pytest.raises(ValueError, match="differs from the blob size"):
        cm.Plan.from_descriptor(plan.descriptor[:-8])
    with pytest.raises(ValueError, match="smaller than its 96-byte header"):
        cm.Plan.from_descriptor(b"")
    with pytest.raises(TypeError, match="takes bytes or a uint8 array, got str"):
        cm.Plan.from_descriptor("CMSK")


def test_plans_pickle_with_their_token_order():
    import copy
    import pickle

    plan = cm.masks.clear(40, 20, 5, strip=6, reorder=True).specialize(nq=440, heads=2)
    back = pickle.loads(pickle.dumps(plan))
    assert back.mask_name == plan.mask_name == "clear"
    np.testing.assert_array_equal(back.token_order, plan.token_order)
    np.testing.assert_array_equal(back.to_dense(0, 1), plan.to_dense(0, 1))
    assert back.descriptor.tobytes() == plan.descriptor.tobytes()
    assert back.device is None
    assert copy.copy(plan)._core is plan._core  # a copy shares the descriptor


# ---- the helpers of the other bundled programs, against numpy statements of their masks ---

def _grid(nq, nk):
    q = np.arange(nq)[:, None] + (nk - nq)  # bottom-right aligned: diag = q + nk - nq
    return q, np.arange(nk)[None, :]


@pytest.mark.parametrize("nq, nk", [(300, 300), (200, 330)])
def test_the_other_helpers_mean_their_masks(nq, nk):
    q, k = _grid(nq, nk)
    expected = {
        "sinks_window": (cm.masks.sinks_window(5, 40), ((k < 5) | (k > q - 40)) & (k <= q)),
        "chunked_causal": (cm.masks.chunked_causal(64), (k >= q // 64 * 64) & (k <= q)),
        "prefix_lm": (cm.masks.prefix_lm(50), (k < 50) | (k <= q)),
        "block_causal_video": (cm.masks.block_causal_video(48), k < (q // 48 + 1) * 48),
    }
    for name, (bound, want) in expected.items():
        plan = bound.specialize(nq=nq, nk=nk, tile=(64, 64))
        np.testing.assert_array_equal(plan.to_dense(), want, err_msg=name)


def test_per_head_window_and_cross_attention_helpers():
    windows = [3, 50, 3, 200]
    plan = cm.masks.per_head_window(windows).specialize(nq=256, heads=4)
    q, k = _grid(256, 256)
    for h, w in enumerate(windows):
        np.testing.assert_array_equal(plan.to_dense(0, h), (k <= q) & (k > q - w), err_msg=h)
    plan = cm.masks.cross_attention([0, 100, 260], [0, 30, 90]).specialize(nq=260, nk=90)
    doc_q = np.searchsorted([100, 260], np.arange(260), side="right")
    doc_k = np.searchsorted([30, 90], np.arange(90), side="right")
    np.testing.assert_array_equal(plan.to_dense(), doc_q[:, None] == doc_k[None, :])


def test_padded_batches_hide_the_padding_per_batch_row():
    lengths = [300, 0, 120]
    q, k = _grid(300, 300)
    for causal in (True, False):
        plan = cm.masks.padded(lengths, causal=causal).specialize(nq=300, batch=3)
        for b, n in enumerate(lengths):
            want = (q < n) & (k < n) & ((k <= q) if causal else True)
            np.testing.assert_array_equal(plan.to_dense(b, 0), want, err_msg=f"{causal} {b}")
    with pytest.raises(ValueError, match="lengths hold 3 batch rows, so batch must be 3, got 4"):
        cm.masks.padded(lengths).specialize(nq=300, batch=4)
    with pytest.raises(ValueError, match="so batch must be 3, got 1"):
        cm.masks.padded(lengths).count_tiles(nq=300)
    with pytest.raises(ValueError, match=r"parameter 'lengths' element 1 must be >= 0, got -2"):
        cm.masks.padded(np.array([5, -2])).specialize(nq=8, batch=2)
    with pytest.raises(ValueError, match="one length per batch row, got shape"):
        cm.masks.padded(5)
    with pytest.raises(TypeError, match="lengths must be integers"):
        cm.masks.padded([1.5, 2])


def test_row_intervals_give_each_row_its_keys():
    rng = np.random.default_rng(7)
    nq, nk, batch = 150, 210, 3
    starts = rng.integers(-20, nk, size=(batch, nq))
    ends = starts + rng.integers(-5, 120, size=(batch, nq))  # some empty, some past nk
    k = np.arange(nk)[None, :]
    plan = cm.masks.row_intervals(starts, ends).specialize(nq=nq, nk=nk, batch=batch, heads=2)
    for b in range(batch):
        want = (k >= starts[b][:, None]) & (k < ends[b][:, None])
        for h in range(2):
            np.testing.assert_array_equal(plan.to_dense(b, h), want, err_msg=f"{b} {h}")
    plan = cm.masks.row_intervals(list(starts[1]), ends[1]).specialize(nq=nq, nk=nk, batch=2)
    for b in range(2):  # one set of rows for every batch row
        np.testing.assert_array_equal(
            plan.to_dense(b, 0), (k >= starts[1][:, None]) & (k < ends[1][:, None]))


def test_row_intervals_check_their_shapes():
    starts, ends = np.zeros((2, 50), dtype=np.int32), np.array([[10] * 50, [20] * 50])
    bound = cm.masks.row_intervals(starts, ends)
    with pytest.raises(ValueError, match="hold 50 rows, so nq must be 50, got 60"):
        bound.specialize(nq=60, batch=2)
    with pytest.raises(ValueError, match="hold 2 batch rows, so batch must be 2, got 3"):
        bound.count_tiles(nq=50, batch=3)
    with pytest.raises(ValueError, match="must have one shape"):
        cm.masks.row_intervals(starts, ends[:, :49])
    with pytest.raises(TypeError, match="starts must be integers"):
        cm.masks.row_intervals(starts.astype(np.float32), ends)
    assert bound.specialize(nq=50, batch=2).stats()["visible_pairs"] == 50 * 10 + 50 * 20


def test_from_dense_keeps_a_dense_mask_of_one_interval_per_row():
    rng = np.random.default_rng(8)
    batch, nq, nk = 2, 130, 170
    starts = rng.integers(0, nk, size=(batch, nq))
    ends = np.minimum(nk, starts + rng.integers(0, 60, size=(batch, nq)))  # some rows empty
    k = np.arange(nk)
    dense = (k >= starts[..., None]) & (k < ends[..., None])
    plan = cm.masks.from_dense(dense).specialize(nq=nq, nk=nk, batch=batch)
    for b in range(batch):
        np.testing.assert_array_equal(plan.to_dense(b, 0), dense[b], err_msg=b)
    # Bounds that follow a formula compile as the program stating it does, byte for byte.
    causal = np.tril(np.ones((1000, 1000), dtype=bool))
    assert (cm.masks.from_dense(causal).specialize(nq=1000).descriptor.tobytes() ==
            cm.masks.causal().specialize(nq=1000).descriptor.tobytes())


@pytest.mark.parametrize("batch, nq, nk", [(2, 120, 160), (2, 1100, 2000)])  # 2: over 4M cells
def test_from_dense_takes_two_runs_per_row(batch, nq, nk):
    """Rows of one run, two runs (touching runs merge) or none; a large mask is read a block
    of rows at a time."""
    rng = np.random.default_rng(9)
    k = np.arange(nk)
    a = rng.integers(0, nk, size=(batch, nq))
    b = np.minimum(nk, a + rng.integers(0, 40, size=(batch, nq)))
    c = np.minimum(nk, b + rng.integers(0, 30, size=(batch, nq)))
    d = np.minimum(nk, c + rng.integers(0, 40, size=(batch, nq)))
    dense = ((k >= a[..., None]) & (k < b[..., None])) | ((k >= c[..., None]) & (k < d[..., None]))
    bound = cm.masks.from_dense(dense)
    assert bound.mask.name == "row_intervals_2"
    plan = bound.specialize(nq=nq, nk=nk, batch=batch)
    for i in range(batch):
        np.testing.assert_array_equal(plan.to_dense(i, 0), dense[i], err_msg=i)
    # Sinks plus a window compile as the program stating them, byte for byte.
    q = np.arange(600)[:, None]
    sinks = ((np.arange(600) < 4) | (np.arange(600) > q - 100)) & (np.arange(600) <= q)
    assert (cm.masks.from_dense(sinks).specialize(nq=600).descriptor.tobytes() ==
            cm.masks.sinks_window(4, 100).specialize(nq=600).descriptor.tobytes())


def test_from_dense_names_a_row_of_three_runs_in_a_later_block():
    """numpy reads 2^22 cells at a time: row 2099 of 2100 rows of 2000 keys is in the second
    block, and the error names it, not a row of the first."""
    dense = np.zeros((2100, 2000), dtype=bool)
    dense[2099, [0, 5, 1999]] = True
    with pytest.raises(ValueError, match="row 2099 sees 3 separate runs of keys"):
        cm.masks.from_dense(dense)


def test_row_intervals_take_a_second_interval_per_row():
    starts, ends = np.array([0, 5, 9]), np.array([2, 6, 9])
    plan = cm.masks.row_intervals(starts, ends, [4, 0, 1], [6, 3, 4]).specialize(nq=3, nk=10)
    k = np.arange(10)
    want = [(k < 2) | ((k >= 4) & (k < 6)), (k == 5) | (k < 3), (k >= 1) & (k < 4)]
    np.testing.assert_array_equal(plan.to_dense(), np.array(want))
    with pytest.raises(ValueError, match="give starts2 and ends2 together"):
        cm.masks.row_intervals(starts, ends, starts2=starts)
    with pytest.raises(ValueError, match="must have one shape"):
        cm.masks.row_intervals(starts, ends, starts, ends[:2])


def test_from_dense_names_what_it_cannot_take():
    dense = np.zeros((2, 40, 50), dtype=bool)
    dense[1, 7, [3, 4, 9, 20]] = True
    with pytest.raises(ValueError, match="row 7 of batch row 1 sees 3 separate runs of keys"):
        cm.masks.from_dense(dense)
    with pytest.raises(ValueError, match="expected a boolean array"):
        cm.masks.from_dense(dense.astype(np.int8))
    with pytest.raises(ValueError, match="expected a boolean array"):
        cm.masks.from_dense(dense[0, 0])
    with pytest.raises(ValueError, match=r"with no empty axis, got dtype bool and shape \(0, 50\)"):
        cm.masks.from_dense(dense[0, :0])
    bound = cm.masks.from_dense(dense[0])
    with pytest.raises(ValueError, match="the mask has 50 keys, so nk must be 50, got 40"):
        bound.specialize(nq=40)
    assert bound.specialize(nq=40, nk=50).stats()["visible_pairs"] == 0



def test_bounds_per_head_give_each_head_its_keys():
    """[batch, heads, nq] bounds: the per-head program when heads differ, one set when they do
    not; an axis of 1 serves every batch row or head."""
    rng = np.random.default_rng(10)
    batch, heads, nq, nk = 2, 3, 70, 90
    starts = rng.integers(-10, nk, size=(batch, heads, nq))
    ends = starts + rng.integers(-5, 50, size=(batch, heads, nq))
    k = np.arange(nk)

    def want(s, e):
        return (k >= s[:, None]) & (k < e[:, None])

    bound = cm.masks.row_intervals(starts, ends)
    assert bound.mask.name == "row_intervals_per_head"
    plan = bound.specialize(nq=nq, nk=nk, batch=batch, heads=heads)
    for b in range(batch):
        for h in range(heads):
            np.testing.assert_array_equal(plan.to_dense(b, h), want(starts[b, h], ends[b, h]),
                                          err_msg=f"{b} {h}")
    with pytest.raises(ValueError, match="hold 3 heads, so heads must be 3, got 2"):
        bound.specialize(nq=nq, nk=nk, batch=batch, heads=2)
    with pytest.raises(ValueError, match="hold 2 batch rows, so batch must be 2, got 1"):
        bound.specialize(nq=nq, nk=nk, heads=heads)
    # One batch row of heads serves every batch row.
    plan = cm.masks.row_intervals(starts[1:], ends[1:]).specialize(nq=nq, nk=nk, batch=3,
                                                                   heads=heads)
    for b in range(3):
        np.testing.assert_array_equal(plan.to_dense(b, 2), want(starts[1, 2], ends[1, 2]))
    # Heads alike: the shared program, checked against the heads given all the same.
    same = np.repeat(starts[:, :1], heads, axis=1), np.repeat(ends[:, :1], heads, axis=1)
    bound = cm.masks.row_intervals(*same)
    assert bound.mask.name == "row_intervals"
    np.testing.assert_array_equal(
        bound.specialize(nq=nq, nk=nk, batch=batch, heads=heads).to_dense(1, 2),
        want(starts[1, 0], ends[1, 0]))
    with pytest.raises(ValueError, match="so heads must be 3, got 1"):
        bound.specialize(nq=nq, nk=nk, batch=batch)


def test_from_dense_reads_an_attn_mask_per_head():
    """An SDPA-shaped [batch, heads, nq, nk] mask, with size-1 axes broadcast."""
    rng = np.random.default_rng(11)
    batch, heads, nq, nk = 2, 4, 60, 80
    q, k = np.arange(nq)[:, None], np.arange(nk)
    window = rng.integers(1, 40, size=(batch, heads))[..., None, None]
    sink = rng.integers(0, 5, size=(batch, heads))[..., None, None]
    dense = ((k > q - window) | (k < sink)) & (k <= q)  # sinks plus a window, per (b, h)
    bound = cm.masks.from_dense(dense)
    assert bound.mask.name == "row_intervals_per_head"
    plan = bound.specialize(nq=nq, nk=nk, batch=batch, heads=heads)
    for b in range(batch):
        for h in range(heads):
            np.testing.assert_array_equal(plan.to_dense(b, h), dense[b, h], err_msg=f"{b} {h}")
    # [1, 1, nq, nk] serves any batch and heads, as the program of the same mask does.
    causal = np.tril(np.ones((1, 1, 200, 200), dtype=bool))
    assert (cm.masks.from_dense(causal).specialize(nq=200, batch=3, heads=2).descriptor.tobytes()
            == cm.masks.causal().specialize(nq=200, batch=3, heads=2).descriptor.tobytes())
    broadcast = cm.masks.from_dense(dense[:1]).specialize(nq=nq, nk=nk, batch=3, heads=heads)
    np.testing.assert_array_equal(broadcast.to_dense(2, 3), dense[0, 3])
    # An axis broadcast by stride 0 is read once, as an axis of 1: any batch serves.
    expanded = np.broadcast_to(dense[:1], dense.shape)
    plan = cm.masks.from_dense(expanded).specialize(nq=nq, nk=nk, batch=5, heads=heads)
    np.testing.assert_array_equal(plan.to_dense(4, 1), dense[0, 1])
    split = dense.copy()
    split[1, 2, 30] = (k == 0) | (k == 5) | ((k > 20) & (k <= 30))  # three runs
    with pytest.raises(ValueError, match="row 30 of head 2 of batch row 1 sees 3 separate runs"):
        cm.masks.from_dense(split)


def test_the_kernels_head_dim_rule_comes_from_the_cuda_limits():
    # cm.attention checks head dims with these before anything reaches the GPU.
    assert [d for d in range(-8, 300) if _core.head_dim_supported(d)] == list(range(8, 257, 8))
    assert _core.MAX_HEAD_DIM == 256
    assert _core.HEAD_DIM_RULE == "a multiple of 8 from 8 to 256"
