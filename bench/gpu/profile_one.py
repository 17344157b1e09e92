"""One launch of our forward or backward per workload for Nsight Compute
(scripts/gpu/profile.sh): the shapes and inputs of bench/gpu/ab.py, one warm-up call, then the
profiled call between cudaProfilerStart and cudaProfilerStop, so that `ncu --profile-from-start
off` sees that call alone, in workload order. The backward reads the out and lse of a forward
run before it. Writes OUTDIR/profiled_PASS.json: each profiled row with its computed tiles.

Usage: profile_one.py --cli .../compilemask --lib .../libcompilemask_cuda.so --examples examples
       --workloads DIR --out OUTDIR --pass fwd|bwd [--lens 32768] [--masks hstu,causal]
       [--dim 128] [--dim-v DV]
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import H, Workload, argument_parser, run_rows  # noqa: E402
from bwd_cm import Backward  # noqa: E402
from cm_kernel import Kernel  # noqa: E402


def profile_one(name, n0, kernel, backward, workloads, a):
    w = Workload(name, n0, a, workloads)
    q, k, v, dout = w.random_inputs(n0)
    if a.dim_v:  # v, dout and out with their own head dim (MLA: --dim 192 --dim-v 128)
        v, dout = (t[..., :a.dim_v].contiguous() for t in (v, dout))
    out = torch.full_like(v, float("nan"))
    lse = torch.full((w.B, H, w.N), float("nan"), device="cuda", dtype=torch.float32)
    grads = [torch.full_like(t, float("nan")) for t in (q, k, v)]
    kernel.forward(w.desc, q, k, v, out, lse, layout="bhsd")
    if a.pass_name == "fwd":
        call = lambda: kernel.forward(w.desc, q, k, v, out, lse, layout="bhsd")  # noqa: E731
    else:
        call = lambda: backward.backward(w.desc, q, k, v, out, dout, lse, *grads,  # noqa: E731
                                         layout="bhsd")
    call()  # warm-up
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return {"workload": name, "N": w.N, "B": w.B, "pass": a.pass_name, "tiles": w.tiles}


def main():
    p = argument_parser("32768", 600)
    p.add_argument("--pass", dest="pass_name", choices=("fwd", "bwd"), required=True)
    p.add_argument("--dim-v", type=int, default=0,
                   help="head dim of v, dout and out, below --dim (default 0: --dim)")
    a = p.parse_args()
    if not 0 <= a.dim_v <= a.dim:
        p.error(f"--dim-v {a.dim_v} must be in [0, --dim {a.dim}]")
    sys.path.insert(0, a.workloads)
    import workloads
    kernel, backward = Kernel(a.lib), Backward(a.lib)
    rows = run_rows(a, lambda name, n0: profile_one(name, n0, kernel, backward, workloads, a))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, f"profiled_{a.pass_name}.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
