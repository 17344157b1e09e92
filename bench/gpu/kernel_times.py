"""Per-kernel GPU times of our forward + backward, from torch.profiler: the forward kernel, the
backward's preprocess, main kernel and postprocess, and the gaps between them, averaged over ten
back-to-back forward + backward calls at one length (warm L2, no cache flush between calls, so
the times sit a few percent under bench_fwd.py's and bwd_bench.py's).

Usage: kernel_times.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens 32768] [--masks causal,...]
Prints one block per workload and writes OUTDIR/kernel_times.txt.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import (H, Workload, argument_parser, kernel_totals_us,  # noqa: E402
                          write_report)
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel  # noqa: E402

CALLS = 10


def kernel_times(name, n0, kernel, bwd, workloads, a):
    w = Workload(name, n0, a, workloads)
    q = torch.randn(w.B, H, w.N, w.D, device="cuda", dtype=torch.bfloat16)
    k, v, dout = torch.randn_like(q), torch.randn_like(q), torch.randn_like(q)
    out = torch.empty_like(q)
    lse = torch.empty(w.B, H, w.N, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(q), torch.empty_like(q)

    def fwd_bwd():
        kernel.forward(w.desc, q, k, v, out, lse, layout="bhsd")
        bwd.backward(w.desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd")

    totals, span = kernel_totals_us(fwd_bwd, CALLS)
    busy = sum(totals.values())
    lines = [f"{name} N={w.N} per call: span {span:.1f} us, kernels {busy:.1f} us, "
             f"gaps {span - busy:.1f} us"]
    lines += [f"   {key:<40} {t:8.1f} us" for key, t in totals.items()]
    return "\n".join(lines)


def main():
    a = argument_parser(lens="32768", budget=600).parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    kernel, bwd = Kernel(a.lib), Backward(a.lib)
    blocks = [kernel_times(name, int(n0), kernel, bwd, workloads, a)
              for n0 in a.lens.split(",") for name in a.masks.split(",")]
    write_report(a.out, "kernel_times.txt", "\n".join(blocks) + "\n")


if __name__ == "__main__":
    main()
