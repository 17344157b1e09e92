"""GPU correctness of the sm90 forward kernel against dense references built from the
workloads.py predicates (../shared/reference), computed in float64 on the GPU.

Rule per case: max |O - O64| <= 2 * max |O_naive - O64| + atol, where O_naive is a naive torch
attention in the input precision (bf16 or fp16); the LSE must match the float64 LSE; rows that
see no key must give O = 0 exactly and LSE = -inf; outputs are NaN-poisoned before the run, so
an unwritten element fails. Inputs are fresh random data for every case.

Usage: test_forward.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       [--examples examples] [--workloads DIR] [--quick] [--mainloop auto|serial|pingpong]
Exit code 0 all passed, 1 a case failed, 77 no GPU (skipped).
"""
import argparse
import os
import sys

try:
    import torch
except ImportError:
    print("SKIP: PyTorch is not installed; the dense GPU reference needs it")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))

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


class Case:
    def __init__(self, name, mask_file, params, visible, nq, nk, batch=2, heads_q=4, heads_kv=4,
                 head_dim=128, dtype=torch.bfloat16, layout="bshd", scale=0.0):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def label(self):
        dt = "bf16" if self.dtype == torch.bfloat16 else "fp16"
        return (f"{self.name:14s} nq={self.nq:5d} nk={self.nk:5d} d={self.head_dim:3d} "
                f"h={self.heads_q}/{self.heads_kv} b={self.batch} {dt} {self.layout}")


def run_case(kernel, cli, examples, case):
    from cm_kernel import compile_descriptor
    B, Hq, Hkv, D = case.batch, case.heads_q, case.heads_kv, case.head_dim
    desc = compile_descriptor(cli, os.path.join(examples, case.mask_file), case.params,
                              case.nq, case.nk)
    gen = lambda n, h: torch.randn(B, h, n, D, device="cuda", dtype=case.dtype)  # [B,H,S,D]
    q, k, v = gen(case.nq, Hq), gen(case.nk, Hkv), gen(case.nk, Hkv)
    scale = case.scale if case.scale else D ** -0.5

    q_offsets = k_offsets = None
    if case.layout == "bshd":
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

    kernel.forward(desc, as_layout(q), as_layout(k), as_layout(v), out, lse, layout=case.layout,
                   scale=case.scale, q_offsets=q_offsets, k_offsets=k_offsets,
                   mainloop=MAINLOOP)
    torch.cuda.synchronize()

    # Back to [B, Hq, Sq, D] and [B, Hq, Sq].
    if case.layout == "bshd":
        o = out.transpose(1, 2)
    elif case.layout == "bhsd":
        o = out
    else:
        o = torch.stack([out[b * (case.nq + 3): b * (case.nq + 3) + case.nq].transpose(0, 1)
                         for b in range(B)])
        lse = torch.stack([lse[:, b * (case.nq + 3): b * (case.nq + 3) + case.nq] for b in range(B)])
        # The gap rows between sequences must stay untouched (still NaN).
        gaps = torch.cat([out[b * (case.nq + 3) + case.nq: (b + 1) * (case.nq + 3)] for b in range(B)])
        if not torch.isnan(gaps.float()).all():
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


def workload_cases(workloads, quick):
    """Every workload at the odd lengths, cycling head dims, GQA ratios, layouts and dtypes."""
    from cm_kernel import workload_mask
    lengths = [1, 17, 113, 255, 1023] if quick else [1, 17, 113, 255, 1023, 4097]
    builders = {
        "causal": lambda n: workloads.causal(n, xp=torch, device="cuda"),
        "sliding": lambda n: workloads.sliding(n, W=max(1, n // 3), xp=torch, device="cuda"),
        "doc_causal": lambda n: workloads.doc_causal(n, mean=max(4, n // 5), xp=torch, device="cuda"),
        "hstu": lambda n: workloads.hstu(n, mean=max(8, n // 4), xp=torch, device="cuda"),
        "shared_prefix": lambda n: workloads.shared_prefix(n, xp=torch, device="cuda"),
        "clear": lambda n: workloads.clear(n, r=4, text=max(1, n // 8), xp=torch, device="cuda"),
    }
    variants = [(128, 4, 4, "bshd", torch.bfloat16), (64, 4, 2, "bhsd", torch.bfloat16),
                (128, 4, 1, "thd", torch.float16), (64, 2, 2, "bshd", torch.float16),
                (128, 6, 2, "bhsd", torch.bfloat16)]
    cases, i = [], 0
    for n in lengths:
        for name, build in builders.items():
            if name == "shared_prefix" and n < 16:
                continue  # eight responses need at least one token each
            mm, prm = build(n)
            N = prm["N"]
            idx = torch.arange(N, device="cuda")
            visible = mm(0, 0, idx[:, None], idx[None, :])
            mask_file, params = workload_mask(name, prm)
            d, hq, hkv, layout, dtype = variants[i % len(variants)]
            i += 1
            cases.append(Case(name, mask_file, params, visible, N, N, heads_q=hq, heads_kv=hkv,
                              head_dim=d, layout=layout, dtype=dtype))
    return cases


def special_cases():
    """Nq != Nk (bottom-right causal), a softmax scale, and rows that see no key."""
    cases = []
    for nq, nk in [(113, 300), (300, 113), (1, 4097), (257, 129)]:
        iq = torch.arange(nq, device="cuda")[:, None]
        ik = torch.arange(nk, device="cuda")[None, :]
        cases.append(Case("causal_x", "causal.mask", {}, iq + nk - nq >= ik, nq, nk))
    n = 700
    iq = torch.arange(n, device="cuda")[:, None]
    ik = torch.arange(n, device="cuda")[None, :]
    cases.append(Case("causal_scale", "causal.mask", {}, iq >= ik, n, n, scale=0.3,
                      head_dim=64, heads_q=8, heads_kv=1))
    # Documents with gaps: rows in [100, 150) and [600, 700) belong to no document.
    docs = [(0, 100), (150, 300), (300, 600)]
    seg = torch.full((n,), -1, device="cuda")
    for i, (a, b) in enumerate(docs):
        seg[a:b] = i
    visible = (seg[:, None] == seg[None, :]) & (seg[:, None] >= 0) & (iq >= ik)
    cases.append(Case("doc_gaps", "doc_causal.mask",
                      {"docs": ",".join(f"{a}:{b}" for a, b in docs)}, visible, n, n))
    cases.append(Case("doc_gaps", "doc_causal.mask",
                      {"docs": ",".join(f"{a}:{b}" for a, b in docs)}, visible, n, n,
                      layout="thd", head_dim=64, heads_kv=2))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--examples", default=os.path.join(HERE, "..", "..", "examples"))
    ap.add_argument("--workloads", default=os.path.join(HERE, "..", "..", "..", "shared", "reference"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mainloop", default="auto", choices=["auto", "serial", "pingpong"])
    a = ap.parse_args()
    global MAINLOOP
    MAINLOOP = a.mainloop
    if not torch.cuda.is_available():
        print("SKIP: no CUDA GPU; the sm90 forward tests need one")
        return 77
    if torch.cuda.get_device_capability() != (9, 0):
        print("SKIP: the sm90 kernel needs a compute capability 9.0 GPU (Hopper)")
        return 77
    sys.path.insert(0, a.workloads)
    import workloads
    from cm_kernel import Kernel
    kernel = Kernel(a.lib)
    torch.manual_seed(0)
    failed = 0
    cases = workload_cases(workloads, a.quick) + special_cases()
    for case in cases:
        try:
            ok, detail = run_case(kernel, a.cli, a.examples, case)
        except Exception as ex:  # a crash in one case must not hide the others
            ok, detail = False, f"{type(ex).__name__}: {ex}"
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {case.label()} {detail}", flush=True)
    print(f"{len(cases) - failed}/{len(cases)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
