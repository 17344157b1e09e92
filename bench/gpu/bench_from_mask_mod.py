"""What a plan read off a FlexAttention mask_mod costs to build: cm.masks.from_mask_mod (the
predicate evaluated on the GPU a block of rows at a time, each row's runs of keys kept) against
FlexAttention's create_block_mask of the same predicate and the bundled program's specialize,
for the workloads of workloads.py whose rows see at most two runs of keys. Each time is the
minimum over --repeats builds, from the call to a plan (BlockMask) on the GPU, synchronized.
Each plan's visible pairs are checked against workloads.visible_pairs.

Usage: bench_from_mask_mod.py --workloads DIR --out OUTDIR [--lens 4096,16384,32768]
Writes OUTDIR/bench_from_mask_mod.md. Needs the compilemask package (its CUDA kernels are not
called).
"""
import argparse
import os
import sys
import time

import torch

import compilemask as cm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import write_table  # noqa: E402
from extra_workloads import workload  # noqa: E402
from workload_masks import helper_mask  # noqa: E402

MASKS = ["causal", "sliding", "doc_causal", "hstu", "shared_prefix"]


def best_ms(build, repeats):
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        build()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--lens", default="4096,16384,32768")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    from torch.nn.attention.flex_attention import create_block_mask
    sys.path.insert(0, a.workloads)
    import workloads
    rows = []
    for n0 in (int(x) for x in a.lens.split(",")):
        for name in MASKS:
            mm, prm = workload(workloads, name)(n0, xp=torch, device="cuda")
            n = prm["N"]
            ours = cm.masks.from_mask_mod(mm, n, device="cuda").specialize(nq=n, device="cuda")
            visible = ours.stats()["visible_pairs"]
            want = workloads.visible_pairs(mm, n, xp=torch, device="cuda")
            if visible != want:
                raise SystemExit(f"{name} at {n}: {visible} visible pairs, want {want}")
            times = [
                best_ms(lambda: cm.masks.from_mask_mod(mm, n, device="cuda").specialize(
                    nq=n, device="cuda"), a.repeats),
                best_ms(lambda: create_block_mask(mm, None, None, n, n, device="cuda"),
                        a.repeats),
                best_ms(lambda: helper_mask(name, prm, {}).specialize(nq=n, device="cuda"),
                        a.repeats),
            ]
            rows.append([name, n, *(f"{t:.1f}" for t in times)])
            print(rows[-1], flush=True)
    write_table(a.out, "bench_from_mask_mod.md",
                "Plans from a mask_mod: build time in ms (minimum of "
                f"{a.repeats}), on the GPU, synchronized.",
                ["workload", "N", "cm.masks.from_mask_mod", "Flex create_block_mask",
                 "the bundled program"], rows)


if __name__ == "__main__":
    main()
