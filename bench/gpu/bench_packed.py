"""Jagged inputs against the batch they pack: cm.attention on B sequences in [B, S, H, D], and on
the same sequences packed in [T, H, D] with NaN rows between them, addressed by offsets=, in
alternating rounds in one process (bench_common.interleaved_median_ms). Packed inputs cost what
the strided layouts go without: the forward's guard lanes zero the V rows that no row of a
masked tile sees (fwd_guard.cuh), the backward's producer warp the rows a load takes past a
sequence's end (bwd_tails.cuh), and a small kernel after each pass writes the outputs' rows
outside every sequence (packed_rows.cu; before session 41 the operator zero-filled the outputs).
So beside the calls' times, the table gives the main kernel's alone (torch.profiler, in
alternating rounds): the forward kernel, and the backward's main kernel. Each packed result is
compared with the strided one before timing.

Shape: bf16, B = 8 sequences of 4000 rows (each ends inside a tile), 16 heads, head dim 128.
Needs the compilemask package with its CUDA kernels (scripts/gpu/python_checks.sh installs it).

Usage: bench_packed.py --out OUTDIR     Writes OUTDIR/bench_packed.md.
"""
import math
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import (interleaved_median_ms, kernel_totals_us, package_benchmark,  # noqa: E402
                          write_report)

B, N, H, D, GAP = 8, 4000, 16, 128, 37
ROUNDS, CALLS = 6, 10  # of the main kernels' profiles


def masks(cm):
    return {
        "causal": cm.masks.causal(),
        "sliding 1024": cm.masks.sliding(1024),
        "doc_causal (3 documents)": cm.masks.doc_causal([0, 1300, 2700, N]),
    }


def packed(x, rows):
    """[B, N, ...] as `rows` of a [B * (N + GAP), ...] tensor, NaN elsewhere."""
    t = torch.full((B * (N + GAP), *x.shape[2:]), math.nan, device="cuda", dtype=x.dtype)
    return t.index_copy(0, rows, x.flatten(0, 1))


def main_kernel_us(fns, kernel):
    """Median µs per call of the kernels whose names contain `kernel`, under each function of
    the dict fns, profiled in ROUNDS rounds of CALLS calls whose order alternates."""
    times = {key: [] for key in fns}
    for r in range(ROUNDS):
        for key in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            totals, _ = kernel_totals_us(fns[key], CALLS)
            times[key].append(sum(us for name, us in totals.items() if kernel in name))
    return {key: statistics.median(t) for key, t in times.items()}


def main():
    out_dir, cm = package_benchmark(__doc__, "bench_packed.md")
    starts = torch.arange(B, device="cuda", dtype=torch.int32) * (N + GAP)
    rows = (starts.long()[:, None] + torch.arange(N, device="cuda")[None, :]).flatten()
    strided = [torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3)]
    dout = torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16)
    jagged = [packed(x.detach(), rows).requires_grad_() for x in strided]
    jagged_dout = packed(dout, rows)
    lines = [f"B={B} sequences of {N} rows, H={H}, D={D}, bf16; packed: {GAP} NaN rows after "
             "each sequence, offsets=; through cm.attention.", "",
             "| mask | pass | strided ms | packed ms | packed / strided | main kernel: strided µs "
             "| packed µs | packed / strided |", "|---|---|---|---|---|---|---|---|"]
    for name, mask in masks(cm).items():
        plan = mask.specialize(nq=N, device="cuda")
        forward = {
            "strided": lambda: cm.attention(*strided, plan),
            "packed": lambda: cm.attention(*jagged, plan, offsets=starts),
        }
        both = {
            "strided": lambda: forward["strided"]().backward(dout),
            "packed": lambda: forward["packed"]().backward(jagged_dout),
        }
        with torch.no_grad():
            want, got = forward["strided"](), forward["packed"]()
        if not torch.equal(got.index_select(0, rows), want.flatten(0, 1)):
            sys.exit(f"{name}: the packed forward differs from the strided one")
        for x in strided + jagged:
            x.grad = None
        both["strided"]()
        both["packed"]()
        for s, j in zip(strided, jagged):  # dQ's adds run in any order: not bit for bit
            want = s.grad.flatten(0, 1).float()
            diff = (j.grad.index_select(0, rows).float() - want).abs().max().item()
            if not diff <= 1e-2 * want.abs().max().item():
                sys.exit(f"{name}: max |packed - strided gradient| = {diff}")
        with torch.no_grad():
            fwd_ms = interleaved_median_ms(forward)
            fwd_us = main_kernel_us(forward, "fwd_kernel")
        both_ms = interleaved_median_ms(both, grads=strided + jagged)
        bwd_us = main_kernel_us(both, "bwd_kernel")
        for label, ms, us in (("forward", fwd_ms, fwd_us), ("forward + backward", both_ms, bwd_us)):
            lines.append(f"| {name} | {label} | {ms['strided']:.3f} | {ms['packed']:.3f} | "
                         f"{ms['packed'] / ms['strided']:.3f} | {us['strided']:.1f} | "
                         f"{us['packed']:.1f} | {us['packed'] / us['strided']:.3f} |")
    write_report(out_dir, "bench_packed.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
