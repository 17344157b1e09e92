"""Python access to the CompileMask sm90 backward kernel (cm_cuda_backward in
libcompilemask_cuda.so), next to bench/gpu/cm_kernel.py's forward binding.

  bwd = Backward("build/kernels/libcompilemask_cuda.so")
  bwd.backward(desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bshd")

Tensors are torch CUDA tensors in layout bshd, bhsd or thd (see cm_kernel.strides_bsh); the
call runs on torch's current stream. The workspace is allocated once per problem size.
"""
import ctypes
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "gpu"))
from cm_kernel import (DTYPES, KernelError, abi_version, call_checked,  # noqa: E402
                       data_ptr_or_null, head_dim_arguments, head_dim_types, int64_array,
                       logit_arguments, logit_types, problem_shape, strides_bsh)


class Backward:
    def __init__(self, library_path):
        self.lib = ctypes.CDLL(library_path)
        f = self.lib.cm_cuda_backward
        p, i, i64, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
        self.logit_types = logit_types(self.lib)
        self.head_dim_types = head_dim_types(self.lib)  # head_dim_v from ABI version 9 on
        # Builds before ABI version 5 have no write_rows_outside (after total_k) and head_splits
        # (after deterministic), and size the workspace by (batch, heads_q, head_dim) alone;
        # before 6, the size queries do not take deterministic (after head_splits); before 7 there
        # are no sinks (in the logit arguments) and no dsinks (after dlse).
        self.has_splits = abi_version(self.lib) >= 5
        self.has_mode_query = abi_version(self.lib) >= 6
        self.has_sinks = abi_version(self.lib) >= 7
        f.argtypes = ([p, p, i, i, i, i, i, i, *self.head_dim_types, *self.logit_types]
                      + [p, i64p] * 5 + [p, i64p, p, *([p] * self.has_sinks)] + [p, i64p] * 3
                      + [p, p, i64, i64, *([i] * self.has_splits), i, *([i] * self.has_splits),
                         p, ctypes.c_size_t, p, ctypes.c_char_p, ctypes.c_size_t])
        f.restype = ctypes.c_int
        w = self.lib.cm_cuda_backward_workspace_bytes_for
        sizes = self._sizes(1, 1, 1, head_dim_arguments(self.head_dim_types, 64), 0, False)
        w.argtypes = [p, p, *([i] * len(sizes))]
        w.restype = ctypes.c_size_t
        self._workspace_bytes = w
        if self.has_splits:
            self.lib.cm_cuda_backward_head_splits.argtypes = w.argtypes
        self._workspace = {}

    def _sizes(self, batch, heads_q, heads_kv, head_dims, head_splits, deterministic):
        """The size arguments of the workspace query (and of head_splits) in this build;
        head_dims: head_dim_arguments'."""
        if self.has_mode_query:
            return [batch, heads_q, heads_kv, *head_dims, head_splits, int(deterministic)]
        if self.has_splits:
            return [batch, heads_q, heads_kv, *head_dims, head_splits]
        if head_splits > 1:
            raise KernelError("this build of the library has no head splits (ABI version < 5)")
        return [batch, heads_q, *head_dims]

    def head_splits(self, desc, batch, heads_q, heads_kv, head_dim, head_splits=0,
                    deterministic=False, head_dim_v=0):
        """The head splits a backward call with head_splits (0: automatic) and deterministic
        uses on this device."""
        head_dims = head_dim_arguments(self.head_dim_types, head_dim, head_dim_v)
        splits = self.lib.cm_cuda_backward_head_splits(
            desc.host_ptr(), desc.device.data_ptr(),
            *self._sizes(batch, heads_q, heads_kv, head_dims, head_splits, deterministic))
        if splits == 0:
            raise KernelError("cm_cuda_backward_head_splits rejected the problem")
        return splits

    def workspace(self, desc, *sizes):
        """The workspace for desc's tiles and these sizes (_sizes), kept for later calls."""
        key = (desc.num_q_tiles, desc.nq, desc.nk, *sizes)
        if key not in self._workspace:
            nbytes = self._workspace_bytes(desc.host_ptr(), desc.device.data_ptr(), *sizes)
            if nbytes == 0:
                raise KernelError(f"no workspace size for {key}")
            self._workspace[key] = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        return self._workspace[key]

    def backward(self, desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bshd", scale=0.0,
                 q_offsets=None, k_offsets=None, deterministic=False, dlse=None, softcap=0.0,
                 head_splits=0, write_rows_outside=False, sinks=None, dsinks=None,
                 alibi_slopes=None):
        """dq/dk/dv are written. lse: float32 [B, H, S] (bshd/bhsd) or [H, T] (thd); dlse,
        the LSE's gradient, None or a float32 tensor with lse's strides; softcap, sinks and
        alibi_slopes as in the forward; dsinks: None, or float32 [H] that receives the sinks'
        gradient; head_splits: 0 automatic, 1 none, else that many parts of each kv group
        (cm::cuda::BackwardArgs); write_rows_outside as in Kernel.forward."""
        if dsinks is not None and not self.has_sinks:
            raise KernelError("this build of the library has no dsinks (cm_cuda_abi_version < 7)")
        batch, heads_q, heads_kv, head_dim, lse_strides, total_q, total_k = problem_shape(
            q, k, lse, layout, q_offsets)
        if write_rows_outside and not self.has_splits:
            raise KernelError("this build of the library has no write_rows_outside "
                              "(cm_cuda_abi_version < 5)")
        st = {name: int64_array(strides_bsh(t, layout))
              for name, t in dict(q=q, k=k, v=v, out=out, dout=dout, dq=dq, dk=dk, dv=dv).items()}
        head_dims = head_dim_arguments(self.head_dim_types, head_dim, v.shape[-1])
        ws = self.workspace(
            desc, *self._sizes(batch, heads_q, heads_kv, head_dims, head_splits, deterministic))
        call_checked(
            self.lib.cm_cuda_backward,
            desc.host_ptr(), desc.device.data_ptr(), DTYPES[q.dtype], batch, heads_q, heads_kv,
            desc.nq, desc.nk, *head_dims,
            *logit_arguments(self.logit_types, scale, softcap, sinks, alibi_slopes),
            q.data_ptr(), st["q"], k.data_ptr(), st["k"], v.data_ptr(), st["v"],
            out.data_ptr(), st["out"], dout.data_ptr(), st["dout"],
            lse.data_ptr(), int64_array(lse_strides), data_ptr_or_null(dlse),
            *([data_ptr_or_null(dsinks)] * self.has_sinks),
            dq.data_ptr(), st["dq"], dk.data_ptr(), st["dk"], dv.data_ptr(), st["dv"],
            data_ptr_or_null(q_offsets), data_ptr_or_null(k_offsets), total_q, total_k,
            *([int(write_rows_outside)] * self.has_splits), int(deterministic),
            *([head_splits] * self.has_splits), ws.data_ptr(), ws.numel(),
            torch.cuda.current_stream().cuda_stream)
