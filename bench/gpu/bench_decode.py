"""Split keys: few query rows against many keys (decoding, a chunk of queries against a long
cache). The CompileMask forward with its keys whole and split (the automatic count) against
compiled FlexAttention and SDPA (torch's choice of backend), side by side in one process.

Shapes: bf16, head dim 128, 32 query heads on 8 KV heads (GQA), [B, H, S, D]; causal aligned
bottom-right (the last query row sees every key) and a 4K sliding window. Decoding: one query
row, B = 1 and 8, nk = 8K and 32K. Chunks: B = 1, nq = 128 and 1024, nk = 32K.
Figures: time, effective TFLOP/s (4 D per visible pair), and the rate over K and V's bytes
(decoding reads every visible key once per KV head: that read is its floor). Ours, Flex and
SDPA are timed in alternating rounds (bench_common.interleaved_median_ms), with --lib-a also
another build of our library ("A": an earlier revision, on the same descriptors, its automatic
choices). Each output is compared with Flex's before timing.

Paged K/V: the decoding shapes at 32K keys once more, through cm.attention (the compilemask
package with its CUDA kernels, as scripts/gpu/python_checks.sh installs it; without it these
rows report the error), [B, S, H, D], with K and V contiguous and in pools [pages, page_size, H,
D] of shuffled pages (as a cache's pages lie after many steps) of 16 and 128 rows, timed in
alternating rounds too; each paged output is compared with the contiguous one before timing.

With --graphs every function is captured once in a CUDA graph and its replays are timed, as a
serving engine runs its decoding steps: one-row steps take tens of microseconds on the GPU, and
called from Python each function's host work (tens of microseconds too) can outlast the
cache flush that do_bench runs between calls, and then shows in its time.

Usage: bench_decode.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --out OUTDIR [--lib-a OTHER.so] [--budget SECONDS] [--graphs]
Writes OUTDIR/bench_decode.json and OUTDIR/bench_decode.md.
"""
import argparse
import functools
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import (compiled_flex, cuda_graph, environment,  # noqa: E402
                          interleaved_median_ms, run_line, write_results)
from cm_kernel import Kernel, compile_descriptor, in_pages  # noqa: E402

HQ, HKV, D = 32, 8, 128
WINDOW = 4096
# (name, mask, batch, nq, nk)
SHAPES = [
    ("decode", "causal", 1, 1, 8192),
    ("decode", "causal", 1, 1, 32768),
    ("decode", "causal", 8, 1, 32768),
    ("decode", "sliding", 8, 1, 32768),
    ("chunk", "causal", 1, 128, 32768),
    ("chunk", "causal", 1, 1024, 32768),
]
PAGED = "paged decode"
PAGE_SIZES = (16, 128)
PAGED_SHAPES = [(PAGED, mask, batch, 1, 32768)
                for mask, batch in (("causal", 1), ("causal", 8), ("sliding", 8))]


def mask_parts(mask, nq, nk):
    """(example file, its parameters, Flex's mask_mod, visible pairs per head) of a mask with
    rows aligned bottom-right: row q is key q + nk - nq."""
    shift = nk - nq
    if mask == "causal":
        visible = sum(min(nk, q + shift + 1) for q in range(nq))
        return "causal.mask", {}, (lambda b, h, q, k: q + shift >= k), visible
    visible = sum(min(WINDOW, q + shift + 1) for q in range(nq))
    return ("sliding_window.mask", {"W": WINDOW},
            (lambda b, h, q, k: (q + shift >= k) & (q + shift - k < WINDOW)), visible)


def sdpa_call(mask, q, k, v, nq, nk):
    """SDPA on the same problem: no mask where every key is visible (one causal row), the
    lower-right causal bias for chunks, a boolean mask for the window."""
    from torch.nn.attention.bias import causal_lower_right
    if mask == "causal" and nq == 1:
        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    if mask == "causal":
        bias = causal_lower_right(nq, nk)
        return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True)
    rows = torch.arange(nq, device="cuda")[:, None] + (nk - nq)
    keys = torch.arange(nk, device="cuda")[None, :]
    allowed = (rows >= keys) & (rows - keys < WINDOW)
    return lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)


def timed(fns, graphs):
    """interleaved_median_ms of fns, or of their CUDA graphs' replays."""
    return interleaved_median_ms({key: cuda_graph(fn) for key, fn in fns.items()} if graphs
                                 else fns)


def bench_one(a, kernel, kernel_a, flex, kind, mask, batch, nq, nk):
    from torch.nn.attention.flex_attention import create_block_mask
    example, params, mask_mod, visible = mask_parts(mask, nq, nk)
    desc = compile_descriptor(a.cli, os.path.join(a.examples, example), params, nq, nk)
    row = {"kind": kind, "mask": mask, "batch": batch, "nq": nq, "nk": nk,
           "splits": kernel.num_splits(desc, batch, HQ, HKV, D)}
    q = torch.randn(batch, HQ, nq, D, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(batch, HKV, nk, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    lse = torch.empty(batch, HQ, nq, device="cuda", dtype=torch.float32)
    # (library, num_splits) of each of our functions
    ours = {"ours_whole": (kernel, 1), "ours_split": (kernel, 0)}
    if kernel_a is not None:
        ours["ours_a"] = (kernel_a, 0)
    outs = {key: torch.empty_like(q) for key in ours}

    def call(key):
        lib, splits = ours[key]
        return lambda: lib.forward(desc, q, k, v, outs[key], lse, layout="bhsd",
                                   num_splits=splits)

    bm = create_block_mask(mask_mod, None, None, nq, nk, device="cuda")
    fns = {key: call(key) for key in ours}
    fns["flex"] = lambda: flex(q, k, v, block_mask=bm, enable_gqa=True)
    fns["sdpa"] = sdpa_call(mask, q, k, v, nq, nk)
    reference = fns["flex"]().float()
    for key in ours:
        fns[key]()
    torch.cuda.synchronize()
    for key in ours:
        row[f"max_abs_diff_{key}_vs_flex"] = (outs[key].float() - reference).abs().max().item()
    row["max_abs_diff_sdpa_vs_flex"] = (fns["sdpa"]().float() - reference).abs().max().item()
    del reference

    record_times(row, timed(fns, a.graphs), visible)
    return row


def record_times(row, times, visible):
    """Stores each function's time, effective TFLOP/s and rate over K and V's read bytes."""
    batch, nq, nk = row["batch"], row["nq"], row["nk"]
    flops = 4 * D * visible * HQ * batch
    keys_read = visible if nq == 1 else nk  # per KV head: one row's visible keys, or all
    kv_bytes = 2 * batch * HKV * keys_read * D * 2
    for key, ms in times.items():
        row[f"{key}_ms"] = ms
        row[f"{key}_tflops"] = flops / ms / 1e9
        row[f"{key}_kv_gbps"] = kv_bytes / ms / 1e6


def paged_one(graphs, kind, mask, batch, nq, nk):
    """The row of a paged shape: cm.attention on contiguous K and V and on each page size."""
    import compilemask as cm
    if not cm.cuda_available():
        raise RuntimeError("the compilemask package was built without its CUDA kernels")
    visible = mask_parts(mask, nq, nk)[3]
    bound = cm.masks.causal() if mask == "causal" else cm.masks.sliding(WINDOW)
    plan = bound.specialize(nq=nq, nk=nk, device="cuda")
    row = {"kind": kind, "mask": mask, "batch": batch, "nq": nq, "nk": nk}
    q = torch.randn(batch, nq, HQ, D, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, nk, HKV, D, device="cuda", dtype=torch.bfloat16)
            for _ in range(2))
    fns = {"contiguous": functools.partial(cm.attention, q, k, v, plan)}
    for size in PAGE_SIZES:
        pages = batch * nk // size
        table = torch.randperm(pages, device="cuda").int().view(batch, -1)
        pools = [in_pages(x, size, table) for x in (k, v)]
        fns[f"paged_{size}"] = functools.partial(cm.attention, q, *pools, plan, page_table=table)
    reference = fns["contiguous"]().float()
    for size in PAGE_SIZES:
        diff = (fns[f"paged_{size}"]().float() - reference).abs().max().item()
        row[f"max_abs_diff_paged_{size}_vs_contiguous"] = diff
    del reference
    record_times(row, timed(fns, graphs), visible)
    return row


def error_line(r):
    return (f"| {r['kind']} {r['mask']} | {r['batch']} | {r['nq']} | {r['nk']} | "
            f"error: {r['error']} |")


def paged_table(rows):
    sizes = " | ".join(f"paged {s}" for s in PAGE_SIZES)
    rates = " | ".join(f"paged {s} KV GB/s" for s in PAGE_SIZES)
    ratios = " | ".join(f"paged {s} / contiguous" for s in PAGE_SIZES)
    lines = ["", "Paged K/V through cm.attention (automatic splits), q [B, S, H, D], K and V "
             "contiguous [B, S, H, D] or in pools [pages, page_size, H, D] of shuffled pages. "
             "Times in ms.", "",
             f"| shape | B | nq | nk | contiguous | {sizes} | contiguous KV GB/s | {rates} | "
             f"{ratios} |",
             "|---|---|---|---|---|" + "---|" * (3 * len(PAGE_SIZES) + 1)]
    for r in rows:
        if "error" in r:
            lines.append(error_line(r))
            continue
        keys = [f"paged_{s}" for s in PAGE_SIZES]
        lines.append(
            f"| {r['kind']} {r['mask']} | {r['batch']} | {r['nq']} | {r['nk']} | "
            f"{r['contiguous_ms']:.4f} | "
            + "".join(f"{r[key + '_ms']:.4f} | " for key in keys)
            + f"{r['contiguous_kv_gbps']:.0f} | "
            + "".join(f"{r[key + '_kv_gbps']:.0f} | " for key in keys)
            + " | ".join(f"{r[key + '_ms'] / r['contiguous_ms']:.2f}" for key in keys) + " |")
    return lines


def table(rows, env, graphs):
    paged = [r for r in rows if r["kind"] == PAGED]
    rows = [r for r in rows if r["kind"] != PAGED]
    lines = [run_line(env), "",
             f"Few query rows against many keys: bf16, head dim {D}, {HQ} query heads on {HKV} "
             "KV heads, causal aligned bottom-right or a 4K window. Times in ms; \"KV GB/s\" is K "
             "and V's visible bytes over the time. \"whole\": keys not split (num_splits=1); "
             "\"split\": the automatic count (parts per query tile in the splits column). \"A\": "
             "--lib-a's build, its automatic choices. "
             + ("Timed as CUDA graph replays (--graphs)." if graphs else
                "Timed per call from Python (no CUDA graphs)."), "",
             "| shape | B | nq | nk | splits | ours whole | ours split | Flex | SDPA | "
             "split KV GB/s | Flex / split | SDPA / split | whole / split | A | A / split |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(error_line(r))
            continue
        lines.append(
            f"| {r['kind']} {r['mask']} | {r['batch']} | {r['nq']} | {r['nk']} | {r['splits']} | "
            f"{r['ours_whole_ms']:.4f} | {r['ours_split_ms']:.4f} | {r['flex_ms']:.4f} | "
            f"{r['sdpa_ms']:.4f} | {r['ours_split_kv_gbps']:.0f} | "
            f"{r['flex_ms'] / r['ours_split_ms']:.2f} | {r['sdpa_ms'] / r['ours_split_ms']:.2f} | "
            f"{r['ours_whole_ms'] / r['ours_split_ms']:.2f} | "
            + (f"{r['ours_a_ms']:.4f} | {r['ours_a_ms'] / r['ours_split_ms']:.2f} |"
               if "ours_a_ms" in r else " | |"))
    if paged:
        lines += paged_table(paged)
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    for name in ("--cli", "--lib", "--examples", "--out"):
        p.add_argument(name, required=True)
    p.add_argument("--lib-a", help="another build of the library, timed as A")
    p.add_argument("--budget", type=float, default=400, help="stop starting rows after this")
    p.add_argument("--graphs", action="store_true", help="time CUDA graph replays")
    a = p.parse_args()
    kernel, flex, env = Kernel(a.lib), compiled_flex(), environment()
    kernel_a = Kernel(a.lib_a) if a.lib_a else None
    rows, start = [], time.time()
    jobs = [functools.partial(bench_one, a, kernel, kernel_a, flex, *shape) for shape in SHAPES]
    jobs += [functools.partial(paged_one, a.graphs, *shape) for shape in PAGED_SHAPES]
    for shape, job in zip(SHAPES + PAGED_SHAPES, jobs):
        if time.time() - start > a.budget:
            print("budget reached, stopping", flush=True)
            break
        try:
            row = job()
        except Exception as ex:  # report and continue with the other shapes
            kind, mask, batch, nq, nk = shape
            row = {"kind": kind, "mask": mask, "batch": batch, "nq": nq, "nk": nk,
                   "error": f"{type(ex).__name__}: {ex}"}
        rows.append(row)
        print(row, flush=True)
        torch.cuda.empty_cache()
        write_results(a.out, "bench_decode", env, rows, table(rows, env, a.graphs))
    print(table(rows, env, a.graphs))


if __name__ == "__main__":
    main()
