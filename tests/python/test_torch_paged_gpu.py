"""GPU tests of cm.attention on paged K/V: the forward against the float64 dense reference over
page sizes, batch shapes and split keys, and the paged arguments' errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

# torch_gpu first: it skips this module where the kernels cannot run.
from torch_gpu import DEVICE, assert_lse_matches, check_against_references, to_bhsd, visible_of
import torch  # noqa: E402
import compilemask as cm  # noqa: E402


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
