"""The cm.masks helper call for each benchmark workload, shared by the GPU benchmark
(bench_python.py) and the CPU tests (tests/python/test_core.py, which check every mapping
against its predicate), so that both state a workload the same way. Besides workloads.py's
masks it defines "natten" and "video", grid neighbourhoods, and "random_window", windows drawn
per row, with workloads.py's signature.
Needs numpy and compilemask only (no torch)."""
import math

import numpy as np

import compilemask as cm


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).tolist()


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


EXTRA_WORKLOADS = {"natten": natten, "video": video, "random_window": random_window}


def workload(workloads, name):
    """The predicate maker of workload `name`: workloads.py's, or natten or video."""
    return EXTRA_WORKLOADS.get(name) or workloads.WORKLOADS[name]


def helper_mask(name, prm, order):
    """The cm.masks helper call that states workload `name` with parameters `prm` (what its
    maker returned); `order`: the grid helpers' strip and reorder arguments (empty: their
    default choice)."""
    if name == "causal":
        return cm.masks.causal()
    if name == "sliding":
        return cm.masks.sliding(prm["W"])
    if name == "doc_causal":
        return cm.masks.doc_causal(offsets(prm["lens"]))
    if name == "shared_prefix":
        return cm.masks.shared_prefix(prm["prompt"], prm["responses"])
    if name == "hstu":
        return cm.masks.hstu(offsets(prm["lens"]), ctx=prm["ctx"], targets=prm["targets"])
    if name == "clear":
        return cm.masks.clear(prm["text"], prm["grid"][0], prm["r"], **order)
    if name == "natten":
        return cm.masks.neighbourhood_2d(prm["side"], prm["side"], prm["r"], prm["r"], **order)
    if name == "video":
        return cm.masks.video_neighbourhood(prm["frames"], prm["side"], prm["side"], prm["rt"],
                                            prm["r"], prm["r"], **order)
    if name == "random_window":
        q = np.arange(prm["N"])
        return cm.masks.row_intervals(q + 1 - prm["windows"], q + 1)
    raise KeyError(name)
