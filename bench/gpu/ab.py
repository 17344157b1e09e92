"""A/B timing of two builds of the kernel library, for kernel work between full benchmark runs:
the same problem and inputs go to library A (the code before a change) and library B (after
it), each with the descriptor of its own tool (--cli-a, default --cli, and --cli), forward and
backward timed separately in alternating rounds in one process
(bench_common.interleaved_median_ms), so that clock drift falls on both alike. No peer is timed:
speedups against the peers come from bench_fwd.py and tests/gpu/bwd_bench.py only.

Shapes as the benchmarks: B*N = 32768 tokens, 16 heads, head dim --dim (default 128), bf16,
[B, H, N, D], or with --packed the packed layout [T, H, D] with GAP NaN rows after every sequence
(q_offsets and k_offsets), whose kernels zero the rows no row sees before the products.
The backward of both reads the out and lse of B's forward. A workload with a token order
(clear_strips) runs on the inputs as they are, without the gather and scatter the benchmarks
time. Each pass's outputs from B are
checked against A's (max abs difference, printed), so that a broken B cannot pass as fast.

Usage: ab.py --cli BUILD_B/tools/cli/compilemask --lib BUILD_B/.../libcompilemask_cuda.so
       --lib-a BUILD_A/.../libcompilemask_cuda.so [--cli-a BUILD_A/tools/cli/compilemask]
       --examples examples --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
       [--packed] [--deterministic] [--softcap C] [--alibi]
Writes OUTDIR/ab.md.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import (H, Workload, alibi_slopes, argument_parser,  # noqa: E402
                          interleaved_median_ms, run_rows, write_report)
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel  # noqa: E402

LIBS = ("A", "B")
GAP = 37  # NaN rows after every sequence with --packed


def packed_rows(t):
    """[B, H, N, D] as the rows of [B * (N + GAP), H, D], NaN between the sequences."""
    b, h, n, d = t.shape
    rows = torch.full((b, n + GAP, h, d), float("nan"), device=t.device, dtype=t.dtype)
    rows[:, :n] = t.transpose(1, 2)
    return rows.flatten(0, 1)


def max_diff(outputs):
    """Largest |B - A| over the outputs; equal values (-inf included, and NaN in both: the rows
    between packed sequences, which neither writes) count 0, other NaN shows."""
    diffs = []
    for x, y in zip(outputs["A"], outputs["B"]):
        x, y = x.float(), y.float()
        same = (x == y) | (x.isnan() & y.isnan())
        diffs.append(torch.where(same, 0.0, (x - y).abs()).max().item())
    return max(diffs)


def ab_one(name, n0, forward, backward, workloads, a):
    w = Workload(name, n0, a, workloads)
    desc = {"A": w.desc, "B": w.desc}  # each library masks with its own tool's descriptor
    if a.cli_a:
        args_a = argparse.Namespace(**{**vars(a), "cli": a.cli_a})
        desc["A"] = Workload(name, n0, args_a, workloads).desc
    q, k, v, dout = w.random_inputs(n0)
    layout, offsets = "bhsd", {}
    lse0 = torch.empty(w.B, H, w.N, device="cuda", dtype=torch.float32)
    if a.packed:
        q, k, v, dout = (packed_rows(t) for t in (q, k, v, dout))
        starts = torch.arange(w.B, device="cuda", dtype=torch.int32) * (w.N + GAP)
        layout, offsets = "thd", {"q_offsets": starts, "k_offsets": starts}
        lse0 = torch.empty(H, q.shape[0], device="cuda", dtype=torch.float32)
    slopes = alibi_slopes() if a.alibi else None
    nan = lambda t: torch.full_like(t, float("nan"))
    fwd_out = {lib: (nan(q), nan(lse0)) for lib in LIBS}
    bwd_out = {lib: (nan(q), nan(q), nan(q)) for lib in LIBS}
    out, lse = fwd_out["B"]

    def fwd(lib):
        return lambda: forward[lib].forward(desc[lib], q, k, v, *fwd_out[lib], layout=layout,
                                            softcap=a.softcap, alibi_slopes=slopes, **offsets)

    def bwd(lib):
        return lambda: backward[lib].backward(desc[lib], q, k, v, out, dout, lse, *bwd_out[lib],
                                              layout=layout, deterministic=a.deterministic,
                                              softcap=a.softcap, alibi_slopes=slopes, **offsets)

    fwd_ms = interleaved_median_ms({lib: fwd(lib) for lib in LIBS})
    bwd_ms = interleaved_median_ms({lib: bwd(lib) for lib in LIBS})
    torch.cuda.synchronize()
    row = {"workload": name, "N": w.N}
    for pass_name, ms, outputs in (("fwd", fwd_ms, fwd_out), ("bwd", bwd_ms, bwd_out)):
        row[f"{pass_name}_a_ms"], row[f"{pass_name}_b_ms"] = ms["A"], ms["B"]
        row[f"{pass_name}_diff"] = max_diff(outputs)
    return row


def main():
    p = argument_parser("32768", 600)
    p.add_argument("--lib-a", required=True, help="the library before the change")
    p.add_argument("--cli-a", help="the tool before the change (default: --cli)")
    p.add_argument("--packed", action="store_true",
                   help=f"Q, K, V and the outputs packed as [T, H, D], {GAP} NaN rows apart")
    p.add_argument("--deterministic", action="store_true",
                   help="the backward in deterministic mode (dQ adds ordered by key tile)")
    p.add_argument("--softcap", type=float, default=0.0,
                   help="cap the logits at C tanh(logit / C) in both passes (default 0: no cap)")
    p.add_argument("--alibi", action="store_true",
                   help="ALiBi-biased logits in both passes (slopes 2^(-8 (h + 1) / H))")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    forward = {"A": Kernel(a.lib_a), "B": Kernel(a.lib)}
    backward = {"A": Backward(a.lib_a), "B": Backward(a.lib)}
    rows = run_rows(a, lambda name, n0: ab_one(name, n0, forward, backward, workloads, a))
    layout = (f"packed [T, H, D], {GAP} NaN rows after every sequence" if a.packed
              else "[B, H, N, D]")
    if a.deterministic:
        layout += ", deterministic backward"
    if a.softcap:
        layout += f", logits capped at {a.softcap}"
    if a.alibi:
        layout += ", ALiBi slopes 2^(-8 (h + 1) / H)"
    lines = [f"H={H}, D={a.dim}, bf16, B*N=32768, {layout}; A = --lib-a, B = --lib; max diff: B "
             "against A.",
             "",
             "| workload | N | fwd A ms | fwd B ms | fwd B/A | fwd max diff | bwd A ms | bwd B ms "
             "| bwd B/A | bwd max diff |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['N']} | error: {r['error']} |||||||| ")
            continue
        cells = [f"{r['workload']}", f"{r['N']}"]
        for pass_name in ("fwd", "bwd"):
            a_ms, b_ms = r[f"{pass_name}_a_ms"], r[f"{pass_name}_b_ms"]
            cells += [f"{a_ms:.3f}", f"{b_ms:.3f}", f"{b_ms / a_ms:.3f}",
                      f"{r[f'{pass_name}_diff']:.1e}"]
        lines.append("| " + " | ".join(cells) + " |")
    write_report(a.out, "ab.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
