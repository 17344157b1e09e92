"""A/B timing of the backward pass of two builds of the kernel library, for kernel work between
full benchmark runs: the same problem, inputs and descriptor go to library A (the code before a
change) and library B (after it), timed in alternating rounds in one process
(bench_common.interleaved_median_ms), so that clock drift falls on both alike. No peer is
timed: speedups against the peers come from tests/gpu/bwd_bench.py only.

Shapes as the benchmarks: B*N = 32768 tokens, 16 heads, head dim 128, bf16, [B, H, N, D].
The forward of library B produces out and lse once; only the backward is timed. B's gradients
are checked against A's (max abs difference, printed) so that a broken B cannot pass as fast.

Usage: bwd_ab.py --cli BUILD/tools/cli/compilemask --lib BUILD_B/.../libcompilemask_cuda.so
       --lib-a BUILD_A/.../libcompilemask_cuda.so --examples examples --workloads DIR
       --out OUTDIR [--lens 32768] [--masks causal,...]
Writes OUTDIR/bwd_ab.md.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import (D, H, Workload, argument_parser, environment,  # noqa: E402
                          interleaved_median_ms, run_rows)
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel  # noqa: E402


def ab_one(name, n0, kernel, backward, workloads, a):
    w = Workload(name, n0, a, workloads)
    gen = torch.Generator(device="cuda").manual_seed(n0)
    shape = (w.B, H, w.N, D)
    q, k, v, dout = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
                     for _ in range(4))
    out = torch.empty_like(q)
    lse = torch.empty(w.B, H, w.N, device="cuda", dtype=torch.float32)
    kernel.forward(w.desc, q, k, v, out, lse, layout="bhsd")
    grads = {lib: tuple(torch.full_like(q, float("nan")) for _ in range(3)) for lib in backward}

    def run(lib):
        return lambda: backward[lib].backward(w.desc, q, k, v, out, dout, lse, *grads[lib],
                                              layout="bhsd")

    times = interleaved_median_ms({lib: run(lib) for lib in backward})
    torch.cuda.synchronize()
    diff = max((x.float() - y.float()).abs().max().item()
               for x, y in zip(grads["A"], grads["B"]))
    return {"workload": name, "N": w.N, "a_ms": times["A"], "b_ms": times["B"],
            "b_over_a": times["B"] / times["A"], "max_abs_diff": diff}


def main():
    p = argument_parser("32768", 600)
    p.add_argument("--lib-a", required=True, help="the library before the change")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    kernel = Kernel(a.lib)
    backward = {"A": Backward(a.lib_a), "B": Backward(a.lib)}
    rows = run_rows(a, lambda name, n0: ab_one(name, n0, kernel, backward, workloads, a))
    env = environment()
    lines = [f"Run {env['date']} on {env['gpu']}. Command: `{env['command']}`", "",
             "Backward only, H=16, D=128, bf16, B*N=32768; A = --lib-a, B = --lib.", "",
             "| workload | N | A ms | B ms | B/A | max abs diff B vs A |", "|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['N']} | error: {r['error']} | | | |")
        else:
            lines.append(f"| {r['workload']} | {r['N']} | {r['a_ms']:.3f} | {r['b_ms']:.3f} | "
                         f"{r['b_over_a']:.3f} | {r['max_abs_diff']:.1e} |")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bwd_ab.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
