"""Counts the 128 x 128 tiles of a workloads.py mask that a kernel computes, full and partial, and
how many distinct visibility bitmaps the partial ones have: the size of a descriptor that would
store every partial tile as a deduplicated bitmap instead of a formula. Also counts the
backward's 64-row steps (two per tile, one where the second half starts past N) and how many
of them lie in a partial tile and see no key: the steps that a backward skipping empty halves
saves. Numpy on the CPU.

Usage: python3 scripts/tile_bitmaps.py [--workload clear] [--n 32768] [--strip 0]
  --strip W  (clear only) lay the image out in W-column strips, as examples/clear.mask with
             strip = W and compilemask.strip_order do; 0 keeps the row-major order.
  --workloads DIR  the folder of workloads.py (default ../shared/reference)
"""
import argparse
import hashlib
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TILE = 128


def strip_order(text, s, strip, n):
    """compilemask.strip_order (the package, installed: docs/python.md)."""
    try:
        import compilemask
    except ImportError:
        sys.exit("tile_bitmaps.py: --strip needs the compilemask package (docs/python.md, Install)")
    return compilemask.strip_order(text, s, s, strip, n)


def count(mask_mod, order):
    """(full tiles, partial tiles, distinct partial bitmaps, backward steps, empty steps of
    partial tiles) of the mask on tokens in `order`."""
    n = len(order)
    tiles = (n + TILE - 1) // TILE
    full = partial = steps = empty_steps = 0
    distinct = set()
    for m in range(tiles):
        queries = order[m * TILE:(m + 1) * TILE]
        visible = mask_mod(0, 0, queries[:, None], order[None, :])
        visible = np.pad(visible, ((0, 0), (0, tiles * TILE - n)))
        blocks = visible.reshape(len(queries), tiles, TILE).transpose(1, 0, 2)
        sums = blocks.sum(axis=(1, 2))
        halves = 1 if len(queries) <= TILE // 2 else 2
        for k in np.nonzero(sums)[0]:
            steps += halves
            if sums[k] == len(queries) * min(TILE, n - k * TILE):
                full += 1
                continue
            partial += 1
            distinct.add(hashlib.blake2b(np.packbits(blocks[k]).tobytes(), digest_size=16).digest())
            empty_steps += sum(not blocks[k][h * TILE // 2:(h + 1) * TILE // 2].any()
                               for h in range(halves))
    return full, partial, len(distinct), steps, empty_steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workload", default="clear")
    p.add_argument("--n", type=int, default=32768)
    p.add_argument("--strip", type=int, default=0)
    p.add_argument("--workloads", default=os.path.join(ROOT, "..", "shared", "reference"))
    a = p.parse_args()
    sys.path.insert(0, a.workloads)
    import workloads
    mask_mod, prm = workloads.WORKLOADS[a.workload](a.n)
    n = prm["N"]
    if a.strip:
        if a.workload != "clear":
            p.error("--strip applies to clear only")
        order = strip_order(prm["text"], prm["grid"][0], a.strip, n)
    else:
        order = np.arange(n)
    full, partial, distinct, steps, empty_steps = count(mask_mod, order)
    bitmap_bytes = TILE * TILE // 8
    print(f"{a.workload} N={n} strip={a.strip}: {full} full and {partial} partial tiles; "
          f"{distinct} distinct partial bitmaps ({distinct * bitmap_bytes / 1e6:.2f} MB); "
          f"{steps} backward steps, {empty_steps} of them empty halves of partial tiles "
          f"({100 * empty_steps / steps:.1f}%)")


if __name__ == "__main__":
    main()
