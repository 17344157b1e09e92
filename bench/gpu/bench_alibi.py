"""What ALiBi costs, and how it compares with FlexAttention's: cm.attention without and with
alibi_slopes=, and compiled FlexAttention with the same bias as its score_mod (the ALiBi example
of its documentation) on the same BlockMask it uses in bench_fwd.py, forward and forward +
backward, side by side in one process. Each row also gives the largest difference between our
output and Flex's with the bias, a cross-check of the two implementations.

Rows: workloads.py's masks on the cm.masks helpers' plans, B*N = 32768 tokens, 16 heads, head
dim --dim (128), bf16, [B, H, N, D]; slopes 2^(-8 (h + 1) / H) (Press et al.).

Usage: bench_alibi.py --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
       [--rounds 6]
Writes OUTDIR/bench_alibi.json and OUTDIR/bench_alibi.md.
"""
import os
import sys

import torch

import compilemask as cm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (H, TOKENS, alibi_slopes, argument_parser, compiled_flex,  # noqa: E402
                          environment, error_row, interleaved_median_ms, run_line, run_rows,
                          write_results)
from extra_workloads import workload  # noqa: E402
from workload_masks import helper_mask  # noqa: E402


def alibi_score_mod(slopes, nq, nk):
    """FlexAttention's score_mod for the bias -slope[h] |q + nk - nq - k| (cm.attention's)."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx + (nk - nq) - kv_idx).abs()
    return score_mod


def bench_one(name, n0, workloads, dim, rounds, flex):
    from torch.nn.attention.flex_attention import create_block_mask
    mm, prm = workload(workloads, name)(n0, xp=torch, device="cuda")
    batch, n = max(1, TOKENS // n0), prm["N"]
    plan = helper_mask(name, prm, {}).specialize(nq=n, batch=batch, heads=H, device="cuda")
    q, k, v = (torch.randn(batch, H, n, dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    slopes = alibi_slopes()
    block_mask = create_block_mask(mm, None, None, n, n, device="cuda")
    score_mod = alibi_score_mod(slopes, n, n)
    fns = {"ours": lambda q, k, v: cm.attention(q, k, v, plan, layout="bhsd"),
           "ours alibi": lambda q, k, v: cm.attention(q, k, v, plan, layout="bhsd",
                                                      alibi_slopes=slopes),
           "flex alibi": lambda q, k, v: flex(q, k, v, score_mod=score_mod,
                                              block_mask=block_mask)}
    row = {"workload": name, "N": n0, "B": batch, "D": dim}
    with torch.no_grad():
        ours = fns["ours alibi"](q, k, v).float()
        row["max_abs_diff_vs_flex"] = (fns["flex alibi"](q, k, v).float() - ours).abs().max().item()
        row["fwd_ms"] = interleaved_median_ms({key: lambda f=f: f(q, k, v)
                                               for key, f in fns.items()}, rounds)
    grads = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
    dout = torch.randn_like(q)
    row["fwd_bwd_ms"] = interleaved_median_ms(
        {key: lambda f=f: f(*grads).backward(dout) for key, f in fns.items()}, rounds,
        grads=grads)
    return row


def markdown(rows, env, dim):
    lines = [run_line(env), "",
             f"cm.attention without and with `alibi_slopes=`, and compiled FlexAttention with "
             f"the ALiBi score_mod on its BlockMask; ms, medians of interleaved rounds. H={H}, "
             f"D={dim}, bf16, B*N={TOKENS}, slopes 2^(-8(h+1)/H).", "",
             "| workload | N | fwd ours | fwd ours ALiBi | fwd Flex ALiBi | fwd speedup | "
             "fwd+bwd ours | fwd+bwd ours ALiBi | fwd+bwd Flex ALiBi | fwd+bwd speedup | "
             "max abs diff vs Flex |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(error_row(r, 11))
            continue
        cells = []
        for key in ("fwd_ms", "fwd_bwd_ms"):
            t = r[key]
            cells += [f"{t['ours']:.3f}", f"{t['ours alibi']:.3f}", f"{t['flex alibi']:.3f}",
                      f"{t['flex alibi'] / t['ours alibi']:.2f}x"]
        lines.append(f"| {r['workload']} | {r['N']} | " + " | ".join(cells) +
                     f" | {r['max_abs_diff_vs_flex']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    p = argument_parser("32768", budget=400, kernels=False,
                        masks="causal,hstu,shared_prefix,doc_causal,sliding")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds, at least")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    env = environment()
    flex = compiled_flex()
    rows = run_rows(a, lambda name, n0: bench_one(name, n0, workloads, a.dim, a.rounds, flex))
    write_results(a.out, "bench_alibi", env, rows, markdown(rows, env, a.dim))
    print(markdown(rows, env, a.dim))


if __name__ == "__main__":
    main()
