"""What the LSE's gradient costs cm.attention's backward: forward + backward through the torch
operator (the installed compilemask package) with a loss of O alone and with a loss of O and
the LSE, timed in alternating rounds (bench_common.interleaved_median_ms), for causal and a
4096-token sliding window at N = 32K, 16 heads, head dim 128, bf16, [B, S, H, D].

Usage: lse_grad_bench.py --out DIR   (writes DIR/lse_grad.md)
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import H, interleaved_median_ms, out_dir_argument, write_table  # noqa: E402

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
    return [name, f"{times['out']:.3f}", f"{times['out_lse']:.3f}",
            f"{times['out_lse'] / times['out']:.3f}"]


def main():
    out = out_dir_argument()
    import compilemask as cm
    masks = (("causal", cm.masks.causal()), ("sliding 4096", cm.masks.sliding(4096)))
    rows = [time_row(cm, name, mask) for name, mask in masks]
    write_table(out, "lse_grad.md",
                f"cm.attention forward + backward, N={N}, H={H}, D={D}, bf16; loss of O alone "
                "against a loss of O and the LSE.", ["mask", "O ms", "O and LSE ms", "ratio"], rows)


if __name__ == "__main__":
    main()
