"""Forward+backward attention benchmark: the CompileMask sm90 kernels (forward, then backward)
against compiled FlexAttention (forward + autograd backward) and cuDNN SDPA on causal, side by
side in one process, on every workload of workloads.py.

Shapes: N = 1K, 4K, 16K, 32K with B*N = 32768 tokens, 16 heads, head dim 128, bf16, Q/K/V in
[B, H, N, D] for every kernel. Effective TFLOP/s = 3.5 * 4 * D * visible pairs * H * B / time.
Times are medians of triton.testing.do_bench (CUDA events) with gradients reset between calls;
Flex's BlockMask and our descriptor are built before timing and not timed. "ours_det" is our
backward in deterministic mode. The max abs difference of our dQ/dK/dV against Flex's is
reported as a sanity check.

Usage: bwd_bench.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens ...] [--masks ...] [--budget S]
Writes OUTDIR/bench_bwd.json and OUTDIR/bench_bwd.md.
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
from bench_fwd import tile_counts  # noqa: E402
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel, compile_descriptor, workload_mask  # noqa: E402

H, D = 16, 128
TILE = 128
BWD_FACTOR = 3.5  # fwd+bwd FLOPs over forward FLOPs


def median_ms(fn, grads=None):
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grads,
                                   return_mode="median")


def bench_one(name, n0, a, kernel, bwd, flex, workloads):
    from torch.nn.attention.flex_attention import create_block_mask
    mm, prm = workloads.WORKLOADS[name](n0, xp=torch, device="cuda")
    N = prm["N"]
    B = max(1, 32768 // n0)
    row = {"workload": name, "N": N, "B": B, "H": H, "D": D}
    visible = workloads.visible_pairs(mm, N, xp=torch, device="cuda")
    mask_file, params = workload_mask(name, prm)
    desc = compile_descriptor(a.cli, os.path.join(a.examples, mask_file), params, N, N)
    tiles, _ = tile_counts(desc)
    row["density"] = visible / (N * N)
    row["visible_fraction_of_computed"] = visible / (tiles * TILE * TILE)
    flops = BWD_FACTOR * 4 * D * visible * H * B

    q = torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16)
    k, v, dout = torch.randn_like(q), torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)

    def ours(deterministic=False):
        kernel.forward(desc, q, k, v, out, lse, layout="bhsd")
        bwd.backward(desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd",
                     deterministic=deterministic)

    ours()
    torch.cuda.synchronize()
    row["ours_ms"] = median_ms(ours)
    row["ours_tflops"] = flops / row["ours_ms"] / 1e9
    row["ours_bwd_only_ms"] = median_ms(
        lambda: bwd.backward(desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd"))
    row["ours_det_ms"] = median_ms(lambda: ours(True))
    row["ours_det_tflops"] = flops / row["ours_det_ms"] / 1e9

    bm = create_block_mask(mm, None, None, N, N, device="cuda")
    qg, kg, vg = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    flex(qg, kg, vg, block_mask=bm).backward(dout)
    torch.cuda.synchronize()
    ours()
    torch.cuda.synchronize()
    row["max_abs_diff_vs_flex"] = max((x.float() - y.grad.float()).abs().max().item()
                                      for x, y in ((dq, qg), (dk, kg), (dv, vg)))
    ms = median_ms(lambda: flex(qg, kg, vg, block_mask=bm).backward(dout), grads=[qg, kg, vg])
    row["flex_ms"], row["flex_tflops"] = ms, flops / ms / 1e9
    row["speedup_vs_flex"] = row["flex_ms"] / row["ours_ms"]
    del bm

    if name == "causal":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            fb = lambda: F.scaled_dot_product_attention(qg, kg, vg, is_causal=True).backward(dout)
            ms = median_ms(fb, grads=[qg, kg, vg])
        row["cudnn_ms"], row["cudnn_tflops"] = ms, flops / ms / 1e9
        row["ratio_vs_cudnn"] = row["cudnn_ms"] / row["ours_ms"]
    return row


def markdown(rows, env):
    lines = [f"Run {env['date']} on {env['gpu']}, torch {env['torch']}, triton {env['triton']}, "
             f"cuDNN {env['cudnn']}. Command: `{env['command']}`", "",
             "Forward+backward, H=16, D=128, bf16, B*N=32768; effective TFLOP/s = "
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
        cud = f"{r['cudnn_tflops']:.0f}" if "cudnn_tflops" in r else ""
        rat = f"{r['ratio_vs_cudnn']:.2f}" if "ratio_vs_cudnn" in r else ""
        lines.append(
            f"| {r['workload']} | {r['N']} | {r['B']} | {r['density']:.3f} | "
            f"{r['visible_fraction_of_computed']:.2f} | {r['ours_ms']:.3f} | "
            f"{r['ours_tflops']:.0f} | {r['ours_det_tflops']:.0f} | {r['flex_tflops']:.0f} | "
            f"{r['speedup_vs_flex']:.2f} | {cud} | {rat} | {r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cli", required=True)
    p.add_argument("--lib", required=True)
    p.add_argument("--examples", required=True)
    p.add_argument("--workloads", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--lens", default="32768,16384,4096,1024")
    p.add_argument("--masks", default="causal,hstu,shared_prefix,clear,doc_causal,sliding")
    p.add_argument("--budget", type=float, default=300, help="stop starting new rows after this")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    import torch._dynamo
    import triton
    from torch.nn.attention.flex_attention import flex_attention
    torch._dynamo.config.recompile_limit = 1000
    torch._dynamo.config.accumulated_recompile_limit = 100000
    flex = torch.compile(flex_attention, dynamic=False)
    kernel, bwd = Kernel(a.lib), Backward(a.lib)
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__, "cudnn": torch.backends.cudnn.version(),
           "command": " ".join(sys.argv)}
    t0, rows = time.time(), []
    os.makedirs(a.out, exist_ok=True)
    for n0 in [int(x) for x in a.lens.split(",")]:
        for name in a.masks.split(","):
            if time.time() - t0 > a.budget:
                print("budget reached, stopping", flush=True)
                break
            try:
                row = bench_one(name, n0, a, kernel, bwd, flex, workloads)
            except Exception as ex:  # report and continue with the other rows
                row = {"workload": name, "N": n0, "error": f"{type(ex).__name__}: {ex}"}
            rows.append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                              for k, v in row.items()}), flush=True)
            torch.cuda.empty_cache()
            # Written after every row, so that a run cut short still leaves its tables.
            with open(os.path.join(a.out, "bench_bwd.json"), "w") as f:
                json.dump({"env": env, "rows": rows}, f, indent=1)
            with open(os.path.join(a.out, "bench_bwd.md"), "w") as f:
                f.write(markdown(rows, env))
    print(markdown(rows, env))


if __name__ == "__main__":
    main()
