"""V with a head dim of its own (DeepSeek's multi-head latent attention trains with 192 columns
for q and k and 128 for v): cm.attention on such tensors, the same call with v zero-padded to
q's head dim and out cut back (what a caller does without head_dim_v, pad and cut included in
the time), and compiled FlexAttention on the same tensors and its BlockMask, forward and
forward + backward, side by side in one process. Each row also gives the largest difference
between our output and Flex's, a cross-check of the two.

Rows: workloads.py's masks on the cm.masks helpers' plans, B*N = 32768 tokens, 16 heads, head
dims --dim (192) and --dim-v (128), bf16, [B, H, N, D]. Effective TFLOP/s count 2 (D + Dv)
flops per visible pair forward and 3.5 times that forward + backward.

Usage: bench_value_head_dim.py --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
       [--dim 192] [--dim-v 128] [--rounds 6]
Writes OUTDIR/bench_value_head_dim.json and OUTDIR/bench_value_head_dim.md.
"""
import os
import sys

import torch
import torch.nn.functional as F

import compilemask as cm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (H, TOKENS, argument_parser, compiled_flex,  # noqa: E402
                          environment, error_row, interleaved_median_ms, run_line, run_rows,
                          write_results)
from extra_workloads import workload  # noqa: E402
from workload_masks import helper_mask  # noqa: E402

KEYS = ("ours", "ours padded", "flex")


def bench_one(name, n0, workloads, dim, dim_v, rounds, flex):
    from torch.nn.attention.flex_attention import create_block_mask
    mm, prm = workload(workloads, name)(n0, xp=torch, device="cuda")
    batch, n = max(1, TOKENS // n0), prm["N"]
    plan = helper_mask(name, prm, {}).specialize(nq=n, batch=batch, heads=H, device="cuda")
    q, k, v = (torch.randn(batch, H, n, d, device="cuda", dtype=torch.bfloat16)
               for d in (dim, dim, dim_v))
    block_mask = create_block_mask(mm, None, None, n, n, device="cuda")
    scale = dim ** -0.5

    def padded(q, k, v):
        wide = F.pad(v, (0, dim - dim_v))
        return cm.attention(q, k, wide, plan, scale, layout="bhsd")[..., :dim_v]

    fns = {"ours": lambda q, k, v: cm.attention(q, k, v, plan, scale, layout="bhsd"),
           "ours padded": padded,
           "flex": lambda q, k, v: flex(q, k, v, block_mask=block_mask, scale=scale)}
    pairs = workloads.visible_pairs(mm, n, xp=torch, device="cuda")  # of one (b, h)
    flops = 2.0 * (dim + dim_v) * pairs * batch * H
    row = {"workload": name, "N": n0, "B": batch, "D": dim, "Dv": dim_v, "fwd_flops": flops}
    with torch.no_grad():
        ours = fns["ours"](q, k, v).float()
        row["max_abs_diff_vs_flex"] = (fns["flex"](q, k, v).float() - ours).abs().max().item()
        row["max_abs_diff_vs_padded"] = (fns["ours padded"](q, k, v).float()
                                         - ours).abs().max().item()
        row["fwd_ms"] = interleaved_median_ms({key: lambda f=f: f(q, k, v)
                                               for key, f in fns.items()}, rounds)
    grads = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
    dout = torch.randn(batch, H, n, dim_v, device="cuda", dtype=torch.bfloat16)
    row["fwd_bwd_ms"] = interleaved_median_ms(
        {key: lambda f=f: f(*grads).backward(dout) for key, f in fns.items()}, rounds,
        grads=grads)
    return row


def markdown(rows, env, dim, dim_v):
    lines = [run_line(env), "",
             f"cm.attention with q, k of head dim {dim} and v of {dim_v}; the same with v "
             f"zero-padded to {dim} and out cut back (pad and cut timed); compiled FlexAttention "
             f"on the same tensors and its BlockMask. ms (effective TFLOP/s: 2 (D + Dv) flops "
             f"per visible pair, 3.5 times that for fwd+bwd), medians of interleaved rounds. "
             f"H={H}, bf16, B*N={TOKENS}.", "",
             "| workload | N | fwd ours | fwd ours padded | fwd Flex | fwd vs Flex | "
             "fwd vs padded | fwd+bwd ours | fwd+bwd ours padded | fwd+bwd Flex | "
             "fwd+bwd vs Flex | fwd+bwd vs padded | max abs diff vs Flex |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(error_row(r, 13))
            continue
        cells = []
        for key, factor in (("fwd_ms", 1.0), ("fwd_bwd_ms", 3.5)):
            t = r[key]
            cells += [f"{t[k]:.3f} ({factor * r['fwd_flops'] / t[k] * 1e-9:.0f})" for k in KEYS]
            cells += [f"{t['flex'] / t['ours']:.2f}x", f"{t['ours padded'] / t['ours']:.2f}x"]
        lines.append(f"| {r['workload']} | {r['N']} | " + " | ".join(cells) +
                     f" | {r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    p = argument_parser("32768", budget=400, kernels=False,
                        masks="causal,hstu,shared_prefix,doc_causal,sliding")
    p.set_defaults(dim=192)
    p.add_argument("--dim-v", type=int, default=128, help="head dim of v and out")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds, at least")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    env = environment()
    flex = compiled_flex()
    rows = run_rows(a, lambda name, n0: bench_one(name, n0, workloads, a.dim, a.dim_v, a.rounds,
                                                  flex))
    write_results(a.out, "bench_value_head_dim", env, rows, markdown(rows, env, a.dim, a.dim_v))
    print(markdown(rows, env, a.dim, a.dim_v))


if __name__ == "__main__":
    main()
