"""Python access to the CompileMask sm90 forward kernel, for the GPU tests and benchmarks,
through the C entry points of libcompilemask_cuda.so (include/compilemask/cuda_c.h documents
their arguments; the argtypes here follow its signatures, per ABI version).

  kernel = Kernel("build/kernels/libcompilemask_cuda.so")
  desc = compile_descriptor("build/tools/cli/compilemask", "examples/causal.mask", {}, nq=n, nk=n)
  kernel.forward(desc, q, k, v, out, lse, layout="bshd")

Tensors are torch CUDA tensors; the call runs on torch's current stream, in this process, so
the kernel can be timed beside FlexAttention and cuDNN. Descriptors come from the project's CLI
(`compilemask compile ... --emit descriptor`), never from Python code.
"""
import ctypes

import numpy as np
import torch
from cli_workloads import compile_blob

DTYPES = {torch.bfloat16: 0, torch.float16: 1}  # cm::cuda::DType
MAINLOOPS = {"auto": 0, "serial": 1, "pingpong": 2}


class Descriptor:
    """A descriptor blob in host memory (validation) and on the device (the kernel)."""

    def __init__(self, blob: bytes):
        self.host = np.frombuffer(blob, dtype=np.uint8).copy()
        self.device = torch.from_numpy(self.host).cuda()
        header = np.frombuffer(blob[:40], dtype=np.int32)
        # Header fields as int32 words: magic, version|header_bytes, total_bytes (2 words),
        # nq, nk, tile_m, tile_n, num_q_tiles, ... (include/compilemask/descriptor.h).
        self.nq, self.nk = int(header[4]), int(header[5])
        self.num_q_tiles = int(header[8])

    def host_ptr(self):
        return self.host.ctypes.data


def compile_descriptor(cli, mask_file, params, nq, nk, batch=1, heads=1):
    """The Descriptor of `compilemask compile MASK ... --emit descriptor`
    (cli_workloads.compile_blob, which says how params are given)."""
    return Descriptor(compile_blob(cli, mask_file, params, nq, nk, batch, heads))


def in_pages(x, page_size, table, pool_pages=None):
    """x [B, S, H, D] in a pool [pool_pages, page_size, H, D] of pages, as Kernel.forward's
    page_table reads it: rows [p * page_size, (p + 1) * page_size) of sequence b in page
    table[b, p] (table [B, pages per sequence], every index once, S at most its pages' rows).
    The pool has pool_pages pages (default: as many as the table names); every slot that holds
    no row of x (past S in a sequence's last page, and the pages the table leaves out) is NaN."""
    batch, rows = x.shape[:2]
    pages = table.shape[1]
    padded = torch.full((batch, pages * page_size, *x.shape[2:]), float("nan"), device=x.device,
                        dtype=x.dtype)
    padded[:, :rows] = x
    pool = torch.full((pool_pages or table.numel(), page_size, *x.shape[2:]), float("nan"),
                      device=x.device, dtype=x.dtype)
    pool[table.flatten().long()] = padded.view(batch * pages, page_size, *x.shape[2:])
    return pool


def strides_bsh(t, layout):
    """Element strides {batch, row, head} of a tensor in layout bshd, bhsd or thd (packed)."""
    if layout == "bshd":
        return (t.stride(0), t.stride(1), t.stride(2))
    if layout == "bhsd":
        return (t.stride(0), t.stride(2), t.stride(1))
    if layout == "thd":
        return (0, t.stride(0), t.stride(1))
    raise ValueError(layout)


def row_and_head_axes(layout):
    """The sequence and head axes of a [B,S,H,D] (bshd) or [B,H,S,D] (bhsd) tensor."""
    return (1, 2) if layout == "bshd" else (2, 1)


def problem_shape(q, k, lse, layout, q_offsets):
    """(batch, heads_q, heads_kv, head_dim, lse_strides, total_q, total_k) of a kernel call on
    q [B,S,H,D] (bshd), [B,H,S,D] (bhsd) or [T,H,D] (thd: batch from q_offsets, lse [H,T]); lse
    is [B,H,S] otherwise. total_q and total_k are 0 unless packed."""
    if layout == "thd":
        return (q_offsets.numel(), q.shape[1], k.shape[1], q.shape[2], (0, lse.stride(0)),
                q.shape[0], k.shape[0])
    _, hidx = row_and_head_axes(layout)
    return (q.shape[0], q.shape[hidx], k.shape[hidx], q.shape[3], (lse.stride(0), lse.stride(1)),
            0, 0)


def int64_array(values):
    """A ctypes int64 array holding values (strides for the C entry points)."""
    return (ctypes.c_int64 * len(values))(*values)


def data_ptr_or_null(t):
    return t.data_ptr() if t is not None else None


class KernelError(RuntimeError):
    pass


def call_checked(entry, *args):
    """Calls a cm_cuda_* C entry point with an error buffer as its last two arguments; raises
    KernelError with the entry's message unless it returns 0."""
    err = ctypes.create_string_buffer(1024)
    if entry(*args, err, len(err)) != 0:
        raise KernelError(err.value.decode())


def abi_version(lib):
    """lib's cm_cuda_abi_version(): 1 for builds before it (A/B runs time earlier revisions)."""
    return lib.cm_cuda_abi_version() if hasattr(lib, "cm_cuda_abi_version") else 1


def head_dim_types(lib):
    """The ctypes of the head-dim arguments of lib's entry points: head_dim, and head_dim_v (the
    columns of v and out; ABI version 9 on)."""
    return [ctypes.c_int] * (2 if abi_version(lib) >= 9 else 1)


def head_dim_arguments(types, head_dim, head_dim_v=0):
    """The head-dim arguments for a library with these head_dim_types; head_dim_v 0 means
    head_dim."""
    if len(types) == 1 and head_dim_v not in (0, head_dim):
        raise KernelError("this build of the library has no head_dim_v (cm_cuda_abi_version < 9)")
    return [head_dim, head_dim_v][:len(types)]


def logit_types(lib):
    """The ctypes of the logit arguments of lib's cm_cuda_forward and cm_cuda_backward: scale,
    softcap, the sinks (ABI version 7 on) and the ALiBi slopes (8 on), scale and softcap (2 on),
    or scale alone in builds before it, which have no cap."""
    version = abi_version(lib)
    return ([ctypes.c_float] * (2 if version >= 2 else 1)
            + [ctypes.c_void_p] * ((version >= 7) + (version >= 8)))


def logit_arguments(types, scale, softcap, sinks=None, alibi_slopes=None):
    """The logit arguments for a library with these logit_types; sinks and alibi_slopes: None,
    or a float32 device tensor [heads_q]."""
    if len(types) == 1 and softcap:
        raise KernelError("this build of the library has no softcap (cm_cuda_abi_version < 2)")
    if len(types) < 3 and sinks is not None:
        raise KernelError("this build of the library has no sinks (cm_cuda_abi_version < 7)")
    if len(types) < 4 and alibi_slopes is not None:
        raise KernelError("this build of the library has no ALiBi (cm_cuda_abi_version < 8)")
    return [scale, softcap, data_ptr_or_null(sinks), data_ptr_or_null(alibi_slopes)][:len(types)]


class Kernel:
    def __init__(self, library_path):
        self.lib = ctypes.CDLL(library_path)
        f = self.lib.cm_cuda_forward
        p, i, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)
        self.logit_types = logit_types(self.lib)
        self.head_dim_types = head_dim_types(self.lib)
        # Builds before ABI version 3 have no num_splits (after mainloop) and one workspace size,
        # before 4 no paged K/V arguments (after num_splits), before 5 no write_rows_outside
        # (after total_k).
        self.has_splits = abi_version(self.lib) >= 3
        self.has_pages = abi_version(self.lib) >= 4
        self.has_rows_outside = abi_version(self.lib) >= 5
        f.argtypes = [p, p, i, i, i, i, i, i, *self.head_dim_types, *self.logit_types, i,
                      *([i] * self.has_splits), *([p, ctypes.c_int64, i, i] * self.has_pages),
                      p, i64p, p, i64p, p, i64p, p, i64p, p, i64p,
                      p, p, ctypes.c_int64, ctypes.c_int64, *([i] * self.has_rows_outside),
                      p, ctypes.c_size_t, p, ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        g = self.lib.cm_cuda_permute_rows
        g.argtypes = [p, i64p, p, i64p, i, i, i, i, p, p, ctypes.c_char_p, ctypes.c_size_t]
        g.restype = ctypes.c_int
        if self.has_splits:
            w = self.lib.cm_cuda_forward_workspace_bytes_for
            w.argtypes = [p, p, i, i, i, *self.head_dim_types, i]
            self.lib.cm_cuda_forward_num_splits.argtypes = [p, p, i, i, i, *self.head_dim_types, i]
        else:
            w = self.lib.cm_cuda_forward_workspace_bytes
        w.restype = ctypes.c_size_t
        self._workspace_bytes = w
        self.workspace = torch.empty(0, dtype=torch.uint8, device="cuda")

    def num_splits(self, desc, batch, heads_q, heads_kv, head_dim, num_splits=0, head_dim_v=0):
        """The key parts a forward call with num_splits uses (0: automatic) on this device (a
        build of ABI version 3 on)."""
        parts = self.lib.cm_cuda_forward_num_splits(
            desc.host_ptr(), desc.device.data_ptr(), batch, heads_q, heads_kv,
            *head_dim_arguments(self.head_dim_types, head_dim, head_dim_v), num_splits)
        if parts == 0:
            raise KernelError("cm_cuda_forward_num_splits rejected the problem")
        return parts

    def _workspace_for(self, desc, batch, heads_q, heads_kv, head_dims, num_splits):
        """The workspace, grown to what this call needs (0 bytes from the library: a problem it
        rejects, which the call itself then reports). head_dims: head_dim_arguments'."""
        if self.has_splits:
            nbytes = self._workspace_bytes(desc.host_ptr(), desc.device.data_ptr(), batch,
                                           heads_q, heads_kv, *head_dims, num_splits)
        else:
            if num_splits > 1:
                raise KernelError("this build of the library has no split keys (ABI version < 3)")
            nbytes = self._workspace_bytes()
        if nbytes > self.workspace.numel():
            self.workspace = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        return self.workspace

    def permute_rows(self, src, dst, order, layout="bhsd"):
        """dst[.., s, ..] = src[.., order[s], ..] along the sequence axis of [B,S,H,D] (bshd)
        or [B,H,S,D] (bhsd) 16-bit tensors; order: int32 device tensor."""
        sidx, hidx = row_and_head_axes(layout)
        call_checked(
            self.lib.cm_cuda_permute_rows, src.data_ptr(), int64_array(strides_bsh(src, layout)),
            dst.data_ptr(), int64_array(strides_bsh(dst, layout)), src.shape[0],
            src.shape[hidx], src.shape[sidx], src.shape[3], order.data_ptr(),
            torch.cuda.current_stream().cuda_stream)

    def forward(self, desc, q, k, v, out, lse, layout="bshd", scale=0.0,
                q_offsets=None, k_offsets=None, mainloop="auto", softcap=0.0, num_splits=0,
                page_table=None, write_rows_outside=False, sinks=None, alibi_slopes=None):
        """Runs the kernel. q/k/v/out: [B,S,H,D] (bshd), [B,H,S,D] (bhsd) or [T,H,D] (thd,
        with int32 device q_offsets/k_offsets of length B); v and out may have fewer or more
        columns than q and k (head_dim_v, a build of ABI version 9 on). lse: float32 [B,H,S] or
        [H,T]. mainloop: auto, serial or pingpong (cm::cuda::Mainloop). softcap: 0 for none.
        num_splits: 0 automatic, 1 none, else that many key parts (cm::cuda::ForwardArgs).
        page_table: None, or device int32 [B, pages per sequence] with k and v pools of pages
        ([pages, page_size, H, D] in bshd, [pages, H, page_size, D] in bhsd; cm::cuda::PagedKV).
        write_rows_outside: the packed rows outside every sequence written as rows that see no
        key (cm::cuda::Problem; a build of ABI version 5 on). sinks: None, or float32 device
        attention-sink logits [H] (cm::cuda::Problem; ABI version 7 on). alibi_slopes: None, or
        float32 device ALiBi slopes [H] (cm::cuda::Problem; ABI version 8 on)."""
        batch, heads_q, heads_kv, head_dim, lse_strides, total_q, total_k = problem_shape(
            q, k, lse, layout, q_offsets)
        if page_table is not None and not self.has_pages:
            raise KernelError("this build of the library takes no page table "
                              "(cm_cuda_abi_version < 4)")
        paged = []
        if write_rows_outside and not self.has_rows_outside:
            raise KernelError("this build of the library has no write_rows_outside "
                              "(cm_cuda_abi_version < 5)")
        if self.has_pages:
            rows_axis = row_and_head_axes(layout)[0]
            paged = ([page_table.data_ptr(), page_table.stride(0), k.shape[rows_axis],
                      k.shape[0]] if page_table is not None else [None, 0, 0, 0])
        strides = [int64_array(strides_bsh(t, layout)) for t in (q, k, v, out)]
        head_dims = head_dim_arguments(self.head_dim_types, head_dim, v.shape[-1])
        workspace = self._workspace_for(desc, batch, heads_q, heads_kv, head_dims, num_splits)
        call_checked(
            self.lib.cm_cuda_forward,
            desc.host_ptr(), desc.device.data_ptr(), DTYPES[q.dtype], batch, heads_q, heads_kv,
            desc.nq, desc.nk, *head_dims,
            *logit_arguments(self.logit_types, scale, softcap, sinks, alibi_slopes),
            MAINLOOPS[mainloop], *([num_splits] * self.has_splits), *paged,
            q.data_ptr(), strides[0], k.data_ptr(), strides[1], v.data_ptr(), strides[2],
            out.data_ptr(), strides[3], lse.data_ptr(), int64_array(lse_strides),
            data_ptr_or_null(q_offsets), data_ptr_or_null(k_offsets),
            total_q, total_k, *([int(write_rows_outside)] * self.has_rows_outside),
            workspace.data_ptr(), workspace.numel(), torch.cuda.current_stream().cuda_stream)
