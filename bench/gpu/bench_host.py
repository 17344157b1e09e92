"""Host time of one attention call: cm.attention against SDPA and compiled FlexAttention on a
problem whose kernels take a few microseconds, so that a loop of calls runs at the host's pace
(the GPU waits for the host), as in an eager training step or a decoding loop without CUDA
graphs. Each function runs CALLS times in a Python loop and the GPU is synchronized only after
the loop; rounds alternate between the functions, and the table gives the median µs per call
of the forward (under no_grad) and of forward + backward. Beside cm.attention, its operator
compilemask::attention_forward called eagerly: the custom-op path that torch.compile traces and
that eager calls of cm.attention bypass. The GPU's own time per call, from a CUDA graph of the
same calls, shows how far each is host-bound. Below the table, the functions with the most own
time in a cProfile of cm.attention's forward + backward calls.

Shape: bf16, B = 1, 256 rows, 8 query heads on 2 KV heads, head dim 128, causal.

Usage: bench_host.py --out OUTDIR     Writes OUTDIR/bench_host.md.
"""
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_common import (compiled_flex, cuda_graph, package_benchmark,  # noqa: E402
                          write_report)

N, HQ, HKV, D = 256, 8, 2, 128
ROUNDS, CALLS = 8, 200
PROFILED_FUNCTIONS = 25


def host_us(fns, grads):
    """Median µs per call of each function of the dict fns over ROUNDS rounds of CALLS calls,
    the GPU synchronized before and after each round; the tensors in grads lose their .grad
    before each call, as a training step's zero_grad does."""
    times = {key: [] for key in fns}
    for r in range(ROUNDS):
        for key in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(CALLS):
                for x in grads:
                    x.grad = None
                fns[key]()
            torch.cuda.synchronize()
            times[key].append((time.perf_counter() - start) / CALLS * 1e6)
    return {key: statistics.median(t) for key, t in times.items()}


def gpu_us(fn):
    """µs per call of fn replayed from a CUDA graph of CALLS calls: the GPU's time alone."""
    def calls():
        for _ in range(CALLS):
            fn()

    replay = cuda_graph(calls)
    replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / CALLS * 1e3


def profile(fn, grads):
    """The PROFILED_FUNCTIONS functions with the most own time over CALLS calls of fn."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(CALLS):
        for x in grads:
            x.grad = None
        fn()
    torch.cuda.synchronize()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(PROFILED_FUNCTIONS)
    return text.getvalue()


def main():
    out_dir, cm = package_benchmark(__doc__, "bench_host.md")
    from torch.nn.attention.flex_attention import create_block_mask
    q = torch.randn(1, N, HQ, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    k, v = (torch.randn(1, N, HKV, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))
    dout = torch.randn_like(q)
    grads = [q, k, v]
    plan = cm.masks.causal().specialize(nq=N, device="cuda")
    heads_first = [x.detach().transpose(1, 2).requires_grad_() for x in (q, k, v)]
    flex = compiled_flex()
    block_mask = create_block_mask(lambda b, h, i, j: i >= j, None, None, N, N, device="cuda")
    # The operator's arguments (compilemask._torch_ops.attention_forward), from the plan's
    # descriptor tensors.
    operator_args = (q, k, v, plan._desc_host, plan._desc_device, None, None, False, N, N,
                     D ** -0.5, 0.0, 0, None, False, False)
    forward = {
        "cm.attention": lambda: cm.attention(q, k, v, plan),
        "compilemask::attention_forward": lambda: torch.ops.compilemask.attention_forward(
            *operator_args)[0],
        "SDPA (cuDNN)": lambda: F.scaled_dot_product_attention(*heads_first, is_causal=True,
                                                               enable_gqa=True),
        "Flex (compiled)": lambda: flex(*heads_first, block_mask=block_mask, enable_gqa=True),
    }
    dout_heads_first = dout.transpose(1, 2)
    both = {
        "cm.attention": lambda: forward["cm.attention"]().backward(dout),
        "compilemask::attention_forward": lambda: forward["compilemask::attention_forward"]()
        .backward(dout),
        "SDPA (cuDNN)": lambda: forward["SDPA (cuDNN)"]().backward(dout_heads_first),
        "Flex (compiled)": lambda: forward["Flex (compiled)"]().backward(dout_heads_first),
    }
    all_grads = grads + heads_first
    for fn in both.values():  # compiles Flex's kernels and checks that every call runs
        fn()
    with torch.no_grad():
        fwd_host = host_us(forward, [])
        fwd_gpu = {key: gpu_us(fn) for key, fn in forward.items()}
    both_host = host_us(both, all_grads)
    lines = [f"B=1, N={N}, {HQ} query heads on {HKV} KV heads, D={D}, bf16, causal; {CALLS} "
             f"eager calls a round, {ROUNDS} rounds; GPU: the same calls replayed from a CUDA "
             "graph (forward only).", "",
             "| function | forward host µs/call | forward GPU µs/call | forward + backward host "
             "µs/call |", "|---|---|---|---|"]
    for key in forward:
        lines.append(f"| {key} | {fwd_host[key]:.1f} | {fwd_gpu[key]:.1f} | "
                     f"{both_host[key]:.1f} |")
    lines += ["", f"cProfile of {CALLS} forward + backward calls of cm.attention (own time):", "",
              "```", profile(both["cm.attention"], grads).strip(), "```"]
    write_report(out_dir, "bench_host.md", "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
