"""Cases and the driver shared by the dense-reference GPU tests of the sm90 kernels
(test_forward.py, bwd_test.py): the problems (every workloads.py workload at odd lengths, and
special shapes), the command line, the Hopper check and the PASS/FAIL loop.

Import after torch: the tests exit with 77 (skipped) when torch is missing.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
LENGTHS = [1, 17, 113, 255, 1023, 4097]  # the workload sweep's sequence lengths


class Case:
    def __init__(self, name, mask_file, params, visible, nq, nk, batch=2, heads_q=4, heads_kv=4,
                 head_dim=128, dtype=torch.bfloat16, layout="bshd", scale=0.0):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def label(self):
        dt = "bf16" if self.dtype == torch.bfloat16 else "fp16"
        return (f"{self.name:14s} nq={self.nq:5d} nk={self.nk:5d} d={self.head_dim:3d} "
                f"h={self.heads_q}/{self.heads_kv} b={self.batch} {dt} {self.layout}")


# (head dim, query heads, kv heads, layout, dtype) cycled over the workload cases of both passes.
VARIANTS = [(128, 4, 4, "bshd", torch.bfloat16), (64, 4, 2, "bhsd", torch.bfloat16),
            (128, 4, 1, "thd", torch.float16), (64, 2, 2, "bshd", torch.float16),
            (128, 6, 2, "bhsd", torch.bfloat16), (96, 4, 2, "bshd", torch.bfloat16),
            (40, 4, 1, "thd", torch.float16)]
# Head dims above 128, on the kernels for 256, at fewer lengths (WIDE_LENGTHS).
WIDE_VARIANTS = [(256, 4, 2, "bshd", torch.bfloat16), (200, 4, 1, "thd", torch.float16),
                 (136, 2, 2, "bhsd", torch.bfloat16), (256, 6, 2, "bhsd", torch.float16)]
WIDE_LENGTHS = [17, 255, 1023]


def workload_cases(cli, workloads, lengths, variants=VARIANTS):
    """Every workload at the given odd lengths, cycling `variants` (head dims, GQA ratios,
    layouts and dtypes; cli: the compilemask tool, which gives clear_strips its token order)."""
    from cli_workloads import workload_mask, workload_order
    builders = {
        "causal": lambda n: workloads.causal(n, xp=torch, device="cuda"),
        "sliding": lambda n: workloads.sliding(n, W=max(1, n // 3), xp=torch, device="cuda"),
        "doc_causal": lambda n: workloads.doc_causal(n, mean=max(4, n // 5), xp=torch,
                                                     device="cuda"),
        "hstu": lambda n: workloads.hstu(n, mean=max(8, n // 4), xp=torch, device="cuda"),
        "shared_prefix": lambda n: workloads.shared_prefix(n, xp=torch, device="cuda"),
        "clear": lambda n: workloads.clear(n, r=4, text=max(1, n // 8), xp=torch, device="cuda"),
    }
    builders["clear_strips"] = builders["clear"]  # the same mask on tokens in strip order
    cases, i = [], 0
    for n in lengths:
        for name, build in builders.items():
            if name == "shared_prefix" and n < 16:
                continue  # eight responses need at least one token each
            mm, prm = build(n)
            N = prm["N"]
            order = workload_order(cli, name, prm)  # token i of the case is the workload's idx[i]
            idx = torch.arange(N, device="cuda") if order is None else torch.from_numpy(order).cuda()
            visible = mm(0, 0, idx[:, None], idx[None, :])
            mask_file, params = workload_mask(name, prm)
            d, hq, hkv, layout, dtype = variants[i % len(variants)]
            i += 1
            cases.append(Case(name, mask_file, params, visible, N, N, heads_q=hq, heads_kv=hkv,
                              head_dim=d, layout=layout, dtype=dtype))
    return cases


def causal_visible(nq, nk):
    """Bottom-right aligned causal visibility [nq, nk]."""
    iq = torch.arange(nq, device="cuda")[:, None]
    ik = torch.arange(nk, device="cuda")[None, :]
    return iq + nk - nq >= ik


def doc_gaps_visible(n, docs):
    """Documents with gaps: rows outside every document see no key."""
    seg = torch.full((n,), -1, device="cuda")
    for i, (a, b) in enumerate(docs):
        seg[a:b] = i
    idx = torch.arange(n, device="cuda")
    return (seg[:, None] == seg[None, :]) & (seg[:, None] >= 0) & (idx[:, None] >= idx[None, :])


def special_cases():
    """Nq != Nk (bottom-right causal), a softmax scale, MQA, and rows that see no key."""
    cases = [Case("causal_x", "causal.mask", {}, causal_visible(nq, nk), nq, nk)
             for nq, nk in [(113, 300), (300, 113), (1, 4097), (257, 129)]]
    n = 700
    cases.append(Case("causal_scale", "causal.mask", {}, causal_visible(n, n), n, n, scale=0.3,
                      head_dim=64, heads_q=8, heads_kv=1))
    # Rows in [100, 150) and [600, 700) belong to no document.
    docs = [(0, 100), (150, 300), (300, 600)]
    params = {"docs": ",".join(f"{a}:{b}" for a, b in docs)}
    visible = doc_gaps_visible(n, docs)
    cases.append(Case("doc_gaps", "doc_causal.mask", params, visible, n, n))
    cases.append(Case("doc_gaps", "doc_causal.mask", params, visible, n, n, layout="thd",
                      head_dim=64, heads_kv=2))
    return cases


def argument_parser():
    """--cli, --lib, --examples, --workloads and --quick, shared by the dense tests."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--examples", default=os.path.join(HERE, "..", "..", "examples"))
    ap.add_argument("--workloads",
                    default=os.path.join(HERE, "..", "..", "..", "shared", "reference"))
    ap.add_argument("--quick", action="store_true", help="short lengths only")
    return ap


def missing_hopper(tests):
    """The SKIP line when this machine cannot run `tests` (no Hopper GPU), else None."""
    if not torch.cuda.is_available():
        return f"SKIP: no CUDA GPU; the {tests} need one"
    if torch.cuda.get_device_capability() != (9, 0):
        return "SKIP: the sm90 kernel needs a compute capability 9.0 GPU (Hopper)"
    return None


def suite_cases(args, tests, quick_lengths):
    """The start of a dense suite: without a Hopper GPU, prints the SKIP line and returns None;
    else seeds torch and returns every workload at LENGTHS (the first quick_lengths of them
    with --quick), the special cases, and every workload at WIDE_LENGTHS in WIDE_VARIANTS (the
    first two lengths with --quick)."""
    skip = missing_hopper(tests)
    if skip:
        print(skip)
        return None
    sys.path.insert(0, args.workloads)
    import workloads
    torch.manual_seed(0)
    lengths = LENGTHS[:quick_lengths] if args.quick else LENGTHS
    wide_lengths = WIDE_LENGTHS[:2] if args.quick else WIDE_LENGTHS
    return (workload_cases(args.cli, workloads, lengths) + special_cases() +
            workload_cases(args.cli, workloads, wide_lengths, WIDE_VARIANTS))


def run_plan(plan, *args):
    """Runs each (case, runner) of plan as runner(*args, case) -> (ok, detail), printing a
    PASS/FAIL line per case and a count. Returns the exit code: 0 all passed, 1 otherwise."""
    failed = 0
    for case, runner in plan:
        try:
            ok, detail = runner(*args, case)
        except Exception as ex:  # a crash in one case must not hide the others
            ok, detail = False, f"{type(ex).__name__}: {ex}"
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'} {case.label()} {detail}", flush=True)
        torch.cuda.empty_cache()
    print(f"{len(plan) - failed}/{len(plan)} cases passed")
    return 1 if failed else 0
