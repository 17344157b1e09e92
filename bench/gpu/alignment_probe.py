"""What tiles aligned to the sequences would gain on the packed workloads (hstu, doc_causal):
each workload's sequences are laid out again with every sequence starting on a multiple of
the 128-row tile (the gap tokens see nothing and are seen by nothing), and our forward and
forward + backward are timed on both layouts in alternating rounds. The visible pairs are the
same, so the time ratio is what per-sequence tiling would gain, as a measurement: the aligned
layout computes the tiles that a descriptor with tiles restarting at every sequence would.
The gather into the aligned layout is not timed; the real rows' outputs of both layouts are
compared as a check.

Usage: alignment_probe.py --cli BUILD/tools/cli/compilemask --lib BUILD/kernels/libcompilemask_cuda.so
       --examples examples --workloads DIR --out OUTDIR [--lens 32768] [--masks hstu,doc_causal]
Writes OUTDIR/alignment_probe.md.
"""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "gpu"))
from bench_common import (H, TILE, TOKENS, argument_parser, interleaved_median_ms,  # noqa: E402
                          tile_counts, write_table)
from bwd_cm import Backward  # noqa: E402
from cli_workloads import workload_mask  # noqa: E402
from cm_kernel import Kernel, compile_descriptor  # noqa: E402


def aligned_params(name, prm):
    """The workload's mask parameters with every sequence moved to start on a tile, the new
    length, and the int64 positions of the original tokens in it."""
    lens = prm["lens"]
    starts = np.concatenate([[0], np.cumsum([-(-L // TILE) * TILE for L in lens])])
    pairs = ",".join(f"{s}:{s + L}" for s, L in zip(starts[:-1], lens))
    positions = np.concatenate([np.arange(s, s + L) for s, L in zip(starts[:-1], lens)])
    mask_file, params = workload_mask(name, prm)
    params[{"hstu": "seqs", "doc_causal": "docs"}[name]] = pairs
    return mask_file, params, int(starts[-1]), positions


def main():
    p = argument_parser("32768", 300)
    p.set_defaults(masks="hstu,doc_causal")
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    kernel, bwd = Kernel(a.lib), Backward(a.lib)
    rows = []
    for n0 in map(int, a.lens.split(",")):
        for name in a.masks.split(","):
            _, prm = workloads.WORKLOADS[name](n0)
            B = max(1, TOKENS // n0)
            layouts = {}
            mask_file, params = workload_mask(name, prm)
            layouts["packed"] = (compile_descriptor(a.cli, os.path.join(a.examples, mask_file),
                                                    params, n0, n0), np.arange(n0))
            mask_file, params, n1, positions = aligned_params(name, prm)
            layouts["aligned"] = (compile_descriptor(a.cli, os.path.join(a.examples, mask_file),
                                                     params, n1, n1), positions)
            torch.manual_seed(0)
            real = [torch.randn(B, H, n0, a.dim, device="cuda", dtype=torch.bfloat16)
                    for _ in range(4)]
            fwd, both, results = {}, {}, {}
            for key, (desc, pos) in layouts.items():
                index = torch.from_numpy(pos).cuda()
                q, k, v, dout = (torch.zeros(B, H, desc.nq, a.dim, device="cuda",
                                             dtype=torch.bfloat16).index_copy_(2, index, t)
                                 for t in real)
                out, dq, dk, dv = (torch.empty_like(q) for _ in range(4))
                lse = torch.empty(B, H, desc.nq, device="cuda", dtype=torch.float32)

                def forward(desc=desc, q=q, k=k, v=v, out=out, lse=lse):
                    kernel.forward(desc, q, k, v, out, lse, layout="bhsd")

                def forward_backward(desc=desc, tensors=(q, k, v, out, dout, lse, dq, dk, dv)):
                    q, k, v, out, dout, lse, dq, dk, dv = tensors
                    kernel.forward(desc, q, k, v, out, lse, layout="bhsd")
                    bwd.backward(desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bhsd")

                forward_backward()
                torch.cuda.synchronize()
                results[key] = [t.index_select(2, index).float() for t in (out, dq, dk, dv)]
                fwd[key], both[key] = forward, forward_backward
                tiles, _ = tile_counts(desc)
                layouts[key] = (desc, tiles)
            diff = max((x - y).abs().max().item()
                       for x, y in zip(results["packed"], results["aligned"]))
            t_fwd, t_both = interleaved_median_ms(fwd), interleaved_median_ms(both)
            rows.append([name, n0, layouts["aligned"][0].nq, layouts["packed"][1],
                         layouts["aligned"][1], f"{t_fwd['packed']:.3f}", f"{t_fwd['aligned']:.3f}",
                         f"{t_fwd['aligned'] / t_fwd['packed']:.3f}", f"{t_both['packed']:.3f}",
                         f"{t_both['aligned']:.3f}",
                         f"{t_both['aligned'] / t_both['packed']:.3f}", f"{diff:.1e}"])
    write_table(a.out, "alignment_probe.md",
                f"H={H}, D={a.dim}, bf16, B*N={TOKENS}; ms; aligned/packed below 1 means the "
                "aligned layout is faster; max diff: the real rows' O, dQ, dK, dV of the two "
                "layouts.",
                ["workload", "N", "aligned N", "packed tiles", "aligned tiles", "fwd packed",
                 "fwd aligned", "fwd aligned/packed", "fwd+bwd packed", "fwd+bwd aligned",
                 "fwd+bwd aligned/packed", "max diff"], rows)


if __name__ == "__main__":
    main()
