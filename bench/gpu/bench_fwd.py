"""Forward attention benchmark: the CompileMask sm90 kernel against compiled FlexAttention (and
cuDNN SDPA on causal), side by side in one process, on every workload of workloads.py.

Shapes: N = 1K, 4K, 16K, 32K with B*N = 32768 tokens, 16 heads, head dim 128, bf16,
Q/K/V in [B, H, N, D] for every kernel. Effective TFLOP/s = 4 * D * visible pairs * H * B / time.
"ours" is the automatic mainloop choice (the serial and pingpong mainloops are also timed, in
the JSON). Times are medians of triton.testing.do_bench (CUDA events) after warm-up; Flex's BlockMask and
our descriptor are built before timing and not timed. Descriptors come from the CLI.

Usage: bench_fwd.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens 1024,4096] [--masks causal,...]
Writes OUTDIR/bench_fwd.json, OUTDIR/bench_fwd.md and OUTDIR/bench_fwd.png.
"""
import argparse
import datetime
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cm_kernel import Kernel, compile_descriptor, workload_mask  # noqa: E402

H, D = 16, 128
TILE = 128


def tile_counts(desc):
    """(computed tiles, exact visible pairs) of instance 0, read from the descriptor blob."""
    blob = desc.host
    u32 = lambda off: int(np.frombuffer(blob[off:off + 4], dtype=np.uint32)[0])
    u16 = lambda off: int(np.frombuffer(blob[off:off + 2], dtype=np.uint16)[0])
    num_q_tiles = u32(32)
    inst = u32(68)
    q_tiles = u32(inst)
    visible = int(np.frombuffer(blob[inst + 16:inst + 24], dtype=np.uint64)[0])
    tiles = 0
    for m in range(num_q_tiles):
        row = q_tiles + 16 * m
        full_off, partial_off = u32(row), u32(row + 4)
        tiles += sum(u16(full_off + 4 * i + 2) for i in range(u16(row + 8)))
        tiles += sum(u16(partial_off + 8 * i + 2) for i in range(u16(row + 10)))
    return tiles, visible


def median_ms(fn):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def bench_one(name, n0, a, kernel, flex, workloads):
    from torch.nn.attention.flex_attention import create_block_mask
    mm, prm = workloads.WORKLOADS[name](n0, xp=torch, device="cuda")
    N = prm["N"]
    B = max(1, 32768 // n0)
    row = {"workload": name, "N": N, "B": B, "H": H, "D": D}
    visible = workloads.visible_pairs(mm, N, xp=torch, device="cuda")
    mask_file, params = workload_mask(name, prm)
    desc = compile_descriptor(a.cli, os.path.join(a.examples, mask_file), params, N, N)
    tiles, desc_visible = tile_counts(desc)
    row["visible_pairs"] = visible
    row["descriptor_visible_pairs"] = desc_visible
    row["density"] = visible / (N * N)
    row["visible_fraction_of_computed"] = visible / (tiles * TILE * TILE)
    flops = 4 * D * visible * H * B

    q = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    for mainloop in ["serial", "pingpong", "auto"]:  # "auto" last: its output is compared below
        ours = lambda: kernel.forward(desc, q, k, v, out, lse, layout="bhsd", mainloop=mainloop)
        ours()
        torch.cuda.synchronize()
        row[f"ours_{mainloop}_ms"] = median_ms(ours)
    row["ours_ms"] = row["ours_auto_ms"]
    row["ours_tflops"] = flops / row["ours_ms"] / 1e9

    bm = create_block_mask(mm, None, None, N, N, device="cuda")
    flex_out = flex(q, k, v, block_mask=bm)
    torch.cuda.synchronize()
    ms = median_ms(lambda: flex(q, k, v, block_mask=bm))
    row["flex_ms"], row["flex_tflops"] = ms, flops / ms / 1e9
    row["speedup_vs_flex"] = row["flex_ms"] / row["ours_ms"]
    row["max_abs_diff_vs_flex"] = (out.float() - flex_out.float()).abs().max().item()
    del flex_out, bm

    if name == "causal":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        row["cudnn_ms"], row["cudnn_tflops"] = ms, flops / ms / 1e9
        row["ratio_vs_cudnn"] = row["cudnn_ms"] / row["ours_ms"]
    return row


def markdown(rows, env):
    lines = [f"Run {env['date']} on {env['gpu']}, torch {env['torch']}, triton {env['triton']}, "
             f"cuDNN {env['cudnn']}.", "",
             "| workload | N | B | density | visible/computed | ours ms | ours TFLOP/s | "
             "Flex TFLOP/s | speedup vs Flex | cuDNN TFLOP/s | ours/cuDNN | max abs diff vs Flex |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['N']} | | | | error: {r['error'][:80]} | | | | | | |")
            continue
        cud = f"{r['cudnn_tflops']:.0f}" if "cudnn_tflops" in r else ""
        rat = f"{r['ratio_vs_cudnn']:.2f}" if "ratio_vs_cudnn" in r else ""
        lines.append(
            f"| {r['workload']} | {r['N']} | {r['B']} | {r['density']:.3f} | "
            f"{r['visible_fraction_of_computed']:.2f} | {r['ours_ms']:.3f} | {r['ours_tflops']:.0f} | "
            f"{r['flex_tflops']:.0f} | {r['speedup_vs_flex']:.2f} | {cud} | {rat} | "
            f"{r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not available: no plot written")
        return
    good = [r for r in rows if "error" not in r]
    names = sorted({r["workload"] for r in good})
    lens = sorted({r["N"] for r in good if r["workload"] == "causal"} or {r["N"] for r in good})
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
    fig.suptitle("Forward, H=16, D=128, bf16, B*N=32768 (numbers in bars: visible/computed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cli", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--workloads", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--lens", default="1024,4096,16384,32768")
    p.add_argument("--masks", default="causal,hstu,shared_prefix,clear,doc_causal,sliding")
    p.add_argument("--budget", type=float, default=400, help="stop starting new rows after this")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention
    torch._dynamo.config.recompile_limit = 1000
    torch._dynamo.config.accumulated_recompile_limit = 100000
    flex = torch.compile(flex_attention, dynamic=False)
    kernel = Kernel(a.lib)
    import triton
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__, "cudnn": torch.backends.cudnn.version(),
           "command": " ".join(sys.argv)}
    t0, rows = time.time(), []
    for n0 in [int(x) for x in a.lens.split(",")]:
        for name in a.masks.split(","):
            if time.time() - t0 > a.budget:
                print("budget reached, stopping", flush=True)
                break
            try:
                row = bench_one(name, n0, a, kernel, flex, workloads)
            except Exception as ex:  # report and continue with the other rows
                row = {"workload": name, "N": n0, "error": f"{type(ex).__name__}: {ex}"}
            rows.append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}),
                  flush=True)
            torch.cuda.empty_cache()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bench_fwd.json"), "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)
    md = markdown(rows, env)
    with open(os.path.join(a.out, "bench_fwd.md"), "w") as f:
        f.write(md)
    plot(rows, os.path.join(a.out, "bench_fwd.png"))
    print(md)


if __name__ == "__main__":
    main()
