"""Pieces shared by the GPU benchmarks (bench_fwd.py, tests/gpu/bwd_bench.py): the command
line, compiled FlexAttention, the environment record, CUDA-event timing, the per-workload
problem (descriptor, visible pairs, computed tiles) and the row loop with its time budget.

Every benchmark uses Q/K/V in [B, H, N, D] with B*N = 32768 tokens, H heads of dimension D
(--dim, default 128).
"""
import argparse
import datetime
import json
import os
import sys
import time

import numpy as np
import torch

from cli_workloads import workload_base, workload_mask, workload_order
from cm_kernel import compile_descriptor
from extra_workloads import workload

H = 16
TILE = 128
TOKENS = 32768  # B * N
# Forward + backward FLOPs over the forward's: the backward's five products are 2.5 times the
# forward's two.
BWD_FACTOR = 3.5


def alibi_slopes():
    """The H heads' ALiBi slopes, 2^(-8 (h + 1) / H) (Press et al.)."""
    return torch.tensor([2.0 ** (-8 * (h + 1) / H) for h in range(H)], device="cuda")


def argument_parser(lens, budget, kernels=True,
                    masks="causal,hstu,shared_prefix,clear,clear_strips,doc_causal,sliding"):
    """--cli, --lib and --examples (with kernels: the benchmarks that call the kernels through
    ctypes on CLI descriptors), --workloads, --out, --lens, --masks, --dim and --budget, with the
    benchmark's default lengths and masks (comma-separated) and time budget in seconds."""
    p = argparse.ArgumentParser()
    if kernels:
        p.add_argument("--cli", required=True)
        p.add_argument("--lib", required=True)
        p.add_argument("--examples", required=True)
    p.add_argument("--workloads", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--lens", default=lens)
    p.add_argument("--masks", default=masks)
    p.add_argument("--dim", type=int, default=128, help="head dim D")
    p.add_argument("--budget", type=float, default=budget, help="stop starting new rows after this")
    return p


def package_benchmark(doc, report):
    """For a benchmark of the compilemask package's cm.attention, documented by `doc`, that
    writes `report`: its output folder (--out) and the package, checked to have its CUDA kernels;
    seeds torch."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--out", required=True, help=f"folder for {report}")
    out = p.parse_args().out
    import compilemask as cm
    if not cm.cuda_available():
        sys.exit("the compilemask package was built without its CUDA kernels")
    torch.manual_seed(0)
    return out, cm


def compiled_flex():
    """flex_attention under torch.compile, with recompile limits raised for the sweep."""
    import torch._dynamo
    from torch.nn.attention.flex_attention import flex_attention
    torch._dynamo.config.recompile_limit = 1000
    torch._dynamo.config.accumulated_recompile_limit = 100000
    return torch.compile(flex_attention, dynamic=False)


def cuda_graph(fn):
    """fn captured in a CUDA graph (after a warm-up call on a side stream, as capture needs):
    returns the graph's replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def environment():
    """Date, GPU, library versions and the command line of this run (on a machine without a
    GPU, for the host-side benchmarks: "no GPU", and triton's version when it is there)."""
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "absent"
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "gpu": gpu, "torch": torch.__version__, "triton": triton_version,
            "cudnn": torch.backends.cudnn.version(), "command": " ".join(sys.argv)}


def median_ms(fn, grads=None):
    """Median time of fn in ms (triton.testing.do_bench, CUDA events, after warm-up); the
    tensors in grads get their .grad reset between calls."""
    import triton.testing
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=grads,
                                   return_mode="median")


def interleaved_median_ms(fns, min_rounds=6, grads=None):
    """Median times in ms of the functions in the dict fns, measured in rounds of a short
    do_bench per function, so that clock and thermal drift falls on all of them alike. The
    order rotates from round to round and every other round runs reversed, and the rounds (at
    least min_rounds) are a multiple of twice the number of functions, so that each function
    takes every place in the order equally often and follows each of its two neighbours
    equally often: what runs just before a kernel changes its time (at head dim 256 one
    kernel timed under two names, always after the same other one, read up to 11% apart;
    docs/perf-notes.md). Rounds this short do not let the clock settle under the board's power
    cap, so a function that draws less power than its neighbours reads slower than it runs
    alone; power_probe.py times each function in its steady state. The tensors in grads get
    their .grad reset between calls. Returns a dict with the same keys."""
    import triton.testing
    keys = list(fns)
    times = {key: [] for key in keys}
    period = 2 * len(keys)
    rounds = -(-min_rounds // period) * period
    for r in range(rounds):
        shift = (r // 2) % len(keys)
        order = keys[shift:] + keys[:shift]
        for key in (order if r % 2 == 0 else order[::-1]):
            times[key].append(triton.testing.do_bench(fns[key], warmup=5, rep=25,
                                                      grad_to_none=grads,
                                                      return_mode="median"))
    return {key: float(np.median(t)) for key, t in times.items()}


def kernel_totals_us(fn, calls):
    """Runs fn `calls` times back to back under torch.profiler (after three warm-up calls) and
    returns (totals, span): the GPU time in µs per call of each kernel, keyed by its name up to
    the template arguments (40 characters at most), and the µs per call from the first kernel's
    start to the last one's end."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    totals = {}
    for e in events:
        key = e.name.split("<")[0][:40]
        totals[key] = totals.get(key, 0) + e.time_range.elapsed_us() / calls
    return totals, (events[-1].time_range.end - events[0].time_range.start) / calls


def record_peer(row, peer, ms, flops, ratio_key):
    """Stores a peer's time and effective TFLOP/s in row, and its time over ours as ratio_key
    (row["ours_ms"] must be set)."""
    row[f"{peer}_ms"], row[f"{peer}_tflops"] = ms, flops / ms / 1e9
    row[ratio_key] = ms / row["ours_ms"]


def record_peers(row, times, flops):
    """record_peer for Flex and, where it was timed, cuDNN, from interleaved_median_ms's times
    under the keys "flex" and "cudnn"."""
    record_peer(row, "flex", times["flex"], flops, "speedup_vs_flex")
    if "cudnn" in times:
        record_peer(row, "cudnn", times["cudnn"], flops, "ratio_vs_cudnn")


def run_line(env):
    """The line that opens every report: the run's date, GPU, library versions and command
    line (environment()), so that a committed table says how it was made."""
    return (f"Run {env['date']} on {env['gpu']}, torch {env['torch']}, triton {env['triton']}, "
            f"cuDNN {env['cudnn']}. Command: `{env['command']}`")


def out_dir_argument():
    """The --out DIR of a benchmark that writes one report and takes nothing else."""
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    return p.parse_args().out


def error_row(row, columns):
    """A markdown table row of `columns` cells for a benchmark row that failed: its workload, N
    and error, the rest empty."""
    return f"| {row['workload']} | {row['N']} | error: {row['error'][:80]} |" + " |" * (columns - 3)


def write_results(out_dir, name, env, rows, md):
    """Writes out_dir/name.json (env and the rows) and out_dir/name.md (md), creating out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"env": env, "rows": rows}, f, indent=1)
    with open(os.path.join(out_dir, name + ".md"), "w") as f:
        f.write(md)


def write_table(out_dir, name, caption, columns, rows):
    """Writes a markdown table (caption, then the columns' header, then the rows, each a list
    of cells) with write_report."""
    lines = [caption, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    write_report(out_dir, name, "\n".join(lines) + "\n")


def write_report(out_dir, name, text):
    """Writes text to out_dir/name, creating out_dir, and prints it, after run_line."""
    text = run_line(environment()) + "\n\n" + text
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name), "w") as f:
        f.write(text)
    print(text, end="")


def cudnn_only(fn):
    """fn, run with SDPA restricted to its cuDNN backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def run():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return fn()
    return run


def cudnn_cells(row):
    """The cuDNN TFLOP/s and ours/cuDNN cells of a markdown row (empty where not measured)."""
    if "cudnn_tflops" not in row:
        return "", ""
    return f"{row['cudnn_tflops']:.0f}", f"{row['ratio_vs_cudnn']:.2f}"


def tile_counts(desc):
    """(computed tiles, exact visible pairs) of instance 0, read from the descriptor blob."""
    blob = desc.host
    u32 = lambda off: int(np.frombuffer(blob[off:off + 4], dtype=np.uint32)[0])
    u16 = lambda off: int(np.frombuffer(blob[off:off + 2], dtype=np.uint16)[0])
    num_q_tiles = u32(32)
    inst = u32(68)
    q_tiles = u32(inst)
    visible = int(np.frombuffer(blob[inst + 16:inst + 24], dtype=np.uint64)[0])
    tiles = 0
    for m in range(num_q_tiles):
        row = q_tiles + 16 * m
        full_off, partial_off = u32(row), u32(row + 4)
        tiles += sum(u16(full_off + 4 * i + 2) for i in range(u16(row + 8)))
        tiles += sum(u16(partial_off + 8 * i + 2) for i in range(u16(row + 10)))
    return tiles, visible


class Workload:
    """One benchmark row's problem: workload `name` at length n0 (mask_mod mm, N, B) and head
    dim D (--dim), its visible pairs, our descriptor from the CLI, the tiles that descriptor
    computes, and the token order our kernel runs in (see reordered)."""

    def __init__(self, name, n0, a, workloads):
        self.mm, prm = workload(workloads, workload_base(name))(n0, xp=torch, device="cuda")
        self.N = prm["N"]
        self.B = max(1, TOKENS // n0)
        self.D = a.dim
        self.visible = workloads.visible_pairs(self.mm, self.N, xp=torch, device="cuda")
        mask_file, params = workload_mask(name, prm)
        self.desc = compile_descriptor(a.cli, os.path.join(a.examples, mask_file), params,
                                       self.N, self.N)
        self.tiles, self.desc_visible = tile_counts(self.desc)
        order = workload_order(a.cli, name, prm)
        self.order = None if order is None else torch.from_numpy(order).to(torch.int32).cuda()
        self.inverse = None if order is None else torch.argsort(self.order).to(torch.int32)

    def reordered(self, run, inputs, outputs, permute_rows):
        """Calls run(*inputs, *outputs) in our token order: when the workload has one, on the
        inputs gathered into it and into temporary outputs that are then gathered back, all
        inside the call (and so inside any timing), as cm.attention does for a plan with a
        token order. Tensors are [B, H, N, ...]: permute_rows(src, dst, order) (the library's
        cm_cuda_permute_rows, Kernel.permute_rows) gathers the [B, H, N, D] ones, index_select
        the LSE."""
        if self.order is None:
            return run(*inputs, *outputs)

        def gather(src, order, dst):
            if src.dim() == 4:
                permute_rows(src, dst, order)
            else:
                torch.index_select(src, 2, order, out=dst)
            return dst

        gathered = [gather(t, self.order, torch.empty_like(t)) for t in inputs]
        results = [torch.empty_like(t) for t in outputs]
        run(*gathered, *results)
        for t, r in zip(outputs, results):
            gather(r, self.inverse, t)

    def random_inputs(self, seed):
        """q, k, v and dout: fresh standard-normal bf16 [B, H, N, D] tensors from `seed`, the
        same for every call with that seed."""
        gen = torch.Generator(device="cuda").manual_seed(seed)
        return tuple(torch.randn((self.B, H, self.N, self.D), device="cuda", dtype=torch.bfloat16,
                                 generator=gen) for _ in range(4))

    def row(self, name, **extra):
        """The row's leading fields: workload, shape, the extra fields, density and
        visible/computed."""
        N = self.N
        return {"workload": name, "N": N, "B": self.B, "H": H, "D": self.D, **extra,
                "density": self.visible / (N * N),
                "visible_fraction_of_computed": self.visible / (self.tiles * TILE * TILE)}


def run_rows(a, bench_one, after_row=None):
    """bench_one(name, n0) for every length and mask of the command line until the budget is
    spent; a failing row is recorded with its error. Prints each row as JSON and calls
    after_row(rows) after each. Returns the rows."""
    t0, rows = time.time(), []
    for n0 in [int(x) for x in a.lens.split(",")]:
        for name in a.masks.split(","):
            if time.time() - t0 > a.budget:
                print("budget reached, stopping", flush=True)
                break
            try:
                row = bench_one(name, n0)
            except Exception as ex:  # report and continue with the other rows
                row = {"workload": name, "N": n0, "error": f"{type(ex).__name__}: {ex}"}
            rows.append(row)
            print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v)
                              for k, v in row.items()}), flush=True)
            torch.cuda.empty_cache()
            if after_row:
                after_row(rows)
    return rows
