"""What FlexAttention-facing builds cost: Mask.block_mask (the BlockMask of a bundled program,
from its rows' intervals) and cm.masks.from_mask_mod (a plan read off the predicate, evaluated a
block of rows at a time, each row's runs of keys kept) against FlexAttention's
create_block_mask of the same predicate, and the bundled program's specialize, for the
workloads of workloads.py (from_mask_mod only where rows see at most two runs of keys). Each
time is the minimum over --repeats builds, from the call to a BlockMask (plan) on --device,
synchronized. block_mask's index tensors are checked equal to create_block_mask's, and each
from_mask_mod plan's visible pairs against workloads.visible_pairs.

Usage: bench_from_mask_mod.py --workloads DIR --out OUTDIR [--lens 4096,16384,32768]
       [--masks causal,...] [--device cuda]
Writes OUTDIR/bench_from_mask_mod.md. Needs the compilemask package (its CUDA kernels are not
called) and torch; on --device cpu no GPU.
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

MASKS = "causal,sliding,doc_causal,hstu,shared_prefix,clear"
TWO_RUNS = {"causal", "sliding", "doc_causal", "hstu", "shared_prefix"}  # from_mask_mod's reach
INDEX_FIELDS = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices")


def best_ms(build, repeats, device):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        build()
        sync()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--lens", default="4096,16384,32768")
    p.add_argument("--masks", default=MASKS)
    p.add_argument("--device", default="cuda")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    from torch.nn.attention.flex_attention import create_block_mask
    sys.path.insert(0, a.workloads)
    import workloads
    device = a.device
    plan_device = device if device == "cuda" else None  # plans move to CUDA devices only
    rows = []
    for n0 in (int(x) for x in a.lens.split(",")):
        for name in a.masks.split(","):
            mm, prm = workload(workloads, name)(n0, xp=torch, device=device)
            n = prm["N"]
            program = helper_mask(name, prm, {"strip": None} if name == "clear" else {})
            ours = program.block_mask(nq=n, device=device)
            theirs = create_block_mask(mm, None, None, n, n, device=device)
            for field in INDEX_FIELDS:
                if not torch.equal(getattr(ours, field), getattr(theirs, field)):
                    raise SystemExit(f"{name} at {n}: block_mask's {field} differs")
            times = [best_ms(lambda: program.block_mask(nq=n, device=device), a.repeats, device),
                     best_ms(lambda: create_block_mask(mm, None, None, n, n, device=device),
                             a.repeats, device)]
            if name in TWO_RUNS:
                plan = cm.masks.from_mask_mod(mm, n, device=device).specialize(nq=n)
                visible = plan.stats()["visible_pairs"]
                want = workloads.visible_pairs(mm, n, xp=torch, device=device)
                if visible != want:
                    raise SystemExit(f"{name} at {n}: {visible} visible pairs, want {want}")
                times.append(best_ms(lambda: cm.masks.from_mask_mod(mm, n, device=device)
                                     .specialize(nq=n, device=plan_device),
                                     a.repeats, device))
            else:
                times.append(None)
            times.append(best_ms(lambda: program.specialize(nq=n, device=plan_device), a.repeats,
                                 device))
            rows.append([name, n, *("" if t is None else f"{t:.1f}" for t in times)])
            print(rows[-1], flush=True)
    where = torch.cuda.get_device_name() if device == "cuda" else f"the CPU ({os.cpu_count()} cores)"
    write_table(a.out, "bench_from_mask_mod.md",
                f"Building for FlexAttention on {where}: ms (minimum of {a.repeats}), "
                "synchronized.",
                ["workload", "N", "Mask.block_mask", "Flex create_block_mask",
                 "cm.masks.from_mask_mod plan", "the bundled program's plan"], rows)


if __name__ == "__main__":
    main()
