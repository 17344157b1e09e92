"""Shared helpers of the Python tests: dense float64 attention, the workloads module and the
benchmarks' extra workloads and workload mappings (bench/gpu/extra_workloads.py,
workload_masks.py, cli_workloads.py)."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path):
    """Imports the file at `path` as module `name` (registered in sys.modules, as an import
    would, so that the interpreter tears it down with the others)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# The benchmarks' workloads beyond workloads.py; how bench/gpu/bench_python.py states each
# workload through the cm.masks helpers; and how the GPU tests and benchmarks state them for
# the compilemask tool.
extra_workloads = _load("extra_workloads", REPO / "bench" / "gpu" / "extra_workloads.py")
workload_masks = _load("workload_masks", REPO / "bench" / "gpu" / "workload_masks.py")
cli_workloads = _load("cli_workloads", REPO / "bench" / "gpu" / "cli_workloads.py")


def _workloads_path() -> Path | None:
    candidates = [os.environ.get("CM_WORKLOADS", ""), REPO / "tests" / "data",
                  REPO.parent / "shared" / "reference"]
    for folder in candidates:
        if folder and (Path(folder) / "workloads.py").is_file():
            return Path(folder) / "workloads.py"
    return None


@pytest.fixture(scope="session")
def workloads():
    """shared/reference/workloads.py: the benchmark masks as brute-force predicates."""
    path = _workloads_path()
    if path is None:
        pytest.skip("workloads.py not found (set CM_WORKLOADS to the folder holding it)")
    return _load("workloads", path)


def dense_attention64(q, k, v, visible, scale, dout=None, dlse=None, softcap=None, sinks=None,
                      alibi_slopes=None):
    """Float64 masked attention on [B, Hq, Nq, D] / [B, Hkv, Nk, D] numpy arrays with
    visible[b, h] an [Nq, Nk] bool array (b, h broadcast when 1), the logits capped at
    softcap * tanh(logit / softcap) when softcap is set, then with alibi_slopes ([Hq]) biased by
    -slope * |i + Nk - Nq - j|, and with sinks ([Hq]) one more key per head of that logit and
    value 0. Returns out, lse and, given dout (and optionally dlse, the
    LSE's gradient [B, Hq, Nq]), dq, dk, dv (dk, dv summed over each GQA group), and with sinks
    dsinks. Rows that see nothing: out 0, lse -inf (the sink), no gradient to q, k, v."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    nk = k.shape[2]
    k_h, v_h = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    logits, slope = scale * q @ k_h.swapaxes(-1, -2), np.ones(1)  # d logit / d (scale q·k)
    if softcap:
        t = np.tanh(logits / softcap)
        logits, slope = softcap * t, 1 - t * t
    if alibi_slopes is not None:
        nq = q.shape[2]
        distance = np.abs(np.arange(nq)[:, None] + nk - nq - np.arange(nk)[None, :])
        logits = logits - np.asarray(alibi_slopes, np.float64)[None, :, None, None] * distance
    visible = np.broadcast_to(visible, logits.shape)
    if sinks is not None:  # the sink as key nk: always seen (unless -inf), value 0, not capped
        column = np.broadcast_to(np.asarray(sinks, np.float64)[None, :, None, None],
                                 (*logits.shape[:3], 1))
        logits = np.concatenate([logits, column], -1)
        visible = np.concatenate([visible, np.isfinite(column)], -1)
        slope = np.concatenate([np.broadcast_to(slope, logits[..., :nk].shape),
                                np.ones_like(column)], -1)
        v_h = np.concatenate([v_h, np.zeros((*v_h.shape[:2], 1, v_h.shape[-1]))], -2)
    s = np.where(visible, logits, -np.inf)
    row_max = s.max(-1, keepdims=True)
    any_visible = np.isfinite(row_max)
    p = np.where(visible, np.exp(s - np.where(any_visible, row_max, 0)), 0.0)
    total = p.sum(-1, keepdims=True)
    p = np.divide(p, total, out=np.zeros_like(p), where=total > 0)
    out = p @ v_h
    lse = np.where(any_visible, np.log(np.where(total > 0, total, 1)) + row_max, -np.inf)[..., 0]
    if dout is None:
        return out, lse
    dout = np.asarray(dout, np.float64)
    dv_h = p.swapaxes(-1, -2) @ dout
    dp = dout @ v_h.swapaxes(-1, -2)
    row_term = (dout * out).sum(-1, keepdims=True)
    if dlse is not None:  # d lse_i / d s_ij = p_ij
        row_term = row_term - np.asarray(dlse, np.float64)[..., None]
    ds = p * (dp - row_term) * slope
    dq = scale * ds[..., :nk] @ k_h
    dk_h = scale * ds[..., :nk].swapaxes(-1, -2) @ q

    def fold(x):
        return x.reshape(x.shape[0], k.shape[1], group, *x.shape[2:]).sum(2)

    grads = (dq, fold(dk_h), fold(dv_h[..., :nk, :]))
    if sinks is not None:
        grads += (ds[..., nk].sum((0, 2)),)
    return (out, lse, *grads)
