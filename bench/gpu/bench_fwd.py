"""Forward attention benchmark: the CompileMask sm90 kernel against compiled FlexAttention (and
cuDNN SDPA on causal), side by side in one process, on every workload of workloads.py.

Shapes: N = 1K, 4K, 16K, 32K with B*N = 32768 tokens, 16 heads, head dim --dim (default 128),
bf16, Q/K/V in [B, H, N, D] for every kernel. Effective TFLOP/s = 4 * D * visible pairs * H * B
/ time.
"ours" is the automatic mainloop choice; the serial and pingpong mainloops are also timed, in
the JSON. Ours, Flex and cuDNN are timed in alternating rounds (bench_common.
interleaved_median_ms), so that clock and thermal drift falls on all of them alike. Times are
medians of triton.testing.do_bench (CUDA events) after warm-up; Flex's BlockMask and our
descriptor are built before timing and not timed. Descriptors come from the CLI.

Usage: bench_fwd.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens 1024,4096] [--masks causal,...]
Writes OUTDIR/bench_fwd.json, OUTDIR/bench_fwd.md and OUTDIR/bench_fwd.png.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import (H, Workload, argument_parser, compiled_flex,  # noqa: E402
                          cudnn_cells, cudnn_only, environment, interleaved_median_ms,
                          record_peers, run_line, run_rows, write_results)
from cm_kernel import Kernel  # noqa: E402


def bench_one(name, n0, kernel, flex, workloads, a):
    from torch.nn.attention.flex_attention import create_block_mask
    w = Workload(name, n0, a, workloads)
    mm, N, B, desc = w.mm, w.N, w.B, w.desc
    row = w.row(name, visible_pairs=w.visible, descriptor_visible_pairs=w.desc_visible)
    flops = 4 * w.D * w.visible * H * B

    q = torch.randn(B, H, N, w.D, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    def ours(mainloop):
        run = lambda q, k, v, out, lse: kernel.forward(desc, q, k, v, out, lse, layout="bhsd",
                                                       mainloop=mainloop)
        return lambda: w.reordered(run, (q, k, v), (out, lse), kernel.permute_rows)

    bm = create_block_mask(mm, None, None, N, N, device="cuda")
    flex_out = flex(q, k, v, block_mask=bm)
    ours("auto")()
    torch.cuda.synchronize()
    row["max_abs_diff_vs_flex"] = (out.float() - flex_out.float()).abs().max().item()
    del flex_out

    mainloops = ["serial", "pingpong", "auto"]
    fns = {m: ours(m) for m in mainloops}
    fns["flex"] = lambda: flex(q, k, v, block_mask=bm)
    if name == "causal":
        fns["cudnn"] = cudnn_only(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    times = interleaved_median_ms(fns)
    bm = None  # frees the block mask now: the timed functions above are done with it
    for mainloop in mainloops:
        row[f"ours_{mainloop}_ms"] = times[mainloop]
    row["ours_ms"] = row["ours_auto_ms"]
    row["ours_tflops"] = flops / row["ours_ms"] / 1e9
    record_peers(row, times, flops)
    return row


def markdown(rows, env, dim):
    lines = [run_line(env), "", f"Forward, H={H}, D={dim}, bf16, B*N=32768.", "",
             "| workload | N | B | density | visible/computed | ours ms | ours TFLOP/s | "
             "Flex TFLOP/s | speedup vs Flex | cuDNN TFLOP/s | ours/cuDNN | max abs diff vs Flex |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['N']} | | | | error: {r['error'][:80]} | | | | | | |")
            continue
        cud, rat = cudnn_cells(r)
        lines.append(
            f"| {r['workload']} | {r['N']} | {r['B']} | {r['density']:.3f} | "
            f"{r['visible_fraction_of_computed']:.2f} | {r['ours_ms']:.3f} | {r['ours_tflops']:.0f} | "
            f"{r['flex_tflops']:.0f} | {r['speedup_vs_flex']:.2f} | {cud} | {rat} | "
            f"{r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def plot(rows, path, dim):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not available: no plot written")
        return
    good = [r for r in rows if "error" not in r]
    names = sorted({r["workload"] for r in good})
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, names):
        rs = sorted((r for r in good if r["workload"] == name), key=lambda r: r["N"])
        x = np.arange(len(rs))
        ax.bar(x - 0.2, [r["ours_tflops"] for r in rs], 0.4, label="CompileMask")
        ax.bar(x + 0.2, [r["flex_tflops"] for r in rs], 0.4, label="FlexAttention")
        if name == "causal":
            ax.plot(x, [r.get("cudnn_tflops", 0) for r in rs], "k^", label="cuDNN SDPA")
        ax.set_xticks(x, [f"{round(r['N'] / 1024)}K" for r in rs])
        ax.set_title(name)
        for xi, r in zip(x, rs):
            ax.text(xi, 5, f"{r['visible_fraction_of_computed']:.2f}", ha="center", fontsize=7,
                    color="white")
    axes[0].set_ylabel("effective TFLOP/s (visible pairs)")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Forward, H={H}, D={dim}, bf16, B*N=32768 (numbers in bars: visible/computed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    a = argument_parser(lens="1024,4096,16384,32768", budget=400).parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    flex = compiled_flex()
    kernel = Kernel(a.lib)
    env = environment()
    rows = run_rows(a, lambda name, n0: bench_one(name, n0, kernel, flex, workloads, a))
    md = markdown(rows, env, a.dim)
    write_results(a.out, "bench_fwd", env, rows, md)
    plot(rows, os.path.join(a.out, "bench_fwd.png"), a.dim)
    print(md)


if __name__ == "__main__":
    main()
