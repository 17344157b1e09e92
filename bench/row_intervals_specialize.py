"""Host cost of masks from per-row bounds: cm.masks.row_intervals(starts, ends).specialize at
32K tokens for bounds that form causal, a sliding window, and two random forms, against the
causal program; the minimum of 5 calls each. Prints the markdown table of
docs/perf-notes-host.md ("Masks from per-row bounds").

Usage: python bench/row_intervals_specialize.py   (needs the compilemask package, CPU build)
"""
import time

import numpy as np

import compilemask as cm

N = 32768


def best_ms(call, repeats=5):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times)


def main():
    q = np.arange(N)
    rng = np.random.default_rng(1)
    random_starts = rng.integers(0, N, N)
    bounds = {
        "causal (`starts = 0`, `ends = q + 1`)": (np.zeros(N, np.int64), q + 1),
        "sliding window of 4096": (q - 4095, q + 1),
        "random starts in [0, q], `ends = q + 1`": (rng.integers(0, q + 1), q + 1),
        "random starts, random lengths in [0, 4096)":
            (random_starts, random_starts + rng.integers(0, 4096, N)),
    }
    print("| bounds at 32K | specialize | patterns | descriptor | partial tiles |")
    print("|---|---|---|---|---|")
    for name, (starts, ends) in bounds.items():
        mask = cm.masks.row_intervals(starts, ends)
        stats = mask.specialize(nq=N).stats()
        print(f"| {name} | {best_ms(lambda: mask.specialize(nq=N)):.1f} ms | "
              f"{stats['patterns']:,} | {stats['bytes'] / 1e3:.1f} KB | "
              f"{stats['partial_tiles']:,} |")
    causal = cm.masks.causal()
    print(f"\ncausal program: {best_ms(lambda: causal.specialize(nq=N)):.2f} ms")


if __name__ == "__main__":
    main()
