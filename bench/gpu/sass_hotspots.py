"""Summary of an Nsight Compute source page (per SASS instruction), as scripts/gpu/profile.sh
exports it (`ncu -i REPORT --page source --print-source sass --csv`): for each profiled kernel,
the warp-stall samples by reason, the instructions that take the most samples with their main
reasons, and the executed memory instructions by address space. The last table is what shows
a shared-memory access compiled as a generic one (LD/ST instead of LDS/STS), which the stall
totals alone do not.

Usage: python3 bench/gpu/sass_hotspots.py SASS.csv [--top 30]   (standard library only)
"""
import argparse
import csv
import re
import sys
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
# Opcode (after an optional predicate) -> address space, for the memory instructions.
SPACES = {"LDS": "shared", "STS": "shared", "LDSM": "shared", "LDL": "local", "STL": "local",
          "LDG": "global", "STG": "global", "LD": "generic", "ST": "generic"}


def number(text):
    return int(text.replace(",", "") or 0)


def kernels(path):
    """Yields (kernel name, header, rows) for each kernel block of the CSV."""
    name, header, rows = None, None, []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                if name is not None:
                    yield name, header, rows
                name, header, rows = row[1], None, []
            elif row[0] == "Address":
                header = row
            elif header is not None:
                rows.append(row)
    if name is not None:
        yield name, header, rows


def space_of(source):
    """The address space of a memory instruction, or None."""
    opcode = re.sub(r"^@!?U?P\w+\s+", "", source.strip()).split(" ")[0].split(".")[0]
    return SPACES.get(opcode)


def summarize(name, header, rows, top):
    col = {k: i for i, k in enumerate(header)}
    reasons = [k for k in header if k.startswith("stall_") and "(Not" not in k]
    lines = [f"== {name}"]
    total = Counter()
    spaces = Counter()
    hot = []
    for row in rows:
        samples = number(row[col[SAMPLES]])
        by_reason = Counter({k[len("stall_"):]: number(row[col[k]]) for k in reasons})
        total.update(by_reason)
        source = row[col["Source"]].strip()
        space = space_of(source)
        if space:
            spaces[space] += number(row[col[EXECUTED]])
        hot.append((samples, row[col["Address"]], source, by_reason))
    all_samples = sum(total.values()) or 1
    lines.append(f"samples: {all_samples}")
    lines.append("by reason: " + ", ".join(
        f"{k} {100 * v / all_samples:.1f}%" for k, v in total.most_common(12)))
    lines.append("executed memory instructions (warp level) by space: " + ", ".join(
        f"{k} {v}" for k, v in spaces.most_common()))
    lines.append(f"top {top} instructions by samples (share, address, SASS, main reasons):")
    hot.sort(key=lambda h: -h[0])
    for samples, address, source, by_reason in hot[:top]:
        main = ", ".join(f"{k} {v}" for k, v in by_reason.most_common(2) if v)
        share = 100 * samples / all_samples
        lines.append(f"  {share:5.1f}%  {address[-5:]}  {source[:64]:64s}  {main}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    found = False
    previous = None
    for name, header, rows in kernels(a.csv):
        if rows == previous:
            continue  # ncu may print a launch's page twice in a row
        previous = rows
        if header is None or SAMPLES not in header:
            print(f"sass_hotspots: {a.csv}: no '{SAMPLES}' column for {name}", file=sys.stderr)
            return 1
        print(summarize(name, header, rows, a.top) + "\n")
        found = True
    if not found:
        print(f"sass_hotspots: {a.csv}: no kernel in the source page", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
