"""GPU correctness of the sm90 forward kernel against dense references built from the
workloads.py predicates (../shared/reference), computed in float64 on the GPU.

Rule per case: max |O - O64| <= 2 * max |O_naive - O64| + atol, where O_naive is a naive torch
attention in the input precision (bf16 or fp16); the LSE must match the float64 LSE; rows that
see no key must give O = 0 exactly and LSE = -inf; outputs are NaN-poisoned before the run, so
an unwritten element fails. Inputs are fresh random data for every case. Besides the cases the
backward test shares (dense_cases.py), causal rows run against K and V in shuffled pools of
pages through the C entry point's page table, with NaN in every slot that holds no key.

Usage: test_forward.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       [--examples examples] [--workloads DIR] [--quick] [--mainloop auto|serial|pingpong]
Exit code 0 all passed, 1 a case failed, 77 no GPU (skipped).
"""
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed; the dense GPU reference needs it")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
from dense_cases import argument_parser, run_plan, suite_cases  # noqa: E402

ATOL = 1e-3
LSE_TOL = 2e-3
MAINLOOP = "auto"  # set from --mainloop


def reference(q, k, v, visible, scale, dtype):
    """Dense attention in `dtype`. q [B,Hq,Sq,D], k/v [B,Hkv,Sk,D], visible [Sq,Sk] bool.
    Returns O [B,Hq,Sq,D] and the natural-log LSE [B,Hq,Sq] (-inf, O = 0 on empty rows)."""
    group = q.shape[1] // k.shape[1]
    q, k, v = q.to(dtype), k.to(dtype).repeat_interleave(group, 1), v.to(dtype).repeat_interleave(group, 1)
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s.to(torch.float64), dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return (p @ v), lse


# Layouts of K and V in pools of pages (cm::cuda::PagedKV, through the C entry point), with q
# and out [B, S, H, D]: page size by layout name.
PAGE_SIZES = {"paged16": 16, "paged128": 128}


def paged_cases():
    """Causal rows, nq != nk, against keys in pages of 16 rows (one TMA box per page) and of 128
    (one per stage)."""
    from dense_cases import Case, causal_visible
    shapes = [((1, 4097), "paged16"), ((113, 300), "paged16"), ((257, 1000), "paged128")]
    return [Case("causal_paged", "causal.mask", {}, causal_visible(nq, nk), nq, nk, heads_q=8,
                 heads_kv=2, layout=layout) for (nq, nk), layout in shapes]


def in_shuffled_pages(k, v, page_size):
    """k and v [B, S, H, D] in shuffled pools of pages [pages, page_size, H, D] with a spare
    page, NaN in every slot that holds no key; returns (k pool, v pool, page table [B, pages
    per sequence])."""
    from cm_kernel import in_pages
    B, S = k.shape[:2]
    per = -(-S // page_size)
    pool_pages = B * per + 1  # one page no sequence uses
    table = torch.randperm(pool_pages, device=k.device)[:B * per].view(B, per).int()
    return (in_pages(k, page_size, table, pool_pages), in_pages(v, page_size, table, pool_pages),
            table)


def run_case(kernel, cli, examples, case):
    from cm_kernel import compile_descriptor
    B, Hq, Hkv, D = case.batch, case.heads_q, case.heads_kv, case.head_dim
    desc = compile_descriptor(cli, os.path.join(examples, case.mask_file), case.params,
                              case.nq, case.nk)
    gen = lambda n, h: torch.randn(B, h, n, D, device="cuda", dtype=case.dtype)  # [B,H,S,D]
    q, k, v = gen(case.nq, Hq), gen(case.nk, Hkv), gen(case.nk, Hkv)
    scale = case.scale if case.scale else D ** -0.5

    q_offsets = k_offsets = page_table = None
    # Packed cases of odd length have the rows between the sequences written (0, and -inf in the
    # LSE: cm::cuda::Problem::write_rows_outside_sequences); the others leave them as they are.
    write_outside = case.layout == "thd" and case.nq % 2 == 1
    if case.layout == "bshd" or case.layout in PAGE_SIZES:
        as_layout = lambda t: t.transpose(1, 2).contiguous()
        out = torch.full((B, case.nq, Hq, D), float("nan"), device="cuda", dtype=case.dtype)
        lse = torch.full((B, Hq, case.nq), float("nan"), device="cuda", dtype=torch.float32)
    elif case.layout == "bhsd":
        as_layout = lambda t: t.contiguous()
        out = torch.full((B, Hq, case.nq, D), float("nan"), device="cuda", dtype=case.dtype)
        lse = torch.full((B, Hq, case.nq), float("nan"), device="cuda", dtype=torch.float32)
    else:  # thd: sequences packed back to back with a gap of 3 rows, offsets per sequence
        def as_layout(t):
            n = t.shape[2]
            packed = torch.zeros(B * (n + 3), t.shape[1], D, device="cuda", dtype=t.dtype)
            for b in range(B):
                packed[b * (n + 3): b * (n + 3) + n] = t[b].transpose(0, 1)
            return packed
        q_offsets = torch.arange(B, device="cuda", dtype=torch.int32) * (case.nq + 3)
        k_offsets = torch.arange(B, device="cuda", dtype=torch.int32) * (case.nk + 3)
        out = torch.full((B * (case.nq + 3), Hq, D), float("nan"), device="cuda", dtype=case.dtype)
        lse = torch.full((Hq, B * (case.nq + 3)), float("nan"), device="cuda", dtype=torch.float32)

    keys, values = as_layout(k), as_layout(v)
    layout = case.layout
    if layout in PAGE_SIZES:
        keys, values, page_table = in_shuffled_pages(keys, values, PAGE_SIZES[layout])
        layout = "bshd"
    kernel.forward(desc, as_layout(q), keys, values, out, lse, layout=layout, scale=case.scale,
                   q_offsets=q_offsets, k_offsets=k_offsets, mainloop=MAINLOOP,
                   page_table=page_table, write_rows_outside=write_outside)
    torch.cuda.synchronize()

    # Back to [B, Hq, Sq, D] and [B, Hq, Sq].
    if layout == "bshd":
        o = out.transpose(1, 2)
    elif layout == "bhsd":
        o = out
    else:
        o = torch.stack([out[b * (case.nq + 3): b * (case.nq + 3) + case.nq].transpose(0, 1)
                         for b in range(B)])
        lse_rows = lse
        lse = torch.stack([lse[:, b * (case.nq + 3): b * (case.nq + 3) + case.nq] for b in range(B)])
        # The gap rows between sequences: untouched (still NaN), or written as rows that see
        # no key.
        gap_rows = [r for b in range(B) for r in range(b * (case.nq + 3) + case.nq,
                                                       (b + 1) * (case.nq + 3))]
        gaps, gap_lse = out[gap_rows].float(), lse_rows[:, gap_rows]
        if write_outside and not ((gaps == 0).all() and torch.isneginf(gap_lse).all()):
            return False, "rows outside its sequences not written as 0 and -inf"
        if not write_outside and not (torch.isnan(gaps).all() and torch.isnan(gap_lse).all()):
            return False, "wrote rows outside its sequences"

    o64, lse64 = reference(q, k, v, case.visible, scale, torch.float64)
    onaive, _ = reference(q, k, v, case.visible, scale, case.dtype)
    of = o.to(torch.float64)
    if torch.isnan(of).any() or torch.isnan(lse).any():
        return False, f"NaN in output ({int(torch.isnan(of).sum())}) or LSE ({int(torch.isnan(lse).sum())})"
    err = (of - o64).abs().max().item() if of.numel() else 0.0
    err_naive = (onaive.to(torch.float64) - o64).abs().max().item() if of.numel() else 0.0
    empty = ~case.visible.any(dim=-1)  # [Sq]
    lse_ok = torch.isneginf(lse[:, :, empty]).all().item()
    if lse_ok and (~empty).any():
        lse_err = (lse[:, :, ~empty].to(torch.float64) - lse64[:, :, ~empty]).abs().max().item()
    else:
        lse_err = 0.0 if lse_ok else float("inf")
    zero_ok = (o[:, :, empty] == 0).all().item()
    ok = err <= 2 * err_naive + ATOL and lse_err <= LSE_TOL and zero_ok
    detail = (f"err={err:.2e} naive={err_naive:.2e} lse_err={lse_err:.1e} "
              f"empty_rows={int(empty.sum())} zero_ok={zero_ok}")
    return ok, detail


def main():
    ap = argument_parser()
    ap.add_argument("--mainloop", default="auto", choices=["auto", "serial", "pingpong"])
    a = ap.parse_args()
    global MAINLOOP
    MAINLOOP = a.mainloop
    cases = suite_cases(a, "sm90 forward tests", quick_lengths=5)
    if cases is None:
        return 77
    cases += paged_cases()
    from cm_kernel import Kernel
    return run_plan([(case, run_case) for case in cases], Kernel(a.lib), a.cli, a.examples)


if __name__ == "__main__":
    sys.exit(main())
