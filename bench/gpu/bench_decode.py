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

Usage: bench_decode.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --out OUTDIR [--lib-a OTHER.so] [--budget SECONDS]
Writes OUTDIR/bench_decode.json and OUTDIR/bench_decode.md.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import (compiled_flex, environment, interleaved_median_ms,  # noqa: E402
                          run_line, write_results)
from cm_kernel import Kernel, compile_descriptor  # noqa: E402

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

    times = interleaved_median_ms(fns)
    flops = 4 * D * visible * HQ * batch
    keys_read = visible if nq == 1 else nk  # per KV head: one row's visible keys, or all
    kv_bytes = 2 * batch * HKV * keys_read * D * 2
    for key, ms in times.items():
        row[f"{key}_ms"] = ms
        row[f"{key}_tflops"] = flops / ms / 1e9
        row[f"{key}_kv_gbps"] = kv_bytes / ms / 1e6
    return row


def table(rows, env):
    lines = [run_line(env), "",
             f"Few query rows against many keys: bf16, head dim {D}, {HQ} query heads on {HKV} "
             "KV heads, causal aligned bottom-right or a 4K window. Times in ms; \"KV GB/s\" is K "
             "and V's visible bytes over the time. \"whole\": keys not split (num_splits=1); "
             "\"split\": the automatic count (parts per query tile in the splits column). \"A\": "
             "--lib-a's build, its automatic choices.", "",
             "| shape | B | nq | nk | splits | ours whole | ours split | Flex | SDPA | "
             "split KV GB/s | Flex / split | SDPA / split | whole / split | A | A / split |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kind']} {r['mask']} | {r['batch']} | {r['nq']} | {r['nk']} | "
                         f"error: {r['error']} |")
            continue
        lines.append(
            f"| {r['kind']} {r['mask']} | {r['batch']} | {r['nq']} | {r['nk']} | {r['splits']} | "
            f"{r['ours_whole_ms']:.4f} | {r['ours_split_ms']:.4f} | {r['flex_ms']:.4f} | "
            f"{r['sdpa_ms']:.4f} | {r['ours_split_kv_gbps']:.0f} | "
            f"{r['flex_ms'] / r['ours_split_ms']:.2f} | {r['sdpa_ms'] / r['ours_split_ms']:.2f} | "
            f"{r['ours_whole_ms'] / r['ours_split_ms']:.2f} | "
            + (f"{r['ours_a_ms']:.4f} | {r['ours_a_ms'] / r['ours_split_ms']:.2f} |"
               if "ours_a_ms" in r else " | |"))
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser()
    for name in ("--cli", "--lib", "--examples", "--out"):
        p.add_argument(name, required=True)
    p.add_argument("--lib-a", help="another build of the library, timed as A")
    p.add_argument("--budget", type=float, default=400, help="stop starting rows after this")
    a = p.parse_args()
    kernel, flex, env = Kernel(a.lib), compiled_flex(), environment()
    kernel_a = Kernel(a.lib_a) if a.lib_a else None
    rows, start = [], time.time()
    for shape in SHAPES:
        if time.time() - start > a.budget:
            print("budget reached, stopping", flush=True)
            break
        try:
            row = bench_one(a, kernel, kernel_a, flex, *shape)
        except Exception as ex:  # report and continue with the other shapes
            kind, mask, batch, nq, nk = shape
            row = {"kind": kind, "mask": mask, "batch": batch, "nq": nq, "nk": nk,
                   "error": f"{type(ex).__name__}: {ex}"}
        rows.append(row)
        print(row, flush=True)
        torch.cuda.empty_cache()
        write_results(a.out, "bench_decode", env, rows, table(rows, env))
    print(table(rows, env))


if __name__ == "__main__":
    main()
