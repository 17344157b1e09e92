"""Paged decoding by page size, page order and page layout: cm.attention with K and V in pools
of pages of 16, 64 and 128 rows, the page table in order or shuffled, each page's rows first
([pages, page_size, H, D]) or its heads first ([pages, H, page_size, D]), against contiguous K
and V, in alternating rounds in one process (bench_common.interleaved_median_ms). It tells the
per-box cost of small pages (the loader's TMA issues and page-table loads) from TLB reach and
DRAM locality, which shuffled pages would worsen and in-order pages would not. Each output is
compared with the contiguous one before timing.

Shape: bf16, B = 8 sequences, one causal query row each against 32K keys, 32 query heads on 8
KV heads, head dim 128. Needs the compilemask package with its CUDA kernels
(scripts/gpu/python_checks.sh installs it).

Usage: bench_page_order.py --out OUTDIR     Writes OUTDIR/bench_page_order.md.
"""
import functools
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import interleaved_median_ms, package_benchmark, write_report  # noqa: E402
from cm_kernel import in_pages  # noqa: E402

B, NK, HQ, HKV, D = 8, 32768, 32, 8, 128
PAGE_SIZES = (16, 64, 128)


def paged_case(cm, q, k, v, plan, size, shuffled, heads_first):
    """cm.attention on k and v in a pool of pages of `size` rows, as the case says."""
    pages = B * NK // size
    order = torch.randperm(pages, device="cuda") if shuffled else torch.arange(pages,
                                                                                device="cuda")
    table = order.int().view(B, -1)
    pools = [in_pages(x, size, table) for x in (k, v)]
    if heads_first:
        pools = [pool.transpose(1, 2).contiguous() for pool in pools]
    if heads_first:
        return functools.partial(cm.attention, q.transpose(1, 2).contiguous(), *pools, plan,
                                 page_table=table, layout="bhsd")
    return functools.partial(cm.attention, q, *pools, plan, page_table=table)


def main():
    out_dir, cm = package_benchmark(__doc__, "bench_page_order.md")
    plan = cm.masks.causal().specialize(nq=1, nk=NK, device="cuda")
    q = torch.randn(B, 1, HQ, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, NK, HKV, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns = {("contiguous", "", ""): functools.partial(cm.attention, q, k, v, plan)}
    for size in PAGE_SIZES:
        for shuffled in (False, True):
            for heads_first in (False, True):
                key = (f"pages of {size}", "shuffled" if shuffled else "in order",
                       "heads first" if heads_first else "rows first")
                fns[key] = paged_case(cm, q, k, v, plan, size, shuffled, heads_first)
    reference = fns[("contiguous", "", "")]().float()
    for key, fn in fns.items():
        out = fn().float()
        out = out.transpose(1, 2) if key[2] == "heads first" else out
        diff = (out - reference).abs().max().item()
        if not diff < 1e-2:
            sys.exit(f"{' '.join(key)}: max |out - contiguous| = {diff}")
    ms = interleaved_median_ms(fns)
    lines = [f"B={B}, nq=1 (causal), nk={NK}, Hq={HQ}, Hkv={HKV}, D={D}, bf16; through "
             "cm.attention.", "", "| K and V | page order | page layout | ms | / contiguous |",
             "|---|---|---|---|---|"]
    base = ms[("contiguous", "", "")]
    for key, t in ms.items():
        lines.append(f"| {' | '.join(key)} | {t:.4f} | {t / base:.2f} |")
    write_report(out_dir, "bench_page_order.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
