"""The cm.masks helper call for each benchmark workload (workloads.py's and
extra_workloads.py's), shared by the GPU benchmark (bench_python.py) and the CPU tests
(tests/python/test_core.py, which check every mapping against its predicate), so that both
state a workload the same way. Needs numpy and compilemask only (no torch)."""
import numpy as np

import compilemask as cm
from extra_workloads import window_bounds


def offsets(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).tolist()


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
        return cm.masks.row_intervals(*window_bounds(prm))
    raise KeyError(name)
