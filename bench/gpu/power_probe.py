"""Clock and power probe: times one function at a time, first for one benchmark round after
an idle second ("burst"), then for a few seconds back to back ("sustained"), while nvidia-smi
samples the SM clock, the board power and the clock-event (throttle) reasons. Functions, on
each workload: our forward (the automatic mainloop), compiled FlexAttention's and, on causal,
cuDNN SDPA's, and the same three forward + backward (--passes); and a bf16 8192^3 matrix product
on random data, the GEMM ceiling's own clock. With --softcap C the logits are capped at
C tanh(logit / C), ours by the kernels' cap and Flex's by the score_mod that does it (cuDNN has
no cap and is left out).

Why: the H200 holds its board power at the limit by lowering the SM clock, so a kernel's time
depends on how long it has run and on the energy it spends per step, not only on its cycles.
The benchmarks time rounds of about 30 ms (bench_common.interleaved_median_ms); this probe says
how the same functions compare after seconds of load, as in training (docs/perf-notes.md).

Usage: power_probe.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
       [--seconds 3] [--passes fwd,fwdbwd] [--lib-a OTHER_BUILD/.../libcompilemask_cuda.so]
       [--reverse] [--softcap C]
Writes OUTDIR/power_probe.md and OUTDIR/power_probe.json.
"""
import datetime
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import (BWD_FACTOR, H, Workload, argument_parser,  # noqa: E402
                          compiled_flex, cudnn_only, environment, error_row, run_line,
                          write_results)
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel  # noqa: E402
from smi_samples import Sampler, query_fields, summarize  # noqa: E402

SAMPLE_MS = 50
IDLE_S = 1.0  # idle time before each function's burst, so that the clock recovers
BURST_S = 0.03  # about one do_bench round of the benchmarks (5 ms warm-up, 25 ms of calls)


def timed_calls(fn, seconds, cache, group=8):
    """Calls fn for `seconds` of wall time, each call after zeroing `cache` (a buffer larger
    than L2, as triton's do_bench does, so that every call starts with a cold L2), in groups of
    `group` calls separated by a synchronize, at least one group. Returns the CUDA-event times
    of the calls in ms."""
    pairs = []
    t0 = time.time()
    while not pairs or time.time() - t0 < seconds:
        for _ in range(group):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            cache.zero_()
            start.record()
            fn()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def sampled_run(fn, seconds, fields, cache):
    """After warm-up and IDLE_S of idling: fn's median time over the calls of its first BURST_S
    (one of the benchmarks' timing rounds; at least one call), then its median over the second
    half of `seconds` of back-to-back calls, while nvidia-smi samples `fields` every SAMPLE_MS.
    Returns (burst ms, sustained ms, the samples of the sustained half as lists of strings)."""
    warm = timed_calls(fn, 0, cache, group=3)
    time.sleep(IDLE_S)
    burst_calls = max(1, min(8, int(BURST_S * 1000 / min(warm))))
    burst = timed_calls(fn, 0, cache, group=burst_calls)
    sampler = Sampler(fields, SAMPLE_MS)
    timed_calls(fn, seconds / 2, cache)
    second_half_start = datetime.datetime.now()
    second_half = timed_calls(fn, seconds / 2, cache)
    samples = sampler.stop(second_half_start)
    return float(np.median(burst)), float(np.median(second_half)), samples


def probe_row(workload, n, function, fn, flops, a, fields, cache):
    burst_ms, sustained_ms, samples = sampled_run(fn, a.seconds, fields, cache)
    return {"workload": workload, "N": n, "function": function, "burst_ms": burst_ms,
            "sustained_ms": sustained_ms, "burst_tflops": flops / burst_ms / 1e9,
            "sustained_tflops": flops / sustained_ms / 1e9, **summarize(samples)}


def softcap_score_mod(softcap):
    """FlexAttention's score_mod for logits capped at softcap * tanh(logit / softcap) (its
    scores arrive scaled)."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return softcap * torch.tanh(score / softcap)
    return score_mod


def peer_functions(name, attention, flex, bm, softcap):
    """Flex's attention and, on causal without a cap, cuDNN's, through attention(fn)
    (forward_functions or training_functions turn a function of q, k, v into a timed call)."""
    mod = softcap_score_mod(softcap) if softcap else None
    fns = {"flex": attention(lambda q, k, v: flex(q, k, v, score_mod=mod, block_mask=bm))}
    if name == "causal" and not softcap:
        fns["cudnn"] = cudnn_only(attention(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)))
    return fns


def forward_functions(name, w, libraries, flex, bm, inputs, softcap):
    """Each library's forward (ours; "ours A" from --lib-a), Flex's and, on causal, cuDNN's,
    as functions of no arguments."""
    q, k, v, _ = inputs
    out = torch.empty_like(q)
    lse = torch.empty(w.B, H, w.N, device="cuda", dtype=torch.float32)

    def ours(kernel):
        run = lambda q, k, v, out, lse: kernel.forward(w.desc, q, k, v, out, lse, layout="bhsd",
                                                       softcap=softcap)
        return lambda: w.reordered(run, (q, k, v), (out, lse), kernel.permute_rows)

    fns = {label: ours(kernel) for label, (kernel, _) in libraries.items()}
    return {**fns, **peer_functions(name, lambda fn: lambda: fn(q, k, v), flex, bm, softcap)}


def training_functions(name, w, libraries, flex, bm, inputs, softcap):
    """Forward + backward: each library's (the forward, then the backward kernels), Flex's
    and, on causal, cuDNN's (forward, then autograd's backward, gradients reset first)."""
    q, k, v, dout = inputs
    out, dq, dk, dv = (torch.empty_like(q) for _ in range(4))
    lse = torch.empty(w.B, H, w.N, device="cuda", dtype=torch.float32)

    def ours(kernel, bwd):
        def run(q, k, v, dout, out, lse, dq, dk, dv):
            kernel.forward(w.desc, q, k, v, out, lse, layout="bhsd", softcap=softcap)
            bwd.backward(w.desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd",
                         softcap=softcap)
        return lambda: w.reordered(run, (q, k, v, dout), (out, lse, dq, dk, dv),
                                   kernel.permute_rows)

    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]

    def autograd(attention):
        def call():
            for t in leaves:
                t.grad = None
            attention(*leaves).backward(dout)
        return call

    fns = {label: ours(*pair) for label, pair in libraries.items()}
    return {**fns, **peer_functions(name, autograd, flex, bm, softcap)}


def probe_workload(name, n0, libraries, flex, workloads, a, fields, cache):
    """The probe's rows of one workload: each function of each pass in a.passes, in reverse
    order with a.reverse."""
    from torch.nn.attention.flex_attention import create_block_mask
    w = Workload(name, n0, a, workloads)
    flops = 4 * w.D * w.visible * H * w.B
    inputs = w.random_inputs(n0)
    bm = create_block_mask(w.mm, None, None, w.N, w.N, device="cuda")
    rows = []
    for pass_name in a.passes.split(","):
        if pass_name == "fwd":
            fns = forward_functions(name, w, libraries, flex, bm, inputs, a.softcap)
            pass_flops = flops
        else:  # fwdbwd (main checks the names)
            fns = training_functions(name, w, libraries, flex, bm, inputs, a.softcap)
            pass_flops = BWD_FACTOR * flops
        order = list(fns.items())[::-1] if a.reverse else list(fns.items())
        pass_rows = {fn_name: probe_row(name, w.N, f"{pass_name} {fn_name}", fn, pass_flops, a,
                                        fields, cache) for fn_name, fn in order}
        rows += [pass_rows[fn_name] for fn_name in fns]  # ours first in the table
    return rows


def probe_gemm(a, fields, cache):
    n = 8192
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return probe_row("gemm 8192^3", n, "torch.matmul", lambda: x @ y, 2 * n ** 3, a, fields,
                     cache)


def markdown(rows, env, seconds, softcap):
    capped = [f"Logits capped at {softcap:g} tanh(logit / {softcap:g}) (--softcap); Flex by "
              "its score_mod, in torch.tanh.", ""] if softcap else []
    lines = [run_line(env), "", *capped,
             f"Per function: warm-up, {IDLE_S:g} s idle, then calls for {BURST_S * 1000:g} ms "
             f"(\"burst\", one benchmark round long), then {seconds:g} s of calls back to back "
             f"(\"sustained\": the median of its second half). Every call starts with a cold L2, "
             "as in do_bench. nvidia-smi sampled the sustained half every "
             f"{SAMPLE_MS} ms. Clock: median [10th, 90th percentile]. Reasons: share of samples "
             "with each clock-event reason active. Peer / ours: the peer's time over ours.", "",
             "| workload | N | function | burst ms | sustained ms | sustained TFLOP/s | "
             "peer / ours, burst | peer / ours, sustained | SM clock MHz | power W (limit) | "
             "max temp C | reasons |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ours = {}
    for r in rows:
        if "error" in r:
            lines.append(error_row(r, 12))
            continue
        key = (r["workload"], r["N"], r["function"].split()[0])
        if r["function"].endswith(" ours"):
            ours[key] = r
        base = ours.get(key)
        ratios = ("", "") if base is None or r is base else (
            f"{r['burst_ms'] / base['burst_ms']:.2f}",
            f"{r['sustained_ms'] / base['sustained_ms']:.2f}")
        reasons = ", ".join(f"{k} {v:.0%}" for k, v in r["reasons"].items()) or "none"
        num = lambda key: "" if r[key] is None else f"{r[key]:.0f}"
        lines.append(f"| {r['workload']} | {r['N']} | {r['function']} | {r['burst_ms']:.3f} | "
                     f"{r['sustained_ms']:.3f} | {r['sustained_tflops']:.0f} | {ratios[0]} | "
                     f"{ratios[1]} | {num('clock_mhz')} [{num('clock_p10_mhz')}, "
                     f"{num('clock_p90_mhz')}] | {num('power_w')} ({num('limit_w')}) | "
                     f"{num('max_temp_c')} | {reasons} |")
    return "\n".join(lines) + "\n"


def main():
    p = argument_parser(lens="32768", budget=600, masks="causal,doc_causal,hstu")
    p.add_argument("--seconds", type=float, default=3.0, help="sustained run per function")
    p.add_argument("--passes", default="fwd,fwdbwd", help="fwd (forward), fwdbwd (+ backward)")
    p.add_argument("--lib-a", help="another build's library, timed as \"ours A\" on the same "
                   "descriptors (for A/B under sustained load)")
    p.add_argument("--reverse", action="store_true", help="time each pass's functions in "
                   "reverse order (peers first)")
    p.add_argument("--softcap", type=float, default=0.0, help="cap the logits at C tanh(logit "
                   "/ C) (0: no cap)")
    a = p.parse_args()
    unknown = set(a.passes.split(",")) - {"fwd", "fwdbwd"}
    if unknown:
        p.error(f"--passes: unknown pass {', '.join(sorted(unknown))} (fwd, fwdbwd)")
    if not (np.isfinite(a.softcap) and a.softcap >= 0):
        p.error(f"--softcap must be finite and >= 0, got {a.softcap}")
    sys.path.insert(0, a.workloads)
    import workloads
    fields = query_fields()
    libraries = {"ours": (Kernel(a.lib), Backward(a.lib))}
    if a.lib_a:
        libraries["ours A"] = (Kernel(a.lib_a), Backward(a.lib_a))
    flex, env = compiled_flex(), environment()
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    rows = [probe_gemm(a, fields, cache)]
    t0 = time.time()
    for n0 in [int(x) for x in a.lens.split(",")]:
        for name in a.masks.split(","):
            if time.time() - t0 > a.budget:
                break
            try:
                rows += probe_workload(name, n0, libraries, flex, workloads, a, fields, cache)
            except Exception as ex:  # report and continue with the other workloads
                rows.append({"workload": name, "N": n0, "error": f"{type(ex).__name__}: {ex}"})
            torch.cuda.empty_cache()
            # after every workload, so that a run cut short still leaves its table
            write_results(a.out, "power_probe", env, rows,
                          markdown(rows, env, a.seconds, a.softcap))
    print(markdown(rows, env, a.seconds, a.softcap), end="")


if __name__ == "__main__":
    main()
