"""Benchmark workloads beyond ../shared/reference/workloads.py, with its signature
(maker(N, ..., xp=np, device=None) -> (mask_mod, params)): "natten" and "video", grid
neighbourhoods, and "random_window", windows drawn per row. Used by the benchmarks of both
paths (workload_masks.py for cm.masks, cli_workloads.py for the tool) and their CPU tests.
Needs numpy only; xp=torch gives predicates over torch tensors.
"""
import math

import numpy as np


def natten(N, xp=None, device=None):
    """NATTEN-style neighbourhoods (not in workloads.py): the largest square image in N tokens,
    row-major, each token seeing the 17 x 17 box around it."""
    side, r = math.isqrt(N), 8
    return ((lambda b, h, q, k: (abs(q // side - k // side) <= r) &
             (abs(q % side - k % side) <= r)), {"N": side * side, "side": side, "r": r})


def video(N, xp=None, device=None):
    """Video neighbourhoods (not in workloads.py): N tokens as 8 square frames, row-major, each
    token seeing the ellipsoid of radii 2 frames, 8 rows, 8 columns around it."""
    frames, (rt, r) = 8, (2, 8)
    side = math.isqrt(N // frames)
    plane = side * side

    def mask_mod(b, h, q, k):
        dt, dy = q // plane - k // plane, q % plane // side - k % plane // side
        dx = q % side - k % side
        return dt * dt * r * r * r * r + (dy * dy + dx * dx) * rt * rt * r * r < (rt * r * r) ** 2
    return mask_mod, {"N": frames * plane, "frames": frames, "side": side, "rt": rt, "r": r}


def random_window(N, max_window=4096, seed=3, xp=np, device=None):
    """Windows drawn per row (not in workloads.py): row q sees its own w[q] most recent keys,
    w uniform in [1, max_window]; a mask that comes as data, not as a formula
    (cm.masks.row_intervals)."""
    windows = np.random.default_rng(seed).integers(1, max_window + 1, size=N)
    w = windows if xp is np else xp.as_tensor(windows, device=device)
    return (lambda b, h, q, k: (k <= q) & (k > q - w[q])), {"N": N, "windows": windows}


def window_bounds(prm):
    """random_window's rows as key intervals [starts, ends) (what row_intervals takes)."""
    q = np.arange(prm["N"])
    return q + 1 - prm["windows"], q + 1


EXTRA_WORKLOADS = {"natten": natten, "video": video, "random_window": random_window}


def workload(workloads, name):
    """The predicate maker of workload `name`: workloads.py's (the module `workloads`), or one
    of this file's."""
    return EXTRA_WORKLOADS.get(name) or workloads.WORKLOADS[name]
