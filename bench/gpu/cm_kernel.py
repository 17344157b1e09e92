"""Python access to the CompileMask sm90 forward kernel, for the GPU tests and benchmarks.

  kernel = Kernel("build/kernels/libcompilemask_cuda.so")
  desc = compile_descriptor("build/tools/cli/compilemask", "examples/causal.mask", {}, nq=n, nk=n)
  kernel.forward(desc, q, k, v, out, lse, layout="bshd")

Tensors are torch CUDA tensors; the call runs on torch's current stream, in this process, so
the kernel can be timed beside FlexAttention and cuDNN. Descriptors come from the project's CLI
(`compilemask compile ... --emit descriptor`), never from Python code.
"""
import ctypes
import os
import subprocess
import tempfile

import numpy as np
import torch

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
    """Runs `compilemask compile MASK -p k=v ... --emit descriptor` and loads the blob.

    params maps parameter names to CLI values: an int, a list of ints (int[]), or a string
    already in CLI form (e.g. "len:100,200" for segments, "0:128" for a segment)."""
    args = [cli, "compile", mask_file, "--nq", str(nq), "--nk", str(nk), "--batch", str(batch),
            "--heads", str(heads), "--emit", "descriptor"]
    with tempfile.TemporaryDirectory() as tmp:
        for name, value in params.items():
            if isinstance(value, (list, tuple)):
                text = ",".join(str(int(x)) for x in value)
                if len(text) > 2000:  # long lists travel through a file (@FILE)
                    path = os.path.join(tmp, name + ".txt")
                    with open(path, "w") as f:
                        f.write(text)
                    text = "@" + path
            else:
                text = str(value)
            args += ["-p", f"{name}={text}"]
        out = os.path.join(tmp, "descriptor.bin")
        args += ["-o", out]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        with open(out, "rb") as f:
            return Descriptor(f.read())


# "clear_strips" is workloads.py's clear with its image tokens reordered into strips of this many
# columns (about the disk's radius; docs/language.md, strip order).
CLEAR_STRIP = 16


def strip_order(cli, start, rows, cols, strip, total):
    """`compilemask strip-order`'s permutation as an int64 numpy array (cm::strip_order: the
    tool, because these scripts run without the Python package)."""
    args = [cli, "strip-order", "--start", str(start), "--rows", str(rows), "--cols", str(cols),
            "--strip", str(strip), "--total", str(total)]
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return np.array(done.stdout.split(), dtype=np.int64)


def workload_base(name):
    """The workloads.py workload a benchmark name stands for."""
    return "clear" if name == "clear_strips" else name


def workload_order(cli, name, prm):
    """None when the workload runs in its own token order, else the int64 numpy permutation
    that puts its tokens in the order of workload_mask's program (see strip_order)."""
    if name != "clear_strips":
        return None
    s = prm["grid"][0]
    return strip_order(cli, prm["text"], s, s, CLEAR_STRIP, prm["N"])


def workload_mask(name, prm):
    """The example mask file and CLI parameters equal to a workloads.py workload's params (for
    clear_strips: on the tokens reordered by workload_order)."""
    N = prm["N"]
    if name == "causal":
        return "causal.mask", {}
    if name == "sliding":
        return "sliding_window.mask", {"W": prm["W"]}
    if name == "doc_causal":
        return "doc_causal.mask", {"docs": "len:" + ",".join(map(str, prm["lens"]))}
    if name == "shared_prefix":
        bounds = [prm["prompt"]]
        for r in prm["responses"]:
            bounds.append(bounds[-1] + r)
        assert bounds[-1] == N
        return "shared_prefix.mask", {"prompt": f"0:{prm['prompt']}",
                                      "responses": ",".join(map(str, bounds))}
    if name == "hstu":
        return "hstu.mask", {"seqs": "len:" + ",".join(map(str, prm["lens"])),
                             "ctx": list(prm["ctx"]), "targets": list(prm["targets"])}
    if name in ("clear", "clear_strips"):
        s = prm["grid"][0]
        strip = CLEAR_STRIP if name == "clear_strips" else s
        return "clear.mask", {"text": prm["text"], "s": s, "r": prm["r"], "strip": strip}
    raise KeyError(name)


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


class Kernel:
    def __init__(self, library_path):
        self.lib = ctypes.CDLL(library_path)
        f = self.lib.cm_cuda_forward
        p, i, i64p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)
        f.argtypes = [p, p, i, i, i, i, i, i, i, ctypes.c_float, i,
                      p, i64p, p, i64p, p, i64p, p, i64p, p, i64p,
                      p, p, ctypes.c_int64, ctypes.c_int64, p, ctypes.c_size_t, p,
                      ctypes.c_char_p, ctypes.c_size_t]
        f.restype = ctypes.c_int
        g = self.lib.cm_cuda_permute_rows
        g.argtypes = [p, i64p, p, i64p, i, i, i, i, p, p, ctypes.c_char_p, ctypes.c_size_t]
        g.restype = ctypes.c_int
        self.lib.cm_cuda_forward_workspace_bytes.restype = ctypes.c_size_t
        nbytes = self.lib.cm_cuda_forward_workspace_bytes()
        self.workspace = torch.empty(nbytes, dtype=torch.uint8, device="cuda")

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
                q_offsets=None, k_offsets=None, mainloop="auto"):
        """Runs the kernel. q/k/v/out: [B,S,H,D] (bshd), [B,H,S,D] (bhsd) or [T,H,D] (thd,
        with int32 device q_offsets/k_offsets of length B). lse: float32 [B,H,S] or [H,T].
        mainloop: auto, serial or pingpong (cm::cuda::Mainloop)."""
        batch, heads_q, heads_kv, head_dim, lse_strides, total_q, total_k = problem_shape(
            q, k, lse, layout, q_offsets)
        strides = [int64_array(strides_bsh(t, layout)) for t in (q, k, v, out)]
        call_checked(
            self.lib.cm_cuda_forward,
            desc.host_ptr(), desc.device.data_ptr(), DTYPES[q.dtype], batch, heads_q, heads_kv,
            desc.nq, desc.nk, head_dim, scale, MAINLOOPS[mainloop],
            q.data_ptr(), strides[0], k.data_ptr(), strides[1], v.data_ptr(), strides[2],
            out.data_ptr(), strides[3], lse.data_ptr(), int64_array(lse_strides),
            data_ptr_or_null(q_offsets), data_ptr_or_null(k_offsets),
            total_q, total_k, self.workspace.data_ptr(), self.workspace.numel(),
            torch.cuda.current_stream().cuda_stream)
