"""What reordering tokens into strip order (and back) costs: the library's row gather
(cm_cuda_permute_rows, what cm.attention runs for a plan with a token order) against the torch
operations a user would pick (docs/python.md, strip order): a gather by index_select or by
advanced indexing, and the way back by index_copy_, by index assignment or by index_select with
the inverse permutation. One random permutation of the sequence axis of a bf16 [B, S, H, D]
(dim 1) or [B, H, S, D] (dim 2) tensor, H = 16, D = 128, B * S = 32768, timed in alternating
rounds (bench_common.interleaved_median_ms); each result is checked against index_select's.

Usage: reorder_bench.py --lib LIB --out DIR   (LIB: libcompilemask_cuda.so; writes
DIR/reorder.md)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import H, TOKENS, interleaved_median_ms, write_table  # noqa: E402
from cm_kernel import Kernel  # noqa: E402

D = 128


def time_row(kernel, layout, batch):
    n = TOKENS // batch
    dim = 1 if layout == "bshd" else 2
    shape = (batch, n, H, D) if layout == "bshd" else (batch, H, n, D)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    order = torch.randperm(n, device="cuda")
    inverse = torch.argsort(order)
    index = (slice(None),) * dim + (order,)
    gathered = x.index_select(dim, order)
    back = torch.empty_like(x)
    ours = torch.empty_like(x)
    order32 = order.to(torch.int32)

    def assign():
        back[index] = gathered

    fns = {
        "permute_rows": lambda: kernel.permute_rows(x, ours, order32, layout),
        "index_select": lambda: x.index_select(dim, order),
        "advanced index": lambda: x[index],
        "index_copy_": lambda: back.index_copy_(dim, order, gathered),
        "index assignment": assign,
        "index_select inverse": lambda: gathered.index_select(dim, inverse),
    }
    if not torch.equal(x[index], gathered):
        raise AssertionError("advanced indexing differs from index_select")
    fns["permute_rows"]()
    if not torch.equal(ours, gathered):
        raise AssertionError("permute_rows differs from index_select")
    for restore in (fns["index_copy_"], assign):
        back.zero_()
        restore()
        if not torch.equal(back, x):
            raise AssertionError("a restore does not give the input back")
    if not torch.equal(fns["index_select inverse"](), x):
        raise AssertionError("the inverse gather does not give the input back")
    times = interleaved_median_ms(fns)
    return [layout, batch, n] + [f"{times[key]:.3f}" for key in fns]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True, help="libcompilemask_cuda.so")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    kernel = Kernel(a.lib)
    rows = [time_row(kernel, layout, batch) for layout in ("bshd", "bhsd")
            for batch in (32, 8, 1)]
    write_table(a.out, "reorder.md",
                f"A {TOKENS}-token bf16 tensor with H={H}, D={D} "
                f"({TOKENS * H * D * 2 / 1e6:.0f} MB), its sequence axis permuted; ms per call.",
                ["layout", "B", "S", "gather: permute_rows (ours)", "gather: index_select",
                 "gather: x[..., order]", "back: index_copy_", "back: y[..., order] =",
                 "back: index_select(inverse)"],
                rows)


if __name__ == "__main__":
    main()
