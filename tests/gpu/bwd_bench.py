"""Forward+backward attention benchmark: the CompileMask sm90 kernels (forward, then backward)
against compiled FlexAttention (forward + autograd backward) and cuDNN SDPA on causal, side by
side in one process, on every workload of workloads.py.

Shapes: N = 1K, 4K, 16K, 32K with B*N = 32768 tokens, 16 heads, head dim --dim (default 128),
bf16, Q/K/V in [B, H, N, D] for every kernel. Effective TFLOP/s = 3.5 * 4 * D * visible pairs
* H * B / time.
Ours (in both modes), Flex and cuDNN are timed in alternating rounds (bench_common.interleaved_median_ms), so
that clock and thermal drift falls on all of them alike; times are medians of
triton.testing.do_bench (CUDA events) with gradients reset between calls. Flex's BlockMask and
our descriptor are built before timing and not timed. "ours_det" is our
backward in deterministic mode. The max abs difference of our dQ/dK/dV against Flex's is
reported as a sanity check.

Usage: bwd_bench.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens ...] [--masks ...] [--budget S]
Writes OUTDIR/bench_bwd.json and OUTDIR/bench_bwd.md.
"""
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
from bench_common import (BWD_FACTOR, H, Workload, argument_parser,  # noqa: E402
                          compiled_flex, cudnn_cells, cudnn_only, environment,
                          interleaved_median_ms, median_ms, record_peers, run_line, run_rows,
                          write_results)
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel  # noqa: E402


def bench_one(name, n0, kernel, bwd, flex, workloads, a):
    from torch.nn.attention.flex_attention import create_block_mask
    w = Workload(name, n0, a, workloads)
    mm, N, B, desc = w.mm, w.N, w.B, w.desc
    row = w.row(name)
    flops = BWD_FACTOR * 4 * w.D * w.visible * H * B

    q = torch.randn(B, H, N, w.D, device="cuda", dtype=torch.bfloat16)
    k, v, dout = torch.randn_like(q), torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)

    def fwd_bwd(q, k, v, dout, out, lse, dq, dk, dv, deterministic=False):
        kernel.forward(desc, q, k, v, out, lse, layout="bhsd")
        bwd.backward(desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd",
                     deterministic=deterministic)

    def ours(deterministic=False):
        run = lambda *t: fwd_bwd(*t, deterministic=deterministic)
        w.reordered(run, (q, k, v, dout), (out, lse, dq, dk, dv), kernel.permute_rows)

    bm = create_block_mask(mm, None, None, N, N, device="cuda")
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    flex(qg, kg, vg, block_mask=bm).backward(dout)
    ours()
    torch.cuda.synchronize()
    row["max_abs_diff_vs_flex"] = max((x.float() - y.grad.float()).abs().max().item()
                                      for x, y in ((dq, qg), (dk, kg), (dv, vg)))

    # Deterministic mode in the same rounds: timed alone after them, it ran at a settled clock
    # the interleaved rows do not get, and read faster than the default mode on causal (run 252).
    fns = {"ours": ours, "ours_det": lambda: ours(True),
           "flex": lambda: flex(qg, kg, vg, block_mask=bm).backward(dout)}
    if name == "causal":
        fns["cudnn"] = cudnn_only(lambda: F.scaled_dot_product_attention(
            qg, kg, vg, is_causal=True).backward(dout))
    times = interleaved_median_ms(fns, grads=[qg, kg, vg])
    bm = None  # frees the block mask now: the timed functions above are done with it
    row["ours_ms"] = times["ours"]
    row["ours_tflops"] = flops / row["ours_ms"] / 1e9
    record_peers(row, times, flops)
    if w.order is None:  # the backward alone reads the forward's out and lse in our order
        row["ours_bwd_only_ms"] = median_ms(
            lambda: bwd.backward(desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd"))
    row["ours_det_ms"] = times["ours_det"]
    row["ours_det_tflops"] = flops / row["ours_det_ms"] / 1e9
    return row


def markdown(rows, env, dim):
    lines = [run_line(env), "",
             f"Forward+backward, H={H}, D={dim}, bf16, B*N=32768; effective TFLOP/s = "
             "3.5 * 4 * D * visible pairs * H * B / time.", "",
             "| workload | N | B | density | visible/computed | ours ms | ours TFLOP/s | "
             "ours det TFLOP/s | Flex TFLOP/s | speedup vs Flex | cuDNN TFLOP/s | ours/cuDNN | "
             "max abs diff vs Flex |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['N']} | | | | error: {r['error'][:100]} "
                         "| | | | | | | |")
            continue
        cud, rat = cudnn_cells(r)
        lines.append(
            f"| {r['workload']} | {r['N']} | {r['B']} | {r['density']:.3f} | "
            f"{r['visible_fraction_of_computed']:.2f} | {r['ours_ms']:.3f} | "
            f"{r['ours_tflops']:.0f} | {r['ours_det_tflops']:.0f} | {r['flex_tflops']:.0f} | "
            f"{r['speedup_vs_flex']:.2f} | {cud} | {rat} | {r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    a = argument_parser(lens="32768,16384,4096,1024", budget=300).parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    flex = compiled_flex()
    kernel, bwd = Kernel(a.lib), Backward(a.lib)
    env = environment()

    def write_tables(rows):  # after every row, so that a run cut short still leaves its tables
        write_results(a.out, "bench_bwd", env, rows, markdown(rows, env, a.dim))

    rows = run_rows(a, lambda name, n0: bench_one(name, n0, kernel, bwd, flex, workloads, a),
                    write_tables)
    print(markdown(rows, env, a.dim))


if __name__ == "__main__":
    main()
