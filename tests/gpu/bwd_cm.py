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
from cm_kernel import (DTYPES, KernelError, call_checked, data_ptr_or_null,  # noqa: E402
                       int64_array, logit_arguments, logit_types, problem_shape, strides_bsh)


class Backward:
    def __init__(self, library_path):
        self.lib = ctypes.CDLL(library_path)
        f = self.lib.cm_cuda_backward
        p, i, i64, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
        self.logit_types = logit_types(self.lib)
        f.argtypes = ([p, p, i, i, i, i, i, i, i, *self.logit_types]
                      + [p, i64p] * 5 + [p, i64p, p] + [p, i64p] * 3
                      + [p, p, i64, i64, i, p, ctypes.c_size_t, p, ctypes.c_char_p, ctypes.c_size_t])
        f.restype = ctypes.c_int
        w = self.lib.cm_cuda_backward_workspace_bytes_for  # sized by the descriptor's query tiles
        w.argtypes = [p, p, i, i, i]
        w.restype = ctypes.c_size_t
        self._workspace_bytes = w
        self._workspace = {}

    def workspace(self, desc, batch, heads_q, head_dim):
        """The workspace for desc's query tiles and this size, kept for later calls."""
        key = (desc.num_q_tiles, desc.nq, batch, heads_q, head_dim)
        if key not in self._workspace:
            nbytes = self._workspace_bytes(desc.host_ptr(), desc.device.data_ptr(), batch, heads_q,
                                           head_dim)
            if nbytes == 0:
                raise KernelError(f"no workspace size for {key}")
            self._workspace[key] = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        return self._workspace[key]

    def backward(self, desc, q, k, v, out, dout, lse, dq, dk, dv, layout="bshd", scale=0.0,
                 q_offsets=None, k_offsets=None, deterministic=False, dlse=None, softcap=0.0):
        """dq/dk/dv are written. lse: float32 [B, H, S] (bshd/bhsd) or [H, T] (thd); dlse,
        the LSE's gradient, None or a float32 tensor with lse's strides; softcap as in the
        forward."""
        batch, heads_q, heads_kv, head_dim, lse_strides, total_q, total_k = problem_shape(
            q, k, lse, layout, q_offsets)
        st = {name: int64_array(strides_bsh(t, layout))
              for name, t in dict(q=q, k=k, v=v, out=out, dout=dout, dq=dq, dk=dk, dv=dv).items()}
        ws = self.workspace(desc, batch, heads_q, head_dim)
        call_checked(
            self.lib.cm_cuda_backward,
            desc.host_ptr(), desc.device.data_ptr(), DTYPES[q.dtype], batch, heads_q, heads_kv,
            desc.nq, desc.nk, head_dim, *logit_arguments(self.logit_types, scale, softcap),
            q.data_ptr(), st["q"], k.data_ptr(), st["k"], v.data_ptr(), st["v"],
            out.data_ptr(), st["out"], dout.data_ptr(), st["dout"],
            lse.data_ptr(), int64_array(lse_strides), data_ptr_or_null(dlse),
            dq.data_ptr(), st["dq"], dk.data_ptr(), st["dk"], dv.data_ptr(), st["dv"],
            data_ptr_or_null(q_offsets), data_ptr_or_null(k_offsets),
            total_q, total_k, int(deterministic), ws.data_ptr(), ws.numel(),
            torch.cuda.current_stream().cuda_stream)
