"""GPU correctness of the sm90 backward kernel against dense references built from the
workloads.py predicates (../shared/reference), computed in float64 on the GPU.

Rule per case and per gradient g in (dQ, dK, dV):
    max |g - g64| <= 2 * max |g_naive - g64| + ATOL
where g64 is the exact backward in float64 and g_naive the same formulas evaluated in the input
precision (bf16 or fp16). The kernel gets O and LSE from the float64 forward (O rounded to the
input precision), fresh random inputs per case, and NaN-poisoned outputs, so an unwritten
element fails. Rows that see no key must get dQ = 0 exactly. Every third case runs again with a
random gradient of the LSE as well. Deterministic mode must give bitwise-identical dQ, dK and dV
over 10 runs.

Usage: bwd_test.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       [--examples examples] [--workloads DIR] [--quick]
Exit code 0 all passed, 1 a case failed, 77 no Hopper GPU (skipped).
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
from dense_cases import (Case, argument_parser, causal_visible,  # noqa: E402
                         doc_gaps_visible, run_plan, suite_cases)

ATOL = 1e-3
DET_RUNS = 10


def dense_attention(q, k, v, dout, visible, scale, dtype, dlse=None):
    """Forward and exact backward formulas evaluated in `dtype`, dense. q/dout [B,Hq,Sq,D],
    k/v [B,Hkv,Sk,D], visible [Sq,Sk] bool, dlse (the LSE's gradient) None or [B,Hq,Sq].
    Returns out, lse (float64, -inf on empty rows), dq, dk, dv (dk, dv summed over the query
    heads of each kv group)."""
    B, Hq, Sq, D = q.shape
    Hkv = k.shape[1]
    group = Hq // Hkv
    q, dout = q.to(dtype), dout.to(dtype)
    k, v = k.to(dtype).repeat_interleave(group, 1), v.to(dtype).repeat_interleave(group, 1)
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~visible, float("-inf"))
    lse = torch.logsumexp(s.to(torch.float64), dim=-1)
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    out = p @ v
    dp = dout @ v.transpose(-1, -2)
    dsum = (dout * out).sum(-1, keepdim=True)
    if dlse is not None:  # d lse_i / d s_ij = p_ij
        dsum = dsum - dlse.to(dtype).unsqueeze(-1)
    ds = p * (dp - dsum)
    dq = (ds @ k) * scale
    dk = ((ds.transpose(-1, -2) @ q) * scale).view(B, Hkv, group, -1, D).sum(2)
    dv = (p.transpose(-1, -2) @ dout).view(B, Hkv, group, -1, D).sum(2)
    return out, lse, dq, dk, dv


class Layout:
    """Conversion between [B, H, S, D] tensors and one of the kernel layouts."""

    GAP = 3  # rows between packed sequences, which must stay untouched

    def __init__(self, layout, batch, nq, nk):
        self.layout, self.batch, self.nq, self.nk = layout, batch, nq, nk
        self.q_offsets = self.k_offsets = None
        if layout == "thd":
            ar = torch.arange(batch, device="cuda", dtype=torch.int32)
            self.q_offsets = ar * (nq + self.GAP)
            self.k_offsets = ar * (nk + self.GAP)

    def to_kernel(self, t):
        if self.layout == "bshd":
            return t.transpose(1, 2).contiguous()
        if self.layout == "bhsd":
            return t.contiguous()
        n = t.shape[2]
        packed = torch.zeros(self.batch * (n + self.GAP), t.shape[1], t.shape[3], device="cuda",
                             dtype=t.dtype)
        for b in range(self.batch):
            packed[b * (n + self.GAP): b * (n + self.GAP) + n] = t[b].transpose(0, 1)
        return packed

    def poisoned_like(self, t):
        return torch.full_like(self.to_kernel(t), float("nan"))

    def from_kernel(self, t, n):
        if self.layout == "bshd":
            return t.transpose(1, 2)
        if self.layout == "bhsd":
            return t
        return torch.stack([t[b * (n + self.GAP): b * (n + self.GAP) + n].transpose(0, 1)
                            for b in range(self.batch)])

    def gaps_untouched(self, t, n):
        if self.layout != "thd":
            return True
        gaps = torch.cat([t[b * (n + self.GAP) + n: (b + 1) * (n + self.GAP)]
                          for b in range(self.batch)])
        return bool(torch.isnan(gaps.float()).all())

    def lse_to_kernel(self, lse):  # lse [B, H, S] float32
        if self.layout != "thd":
            return lse.contiguous()
        n = lse.shape[2]
        packed = torch.zeros(lse.shape[1], self.batch * (n + self.GAP), device="cuda")
        for b in range(self.batch):
            packed[:, b * (n + self.GAP): b * (n + self.GAP) + n] = lse[b]
        return packed


def prepare(cli, examples, case, lse_grad=False):
    """Descriptor, inputs (q, k, v, dout, and dlse or None), float64 and naive references of
    a case."""
    from cm_kernel import compile_descriptor
    B, Hq, Hkv, D = case.batch, case.heads_q, case.heads_kv, case.head_dim
    desc = compile_descriptor(cli, os.path.join(examples, case.mask_file), case.params,
                              case.nq, case.nk)
    gen = lambda n, h: torch.randn(B, h, n, D, device="cuda", dtype=case.dtype)
    q, k, v, dout = gen(case.nq, Hq), gen(case.nk, Hkv), gen(case.nk, Hkv), gen(case.nq, Hq)
    dlse = torch.randn(B, Hq, case.nq, device="cuda") if lse_grad else None
    scale = case.scale if case.scale else D ** -0.5
    ref = dense_attention(q, k, v, dout, case.visible, scale, torch.float64, dlse)
    naive = dense_attention(q, k, v, dout, case.visible, scale, case.dtype, dlse)
    return desc, (q, k, v, dout, dlse), ref, naive


def run_kernel(bwd, desc, case, inputs, ref, deterministic=False):
    """Runs the backward on NaN-poisoned outputs; returns dq, dk, dv as [B, H, S, D] and the
    raw kernel-layout outputs."""
    q, k, v, dout, dlse = inputs
    out64, lse64 = ref[0], ref[1]
    lay = Layout(case.layout, case.batch, case.nq, case.nk)
    kq, kk, kv, kdo = (lay.to_kernel(t) for t in (q, k, v, dout))
    kout = lay.to_kernel(out64.to(case.dtype))
    klse = lay.lse_to_kernel(lse64.to(torch.float32))
    dq, dk, dv = lay.poisoned_like(q), lay.poisoned_like(k), lay.poisoned_like(v)
    kdlse = None if dlse is None else lay.lse_to_kernel(dlse)
    bwd.backward(desc, kq, kk, kv, kout, kdo, klse, dq, dk, dv, layout=case.layout,
                 scale=case.scale, q_offsets=lay.q_offsets, k_offsets=lay.k_offsets,
                 deterministic=deterministic, dlse=kdlse)
    torch.cuda.synchronize()
    grads = (lay.from_kernel(dq, case.nq), lay.from_kernel(dk, case.nk),
             lay.from_kernel(dv, case.nk))
    raw = (dq, dk, dv)
    gaps_ok = (lay.gaps_untouched(dq, case.nq) and lay.gaps_untouched(dk, case.nk)
               and lay.gaps_untouched(dv, case.nk))
    return grads, raw, gaps_ok


def judge(case, grads, ref, naive, gaps_ok):
    """(ok, detail) by the rule in the module docstring."""
    if not gaps_ok:
        return False, "wrote rows outside its sequences"
    details, ok = [], True
    for name, g, g64, gn in zip(("dq", "dk", "dv"), grads, ref[2:], naive[2:]):
        gf = g.to(torch.float64)
        if torch.isnan(gf).any():
            return False, f"NaN in {name} ({int(torch.isnan(gf).sum())} elements)"
        err = (gf - g64).abs().max().item() if gf.numel() else 0.0
        err_naive = (gn.to(torch.float64) - g64).abs().max().item() if gf.numel() else 0.0
        ok = ok and err <= 2 * err_naive + ATOL
        details.append(f"{name}={err:.2e}/{err_naive:.2e}")
    empty = ~case.visible.any(dim=-1)
    zero_ok = bool((grads[0][:, :, empty] == 0).all())
    details.append(f"empty_rows={int(empty.sum())} zero_ok={zero_ok}")
    return ok and zero_ok, " ".join(details)


def run_case(bwd, cli, examples, case, lse_grad=False):
    desc, inputs, ref, naive = prepare(cli, examples, case, lse_grad)
    grads, _, gaps_ok = run_kernel(bwd, desc, case, inputs, ref)
    ok, detail = judge(case, grads, ref, naive, gaps_ok)
    return ok, ("with the LSE's gradient; " if lse_grad else "") + detail


def run_case_with_lse_gradient(bwd, cli, examples, case):
    return run_case(bwd, cli, examples, case, lse_grad=True)


def run_deterministic(bwd, cli, examples, case):
    """Correct, and bitwise identical over DET_RUNS runs."""
    desc, inputs, ref, naive = prepare(cli, examples, case)
    grads, first, gaps_ok = run_kernel(bwd, desc, case, inputs, ref, deterministic=True)
    ok, detail = judge(case, grads, ref, naive, gaps_ok)
    as_bits = lambda t: t.view(torch.int16)
    for _ in range(DET_RUNS - 1):
        _, raw, _ = run_kernel(bwd, desc, case, inputs, ref, deterministic=True)
        for a, b in zip(first, raw):
            if not torch.equal(as_bits(a), as_bits(b)):
                return False, "deterministic mode differs between runs; " + detail
    return ok, f"bitwise equal over {DET_RUNS} runs; " + detail


def deterministic_cases():
    n = 1023
    docs = [(0, 300), (310, 700), (700, 1023)]
    return [Case("causal_det", "causal.mask", {}, causal_visible(n, n), n, n, heads_q=4,
                 heads_kv=2, layout="bhsd"),
            Case("doc_det", "doc_causal.mask", {"docs": ",".join(f"{a}:{b}" for a, b in docs)},
                 doc_gaps_visible(n, docs), n, n, head_dim=64, dtype=torch.float16)]


def main():
    a = argument_parser().parse_args()
    cases = suite_cases(a, "sm90 backward tests", quick_lengths=4)
    if cases is None:
        return 77
    from bwd_cm import Backward
    plan = ([(c, run_case) for c in cases] + [(c, run_case_with_lse_gradient) for c in cases[::3]]
            + [(c, run_deterministic) for c in deterministic_cases()])
    return run_plan(plan, Backward(a.lib), a.cli, a.examples)


if __name__ == "__main__":
    sys.exit(main())
