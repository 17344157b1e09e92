"""The user's path: cm.attention on the plans of the cm.masks helpers, called with their
defaults, against compiled FlexAttention, forward and forward + backward, side by side in one
process, on every workload of workloads.py.

Where bench_fwd.py and bwd_bench.py time the kernels through ctypes on CLI descriptors, this
times what a PyTorch user gets: the torch operator (autograd, allocation of out and the LSE)
and the plan each helper chooses, such as cm.masks.clear's strip plan with its token order
where it is estimated faster (PlanChoice; the "plan" column says which was taken). A grid
workload NAME:row-major times the row-major plan instead, NAME:strips the strip plan. Besides
workloads.py's masks it knows extra_workloads.py's (natten, video, random_window);
workload_masks.py maps each workload to its helper call. Shapes, timing and FLOP counts are
bench_fwd.py's and bwd_bench.py's: B*N = 32768 tokens, 16 heads, head dim --dim, bf16,
[B, H, N, D] tensors (layout "bhsd"); fwd+bwd FLOPs are 3.5 times the forward's.
Plans and BlockMasks are built before timing.

Usage: bench_python.py --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
Writes OUTDIR/bench_python.json and OUTDIR/bench_python.md. Needs the compilemask package
built with its CUDA kernels.
"""
import os
import sys

import torch

import compilemask as cm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (BWD_FACTOR, H, TOKENS, argument_parser,  # noqa: E402
                          compiled_flex, environment, interleaved_median_ms, record_peer,
                          run_line, run_rows, write_results)
from extra_workloads import workload  # noqa: E402
from workload_masks import helper_mask  # noqa: E402


def bench_one(name, n0, flex, workloads, dim):
    """One row; `name` is a workload, or a grid workload with ":row-major" (strip=None) or
    ":strips" (strips as wide as the radius, with their token order)."""
    from torch.nn.attention.flex_attention import create_block_mask
    base, _, variant = name.partition(":")
    mm, prm = workload(workloads, base)(n0, xp=torch, device="cuda")
    N, B = prm["N"], max(1, TOKENS // n0)
    order = {"": {}, "row-major": {"strip": None},
             "strips": {"strip": prm.get("r"), "reorder": True}}[variant]
    plan = helper_mask(base, prm, order).specialize(nq=N, batch=B, heads=H, device="cuda")
    visible = workloads.visible_pairs(mm, N, xp=torch, device="cuda")
    row = {"workload": name, "N": N, "B": B, "H": H, "D": dim,
           "plan": "row-major" if plan.token_order is None else "token order",
           "visible_fraction_of_computed": plan.stats()["visible_pairs"] /
           plan.stats()["computed_pairs"]}
    q, k, v, dout = (torch.randn(B, H, N, dim, device="cuda", dtype=torch.bfloat16)
                     for _ in range(4))
    bm = create_block_mask(mm, None, None, N, N, device="cuda")
    ours = lambda q, k, v: cm.attention(q, k, v, plan, layout="bhsd")
    peers = {"ours": ours, "flex": lambda q, k, v: flex(q, k, v, block_mask=bm)}
    row["max_abs_diff_vs_flex"] = (ours(q, k, v).float() - peers["flex"](q, k, v).float()
                                   ).abs().max().item()
    flops = 4 * dim * visible * H * B
    times = interleaved_median_ms({key: lambda f=f: f(q, k, v) for key, f in peers.items()})
    row["ours_ms"] = times["ours"]
    record_peer(row, "flex", times["flex"], flops, "speedup_vs_flex")

    grads = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
    times = interleaved_median_ms({key: lambda f=f: f(*grads).backward(dout)
                                   for key, f in peers.items()}, grads=grads)
    row["fwd_bwd"] = {"ours_ms": times["ours"]}
    record_peer(row["fwd_bwd"], "flex", times["flex"], BWD_FACTOR * flops, "speedup_vs_flex")
    return row


def markdown(rows, env, dim):
    lines = [run_line(env), "",
             f"cm.attention on the cm.masks helpers' default plans against compiled Flex; "
             f"H={H}, D={dim}, bf16, B*N={TOKENS}.", "",
             "| workload | N | B | plan | visible/computed | fwd ms | Flex fwd ms | fwd vs Flex | "
             "fwd+bwd ms | Flex fwd+bwd ms | fwd+bwd vs Flex | max abs diff vs Flex |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['N']} | error: {r['error'][:80]} |"
                         + " |" * 9)
            continue
        fb = r["fwd_bwd"]
        lines.append(
            f"| {r['workload']} | {r['N']} | {r['B']} | {r['plan']} | "
            f"{r['visible_fraction_of_computed']:.2f} | {r['ours_ms']:.3f} | {r['flex_ms']:.3f} | "
            f"{r['speedup_vs_flex']:.2f} | {fb['ours_ms']:.3f} | {fb['flex_ms']:.3f} | "
            f"{fb['speedup_vs_flex']:.2f} | {r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    a = argument_parser(lens="32768", budget=300, kernels=False,
                        masks="causal,hstu,shared_prefix,clear,doc_causal,sliding").parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    flex = compiled_flex()
    env = environment()
    rows = run_rows(a, lambda name, n0: bench_one(name, n0, flex, workloads, a.dim))
    md = markdown(rows, env, a.dim)
    write_results(a.out, "bench_python", env, rows, md)
    print(md)


if __name__ == "__main__":
    main()
