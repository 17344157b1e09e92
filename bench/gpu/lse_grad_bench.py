"""What the LSE's gradient costs cm.attention's backward: forward + backward through the torch
operator (the installed compilemask package) with a loss of O alone and with a loss of O and
the LSE, timed in alternating rounds (bench_common.interleaved_median_ms), for causal and a
4096-token sliding window at N = 32K, 16 heads, head dim 128, bf16, [B, S, H, D].

Usage: lse_grad_bench.py --out DIR   (writes DIR/lse_grad.md)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import H, interleaved_median_ms, write_report  # noqa: E402

N, D = 32768, 128


def time_row(cm, name, mask):
    plan = mask.specialize(nq=N, device="cuda")
    q, k, v = (torch.randn(1, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn_like(q)
    dlse = torch.randn(1, H, N, device="cuda")

    def output_only():
        cm.attention(q, k, v, plan).backward(dout)

    def output_and_lse():
        out, lse = cm.attention(q, k, v, plan, return_lse=True)
        torch.autograd.backward([out, lse], [dout, dlse])

    times = interleaved_median_ms({"out": output_only, "out_lse": output_and_lse},
                                  grads=[q, k, v])
    return (f"| {name} | {times['out']:.3f} | {times['out_lse']:.3f} | "
            f"{times['out_lse'] / times['out']:.3f} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    a = p.parse_args()
    import compilemask as cm
    lines = [f"cm.attention forward + backward, N={N}, H={H}, D={D}, bf16; loss of O alone "
             "against a loss of O and the LSE.", "",
             "| mask | O ms | O and LSE ms | ratio |", "|---|---|---|---|"]
    for name, mask in (("causal", cm.masks.causal()), ("sliding 4096", cm.masks.sliding(4096))):
        lines.append(time_row(cm, name, mask))
    write_report(a.out, "lse_grad.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
