"""What attention sinks cost (cm.attention's sinks=): forward and forward + backward with no
sinks, with sinks in the kernels, and with sinks applied outside them the way a caller of a
kernel without sinks does (out * sigmoid(lse - sink), which the LSE's gradient then carries
back), side by side in one process.

Rows: workloads.py's masks on the cm.masks helpers' plans, B*N = 32768 tokens, 16 heads, head
dim --dim (128), bf16, [B, H, N, D]; and a decoding step (one query row of 32 heads, GQA 4:1,
against N keys), whose split keys and shared GQA tiles add the sink in the combine kernel. The
sinks are float32 parameters (requires_grad in the forward + backward columns).

Usage: bench_sinks.py --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
       [--rounds 6]
Writes OUTDIR/bench_sinks.json and OUTDIR/bench_sinks.md.
"""
import os
import sys

import torch

import compilemask as cm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import (H, TOKENS, argument_parser, environment,  # noqa: E402
                          error_row, interleaved_median_ms, run_line, run_rows, write_results)
from extra_workloads import workload  # noqa: E402
from workload_masks import helper_mask  # noqa: E402

DECODE_HEADS, DECODE_KV_HEADS = 32, 8


def variants(plan, sinks):
    """The three ways to attend, each a function of (q, k, v)."""
    def outside(q, k, v):
        out, lse = cm.attention(q, k, v, plan, return_lse=True, layout="bhsd")
        return out * torch.sigmoid(lse - sinks[:, None]).unsqueeze(-1).to(out.dtype)
    return {"none": lambda q, k, v: cm.attention(q, k, v, plan, layout="bhsd"),
            "in kernels": lambda q, k, v: cm.attention(q, k, v, plan, layout="bhsd",
                                                       sinks=sinks),
            "outside": outside}


def bench_one(name, n0, workloads, dim, rounds):
    if name == "decode":
        plan = cm.masks.causal().specialize(nq=1, nk=n0, device="cuda")
        batch, heads, heads_kv, nq = 1, DECODE_HEADS, DECODE_KV_HEADS, 1
    else:
        mm, prm = workload(workloads, name)(n0, xp=torch, device="cuda")
        batch, heads, heads_kv, nq = max(1, TOKENS // n0), H, H, prm["N"]
        plan = helper_mask(name, prm, {}).specialize(nq=nq, batch=batch, heads=heads,
                                                     device="cuda")
    q = torch.randn(batch, heads, nq, dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, heads_kv, plan.nk, dim, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    sinks = torch.randn(heads, device="cuda", requires_grad=True)
    fns = variants(plan, sinks)
    row = {"workload": name, "N": n0, "B": batch, "D": dim}
    ref = fns["in kernels"](q, k, v).float()
    row["max_abs_diff_outside"] = (fns["outside"](q, k, v).float() - ref).abs().max().item()
    with torch.no_grad():
        row["fwd_ms"] = interleaved_median_ms({key: lambda f=f: f(q, k, v)
                                               for key, f in fns.items()}, rounds)
    if name != "decode":
        grads = [x.detach().clone().requires_grad_(True) for x in (q, k, v)]
        dout = torch.randn_like(q)
        row["fwd_bwd_ms"] = interleaved_median_ms(
            {key: lambda f=f: f(*grads).backward(dout) for key, f in fns.items()}, rounds,
            grads=grads + [sinks])
    return row


def markdown(rows, env, dim):
    lines = [run_line(env), "",
             f"cm.attention without sinks, with sinks in the kernels (`sinks=`) and with sinks "
             f"applied outside them (`out * sigmoid(lse - sink)`); ms, medians of interleaved "
             f"rounds. H={H}, D={dim}, bf16, B*N={TOKENS}; decode: 1 query row, "
             f"{DECODE_HEADS}:{DECODE_KV_HEADS} heads, N keys.", "",
             "| workload | N | fwd none | fwd in kernels | fwd outside | fwd+bwd none | "
             "fwd+bwd in kernels | fwd+bwd outside | max abs diff outside vs in |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(error_row(r, 9))
            continue
        f, fb = r["fwd_ms"], r.get("fwd_bwd_ms", {})
        cells = [f"{f[k]:.3f}" for k in ("none", "in kernels", "outside")]
        cells += [f"{fb[k]:.3f}" if k in fb else "" for k in ("none", "in kernels", "outside")]
        lines.append(f"| {r['workload']} | {r['N']} | " + " | ".join(cells) +
                     f" | {r['max_abs_diff_outside']:.1e} |")
    return "\n".join(lines) + "\n"


def main():
    p = argument_parser("32768", budget=300, kernels=False,
                        masks="causal,hstu,doc_causal,sliding,decode")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds, at least")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    env = environment()
    rows = run_rows(a, lambda name, n0: bench_one(name, n0, workloads, a.dim, a.rounds))
    write_results(a.out, "bench_sinks", env, rows, markdown(rows, env, a.dim))
    print(markdown(rows, env, a.dim))


if __name__ == "__main__":
    main()
