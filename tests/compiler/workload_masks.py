#!/usr/bin/env python3
"""Prints the benchmark workloads of ../shared/reference/workloads.py at small sizes, with their
parameters and dense masks, for workloads_agree_test.cpp. One record per case:

    case <workload> <N>
    param <name> <comma-separated integers>
    mask <N*N characters 0/1, row-major>

Usage: workload_masks.py <path to workloads.py>   (needs numpy)
"""
import importlib.util
import sys


def load(path):
    spec = importlib.util.spec_from_file_location("workloads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emit(w, name, mask_mod, params, n):
    print(f"case {name} {n}")
    for key, value in params.items():
        if key == "N":
            continue
        values = value if isinstance(value, list) else [value]
        print(f"param {key} {','.join(str(int(v)) for v in values)}")
    dense = w.dense(mask_mod, n)
    print("mask " + "".join("1" if x else "0" for x in dense.reshape(-1)))


def main():
    w = load(sys.argv[1])
    for n in (1, 17, 113, 300, 777):
        emit(w, "causal", *w.causal(n), n)
        for window in (7, 64):
            emit(w, "sliding", *w.sliding(n, W=window), n)
        for mean in (16, 50):
            emit(w, "doc_causal", *w.doc_causal(n, mean=mean, seed=n), n)
        emit(w, "hstu", *w.hstu(n, mean=40, ctx=4, seed=n), n)
        for groups in (3, 8):
            if n >= groups:
                emit(w, "shared_prefix", *w.shared_prefix(n, G=groups), n)
        for r, text in ((3, 20), (16, 64)):
            mask_mod, params = w.clear(n, r=r, text=text)
            emit(w, "clear", mask_mod, params, params["N"])


if __name__ == "__main__":
    main()
