"""The dev build's compilemask._cuda (CM_BUILD_PYTHON=AUTO in the dev preset), which the package
that pip builds for the CPU tests leaves out: its host paths, on a machine without a GPU.
Its size queries read dims in the order the operator passes them (dtype, batch, heads_q,
heads_kv, nq, nk, head_dim, head_dim_v), as the C entry points of the same build answer (which
tests/gpu/c_api_test.cpp holds to the C++ API), and the launchers turn a rejected problem into
ValueError naming the entry point and the rule before any CUDA call. Skips without
CM_DEV_MODULES (the dev build's python/ folder, which scripts/test.sh passes) or when that build
has no kernels."""
from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

import compilemask as cm

HEADS, N, DIM = 4, 256, 128


def _dev_file(pattern: str) -> Path:
    folder = os.environ.get("CM_DEV_MODULES")
    if not folder:
        pytest.skip("CM_DEV_MODULES is not set (scripts/test.sh sets it to the dev build's "
                    "python/ folder)")
    found = [p for suffix in importlib.machinery.EXTENSION_SUFFIXES
             for p in Path(folder).glob(pattern + suffix)]
    if not found:
        pytest.skip(f"no {pattern} module for this Python in {folder} (a build without kernels, "
                    "or for another Python)")
    return found[0]


@pytest.fixture(scope="module")
def cuda():
    """compilemask._cuda of the dev build, loaded from its file."""
    spec = importlib.util.spec_from_file_location("_cuda", _dev_file("_cuda"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def c_api(cuda):
    """The C entry points of the same build (kernels/libcompilemask_cuda.so)."""
    lib = ctypes.CDLL(str(Path(os.environ["CM_DEV_MODULES"]).parent / "kernels" /
                          "libcompilemask_cuda.so"))
    p, i = ctypes.c_void_p, ctypes.c_int
    lib.cm_cuda_forward_workspace_bytes_for.argtypes = [p, p] + [i] * 6
    lib.cm_cuda_forward_workspace_bytes_for.restype = ctypes.c_size_t
    lib.cm_cuda_backward_workspace_bytes_for.argtypes = [p, p] + [i] * 7
    lib.cm_cuda_backward_workspace_bytes_for.restype = ctypes.c_size_t
    return lib


@pytest.fixture(scope="module")
def descriptor():
    """A causal plan's descriptor bytes (the host copy stands in for the device copy too: no
    case here reads it there)."""
    return np.ascontiguousarray(cm.masks.causal().specialize(nq=N).descriptor)


def test_size_queries_read_dims_in_the_operators_order(cuda, c_api, descriptor):
    d = descriptor.ctypes.data
    for heads_kv in (1, 2, 4):
        for head_dim, head_dim_v in ((64, 64), (128, 128), (256, 256), (192, 128), (64, 128)):
            dims = (0, 3, HEADS, heads_kv, N, N, head_dim, head_dim_v)
            for num_splits in (1, 5):
                assert cuda.workspace_bytes(d, d, dims, num_splits) == \
                    c_api.cm_cuda_forward_workspace_bytes_for(d, d, 3, HEADS, heads_kv, head_dim,
                                                              head_dim_v, num_splits)
            for head_splits in range(1, HEADS // heads_kv + 1):
                for deterministic in (False, True):
                    assert cuda.backward_workspace_bytes(d, d, dims, head_splits,
                                                         deterministic) == \
                        c_api.cm_cuda_backward_workspace_bytes_for(
                            d, d, 3, HEADS, heads_kv, head_dim, head_dim_v, head_splits,
                            deterministic)
                    assert cuda.backward_head_splits(d, d, dims, head_splits,
                                                     deterministic) == head_splits


def test_rejected_problems_raise_value_error_naming_the_rule(cuda, descriptor):
    d = descriptor.ctypes.data
    with pytest.raises(ValueError, match=r"cm::cuda::backward: head_splits must be 0 \(automatic"):
        cuda.backward_workspace_bytes(d, d, (0, 1, HEADS, 1, N, N, DIM, DIM), HEADS + 1, False)
    # The launchers with host buffers in the operator's argument order (_torch_ops): each case
    # breaks one rule, which the checks find before any CUDA call.
    buffer = np.zeros(HEADS * N * DIM * 4, dtype=np.uint16)
    t = buffer.ctypes.data
    strides = (N * HEADS * DIM, HEADS * DIM, DIM)  # [B, S, H, D]
    lse_strides = (HEADS * N, N)
    dims = (0, 1, HEADS, HEADS, N, N, DIM, DIM)

    def forward(dims, sinks=0, alibi_slopes=0):
        cuda.forward(d, d, dims, 0.0, 0.0, sinks, alibi_slopes, t, strides, t, strides, t,
                     strides, t, strides, t, lse_strides, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0)

    def backward(dims, sinks=0, dsinks=0, alibi_slopes=0):
        cuda.backward(d, d, dims, 0.0, 0.0, sinks, alibi_slopes, [(t, strides)] * 8, t,
                      lse_strides, 0, dsinks, 0, 0, 0, 0, False, 1, 0, 0, 0)

    with pytest.raises(ValueError, match=r"cm::cuda::forward: head_dim 100 is not supported"):
        forward((0, 1, HEADS, HEADS, N, N, 100, DIM))
    with pytest.raises(ValueError, match=r"cm::cuda::backward: head_dim_v 260 is not supported"):
        backward((*dims[:7], 260))
    with pytest.raises(ValueError, match=r"cm::cuda::forward: sinks must be 4-byte aligned"):
        forward(dims, sinks=t + 2)
    with pytest.raises(ValueError, match=r"cm::cuda::backward: dtype must be bf16 or fp16"):
        backward((7, *dims[1:]))
    with pytest.raises(ValueError, match=r"cm::cuda::backward: dsinks needs sinks"):
        backward(dims, dsinks=t)
    for launch, name in ((forward, "forward"), (backward, "backward")):
        with pytest.raises(ValueError, match=rf"cm::cuda::{name}: alibi_slopes must be 4-byte "
                                             "aligned"):
            launch(dims, alibi_slopes=t + 2)
    with pytest.raises(ValueError, match=r"batch, heads and rows must be >= 1"):
        cuda.permute_rows(t, strides, t + 16, strides, (0, HEADS, N, DIM), t, 0)
