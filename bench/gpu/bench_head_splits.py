"""The backward's head splits (cm::cuda::BackwardArgs::head_splits) on launches whose key tiles
alone make only a few waves over the SMs: one to four sequences of GQA heads. Per shape, through
the C entry points (bench/gpu/cm_kernel.py, tests/gpu/bwd_cm.py), the backward kernels with
every head split count from 1 (the kv group's query heads in one CTA) to the group size, their
gradients compared, to see how near the automatic count (0) comes to the fastest; then our
forward + backward (the automatic count) against SDPA's and compiled FlexAttention's, both with
enable_gqa and through autograd (ours without: the C entry points); each group of functions in
alternating rounds (bench_common.interleaved_median_ms).

Shapes: bf16, head dim 128, causal, [B, H, N, D]; (1, 4096, 32 / 8)'s 256 key-tile CTAs make
two waves over the H200's 132 SMs, and (1, 4096, 16 / 16)'s 512 nearly four, with no kv group to
split.
Needs the compilemask package (its plans) and the kernel library of the CMake build.

Usage: bench_head_splits.py --lib BUILD/kernels/libcompilemask_cuda.so --out OUTDIR
                            [--deterministic] [--lib-a BUILD_A/kernels/libcompilemask_cuda.so]
Writes OUTDIR/bench_head_splits.md (bench_head_splits_deterministic.md with --deterministic:
every backward, ours, in deterministic mode, whose automatic count replays its own dispatch
order). With --lib-a, only an A/B of the automatic backward instead, as bench/gpu/ab.py's at
32K: library A (an experiment's, /tmp/cm-ab/NAME-build of scripts/gpu/ab_checks.sh) against
--lib (B, the working tree's), on the same inputs in alternating rounds, their gradients
compared; writes OUTDIR/bench_head_splits_ab.md.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import (compiled_flex, interleaved_median_ms, kernel_totals_us,  # noqa: E402
                          write_report)
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Descriptor, Kernel  # noqa: E402

D = 128
SHAPES = [  # (B, N, heads_q, heads_kv)
    (1, 256, 8, 2),
    (1, 1024, 32, 8),
    (1, 1024, 16, 1),
    (4, 512, 16, 2),
    (1, 2048, 32, 8),
    (1, 4096, 16, 2),
    (1, 4096, 32, 8),
    (1, 4096, 16, 16),  # no group: only the order of the kv slices can change
]


def backward_inputs(forward, desc, b, n, hq, hkv):
    """Random q, k, v and dO of one shape, with out and LSE from `forward` (a Kernel)."""
    q = torch.randn(b, hq, n, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hkv, n, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    dout = torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty(b, hq, n, device="cuda", dtype=torch.float32)
    forward.forward(desc, q, k, v, out, lse, layout="bhsd")
    return q, k, v, dout, out, lse


def kernel_rows(forward, backward, desc, b, n, hq, hkv, deterministic):
    """(the automatic count, {count: ms} for 1 to the group size, max |difference| from 1, the
    main kernel's µs with 1 and automatic, the kv postprocess's µs) of the backward kernels; the
    µs per call from torch.profiler (bench_common.kernel_totals_us)."""
    q, k, v, dout, out, lse = backward_inputs(forward, desc, b, n, hq, hkv)
    counts = range(1, hq // hkv + 1)
    grads = {s: (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
             for s in (0, *counts)}

    def run(splits):
        return lambda: backward.backward(desc, q, k, v, out, dout, lse, *grads[splits],
                                         layout="bhsd", head_splits=splits,
                                         deterministic=deterministic)

    ms = interleaved_median_ms({s: run(s) for s in counts})
    run(0)()
    torch.cuda.synchronize()
    largest = max(x.float().abs().max().item() for x in grads[1])
    diff = 0.0
    for s in (0, *counts[1:]):
        diff = max([diff] + [(x.float() - y.float()).abs().max().item()
                             for x, y in zip(grads[1], grads[s])])
        if not diff <= 1e-2 * largest:  # the parts' float32 sums round apart, never further
            sys.exit(f"B={b} N={n} {hq}/{hkv}: {s} head splits' gradients differ by {diff} "
                     f"(largest {largest})")
    splits = backward.head_splits(desc, b, hq, hkv, D, deterministic=deterministic)
    totals = {s: kernel_totals_us(run(s), 10)[0] for s in (1, 0)}
    main_us = {s: sum(us for name, us in totals[s].items() if "bwd_kernel" in name)
               for s in (1, 0)}
    kv_post_us = sum(us for name, us in totals[0].items() if "bwd_kv_postprocess" in name)
    return splits, ms, diff, main_us[1], main_us[0], kv_post_us


def ab_row(forward, backwards, desc, b, n, hq, hkv, deterministic):
    """{lib: (automatic head splits, ms)} of the automatic backward of each library (a dict of
    Backward), and the largest |B - A| of their gradients, which differ only by the float32 sums'
    rounding when the head splits differ."""
    q, k, v, dout, out, lse = backward_inputs(forward, desc, b, n, hq, hkv)
    grads = {lib: (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
             for lib in backwards}

    def run(lib):
        return lambda: backwards[lib].backward(desc, q, k, v, out, dout, lse, *grads[lib],
                                               layout="bhsd", head_splits=0,
                                               deterministic=deterministic)

    ms = interleaved_median_ms({lib: run(lib) for lib in backwards})
    for lib in backwards:
        run(lib)()
    torch.cuda.synchronize()
    diff = max((x.float() - y.float()).abs().max().item()
               for x, y in zip(grads["A"], grads["B"]))
    largest = max(x.float().abs().max().item() for x in grads["A"])
    if not diff <= 1e-2 * largest:
        sys.exit(f"B={b} N={n} {hq}/{hkv}: B's gradients differ from A's by {diff} "
                 f"(largest {largest})")
    splits = {lib: backwards[lib].head_splits(desc, b, hq, hkv, D, deterministic=deterministic)
              for lib in backwards}
    return {lib: (splits[lib], ms[lib]) for lib in backwards}, diff


def ab_report(a, forward, backwards):
    """The lines of bench_head_splits_ab.md."""
    import compilemask as cm
    mode = ", deterministic" if a.deterministic else ""
    lines = [f"The automatic backward (head_splits = 0{mode}) of library A ({a.lib_a}) and B "
             f"({a.lib}), bf16, head dim 128, causal, "
             "[B, H, N, D], in alternating rounds on the same inputs; B/A: B's time over A's "
             "(as ab.py's: above 1, A is faster).",
             "", "| B | N | heads q / kv | head splits A / B | ms A | ms B | B/A | max diff |",
             "|---|---|---|---|---|---|---|---|"]
    for b, n, hq, hkv in SHAPES:
        desc = Descriptor(cm.masks.causal().specialize(nq=n).descriptor.tobytes())
        row, diff = ab_row(forward, backwards, desc, b, n, hq, hkv, a.deterministic)
        (splits_a, ms_a), (splits_b, ms_b) = row["A"], row["B"]
        lines.append(f"| {b} | {n} | {hq} / {hkv} | {splits_a} / {splits_b} | {ms_a:.3f} | "
                     f"{ms_b:.3f} | {ms_b / ms_a:.3f} | {diff:.1e} |")
    return lines


def training_ms(flex, forward, backward, desc, b, n, hq, hkv, deterministic):
    """Forward + backward ms of ours (automatic head splits), SDPA and Flex on one shape."""
    from torch.nn.attention.flex_attention import create_block_mask
    q = torch.randn(b, hq, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(b, hkv, n, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    dout = torch.randn(b, hq, n, D, device="cuda", dtype=torch.bfloat16)
    out, lse = torch.empty_like(q), torch.empty(b, hq, n, device="cuda", dtype=torch.float32)
    grads = (torch.empty_like(q), torch.empty_like(k), torch.empty_like(v))
    block_mask = create_block_mask(lambda b_, h, i, j: i >= j, None, None, n, n, device="cuda")

    def ours():
        forward.forward(desc, q, k, v, out, lse, layout="bhsd")
        backward.backward(desc, q, k, v, out, dout, lse, *grads, layout="bhsd", head_splits=0,
                          deterministic=deterministic)

    fns = {
        "ours": ours,
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                       enable_gqa=True).backward(dout),
        "flex": lambda: flex(q, k, v, block_mask=block_mask, enable_gqa=True).backward(dout),
    }
    return interleaved_median_ms(fns, grads=[q, k, v])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lib", required=True, help="libcompilemask_cuda.so of the CMake build")
    p.add_argument("--out", required=True, help="folder for bench_head_splits.md")
    p.add_argument("--deterministic", action="store_true",
                   help="our backward in deterministic mode (dQ adds ordered by key tile)")
    p.add_argument("--lib-a", help="library A: an A/B of the automatic backward against --lib")
    a = p.parse_args()
    import compilemask as cm
    torch.manual_seed(0)
    if a.lib_a:
        backwards = {"A": Backward(a.lib_a), "B": Backward(a.lib)}
        lines = ab_report(a, Kernel(a.lib), backwards)
        write_report(a.out, "bench_head_splits_ab.md", "\n".join(lines) + "\n")
        return
    forward, backward, flex = Kernel(a.lib), Backward(a.lib), compiled_flex()
    lines = ["bf16, head dim 128, causal, [B, H, N, D], through the C entry points. Backward "
             "kernels: the group's heads in one CTA (1), the automatic head splits, and the "
             "fastest count of 1 to the group size (max diff: the largest between 1 and any "
             "count). Forward + backward: ours (automatic) against SDPA and "
             "compiled Flex with enable_gqa, through autograd. Last, the backward's ms at every "
             "count (each count in the dispatch order the library estimates faster for it)."
             + (" Our backward in deterministic mode." if a.deterministic else ""), "",
             "| B | N | heads q / kv | key-tile CTAs | head splits | bwd ms, 1 | bwd ms, auto | "
             "1 / auto | fastest: splits, ms | main kernel µs, 1 / auto | kv postprocess µs | "
             "max diff | fwd+bwd ms: ours | SDPA | Flex | SDPA / ours | Flex / ours | "
             "bwd ms by count |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for b, n, hq, hkv in SHAPES:
        desc = Descriptor(cm.masks.causal().specialize(nq=n).descriptor.tobytes())
        splits, ms_of, diff, main_one, main_auto, kv_post = kernel_rows(
            forward, backward, desc, b, n, hq, hkv, a.deterministic)
        one, auto = ms_of[1], ms_of[splits]
        fastest = min(ms_of, key=ms_of.get)
        ms = training_ms(flex, forward, backward, desc, b, n, hq, hkv, a.deterministic)
        lines.append(f"| {b} | {n} | {hq} / {hkv} | {b * hkv * -(-n // 128)} | {splits} | "
                     f"{one:.3f} | {auto:.3f} | {one / auto:.2f} | {fastest}, "
                     f"{ms_of[fastest]:.3f} | {main_one:.1f} / "
                     f"{main_auto:.1f} | {kv_post:.1f} | {diff:.1e} | "
                     f"{ms['ours']:.3f} | {ms['sdpa']:.3f} | {ms['flex']:.3f} | "
                     f"{ms['sdpa'] / ms['ours']:.2f} | {ms['flex'] / ms['ours']:.2f} | "
                     + ", ".join(f"{s}: {t:.3f}" for s, t in sorted(ms_of.items())) + " |")
    name = "bench_head_splits_deterministic.md" if a.deterministic else "bench_head_splits.md"
    write_report(a.out, name, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
