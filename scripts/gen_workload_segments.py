#!/usr/bin/env python3
"""Writes bench/workload_segments.json: the seeded segment lists of the benchmark workloads
(doc_causal and hstu in ../shared/reference/workloads.py), so that the C++ benchmark uses
exactly the lengths Python's random.Random produces. Keys are "<workload>/<N>/<field>".

Usage: python3 scripts/gen_workload_segments.py [path/to/workloads.py]  (needs numpy)
"""
import importlib.util
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = (32768, 262144)


def load_workloads(path):
    spec = importlib.util.spec_from_file_location("workloads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    default = ROOT.parent / "shared" / "reference" / "workloads.py"
    workloads = load_workloads(sys.argv[1] if len(sys.argv) > 1 else default)
    out = {}
    for n in SIZES:
        _, doc = workloads.doc_causal(n)
        out[f"doc_causal/{n}/lens"] = doc["lens"]
        _, hstu = workloads.hstu(n)
        for field in ("lens", "ctx", "targets"):
            out[f"hstu/{n}/{field}"] = hstu[field]
    text = "{\n" + ",\n".join(f'  "{k}": {json.dumps(v)}' for k, v in out.items()) + "\n}\n"
    (ROOT / "bench" / "workload_segments.json").write_text(text)


if __name__ == "__main__":
    main()
