// CompileMask GPU backward attention (Hopper, sm_90a), driven by the transposed form of a
// descriptor: dQ, dK and dV for the forward of compilemask/cuda.h.
//
//   size_t bytes = cm::cuda::backward_workspace_bytes(plan_gpu.view(), args);  // per size, mode
//   cm::cuda::backward(plan_gpu.view(), args, workspace, bytes, stream);       // per call
//
// backward() is stream-ordered, allocates nothing and can be captured in a CUDA graph. It
// checks the problem against the descriptor and throws cm::Error before launching anything
// when they do not fit; CUDA failures throw cm::cuda::CudaError. With GQA/MQA, dK and dV are
// summed over the query heads of each kv group. Rows that see no key contribute nothing. Head
// dims as the forward: head_dim_supported (cuda_limits.h), and Problem::head_dim_v.
#pragma once

#include <compilemask/cuda.h>

#include <cstddef>
#include <cstdint>

namespace cm::cuda {

// The forward's problem (its q, k, v, out and LSE are read) and the gradients of the loss.
struct BackwardArgs : Problem {
  TensorRef dout;  // like out (strides in elements, head_dim_v columns contiguous)
  // Optional gradient of the loss with respect to the LSE, float32 in the LSE's layout
  // (lse_stride_b, lse_stride_h, row stride 1); null means zero. It costs one read per row: as
  // d lse_i / d s_ij = P_ij, it enters dS_ij = P_ij (dP_ij - rowsum(dO O)_i + dlse_i).
  const float* dlse = nullptr;
  // Outputs, written (their data pointers are cast to writable): dq like q, dk like k, dv like v.
  TensorRef dq, dk, dv;
  // With Problem::sinks: null, or device float32 [heads_q] that receives (is overwritten with)
  // the gradient of the loss with respect to each head's sink, summed over the batch and rows:
  // -sum e^{sinks[h] - lse} (rowsum(dO O) - dLSE); 0 for a head whose sink is -inf. Summed in a
  // fixed order by one small kernel, so it is bitwise reproducible in either mode. Needs sinks.
  float* dsinks = nullptr;
  // Bitwise-identical dQ, dK and dV across runs (dQ adds ordered by key tile); slower.
  bool deterministic = false;
  // Head splits, for launches whose key tiles (batch x heads_kv x key tiles) make only a few
  // waves over the GPU's SMs: each key tile's kv group of query heads is cut into head_splits
  // near-equal parts that run as separate work items, whose float32 dK and dV sums a small
  // kernel adds up in order (deterministic too). 0 (the default): automatic (see
  // backward_head_splits); 1: never; 2 up to heads_q / heads_kv: that many parts. The parts need
  // workspace.
  int32_t head_splits = 0;
};

// These two read only the sizes of `args` (batch, heads_q, heads_kv, head dims), head_splits
// and deterministic, so they can be asked before the tensors exist, and throw cm::Error for
// descriptors and sizes backward() would reject.
//
// The head splits backward() uses on the current device: head_splits itself when it is not 0;
// else the count whose work items a replay of the GPU's dispatch onto its SMs, in the order of
// the mode (deterministic), estimates to finish first (1 when the kv group is one head, or the
// key tiles alone make four waves). In the default mode backward() also replays the count's two
// dispatch orders of the kv slices, to run the faster. Each replay takes 10-200 us of host time
// (only where the key tiles make under four waves) and runs once per problem in a process: its
// result is kept, keyed by the descriptor's bytes and these sizes.
int backward_head_splits(const DescriptorView& descriptor, const BackwardArgs& args);

// Bytes of device workspace backward() needs for this descriptor (its tiles) and problem size.
size_t backward_workspace_bytes(const DescriptorView& descriptor, const BackwardArgs& args);

// dQ, dK, dV of O = softmax(scale * Q Kᵀ masked) V (and of its LSE, with args.dlse), through the
// forward's logit cap when args.softcap is set (pass the forward's Problem). `workspace` is
// device memory of at least backward_workspace_bytes(...) bytes, 256-byte aligned; its contents
// need not be initialised.
void backward(const DescriptorView& descriptor, const BackwardArgs& args, void* workspace,
              size_t workspace_bytes, cudaStream_t stream);

}  // namespace cm::cuda
