// CompileMask GPU backward attention (Hopper, sm_90a), driven by the transposed form of a
// descriptor: dQ, dK and dV for the forward of compilemask/cuda.h.
//
//   size_t bytes = cm::cuda::backward_workspace_bytes(plan_gpu.view(), batch, heads_q,
//                                                     head_dim);                      // once
//   cm::cuda::backward(plan_gpu.view(), args, workspace, bytes, stream);              // per call
//
// backward() is stream-ordered, allocates nothing and can be captured in a CUDA graph. It
// checks the problem against the descriptor and throws cm::Error before launching anything
// when they do not fit; CUDA failures throw cm::cuda::CudaError. With GQA/MQA, dK and dV are
// summed over the query heads of each kv group. Rows that see no key contribute nothing. Head
// dims as the forward: head_dim_supported (cuda_limits.h).
#pragma once

#include <compilemask/cuda.h>

#include <cstddef>
#include <cstdint>

namespace cm::cuda {

// The forward's problem (its q, k, v, out and LSE are read) and the gradients of the loss.
struct BackwardArgs : Problem {
  TensorRef dout;  // same layout rules as q (strides in elements, head_dim contiguous)
  // Optional gradient of the loss with respect to the LSE, float32 in the LSE's layout
  // (lse_stride_b, lse_stride_h, row stride 1); null means zero. It costs one read per row: as
  // d lse_i / d s_ij = P_ij, it enters dS_ij = P_ij (dP_ij - rowsum(dO O)_i + dlse_i).
  const float* dlse = nullptr;
  // Outputs, written (their data pointers are cast to writable): dq like q, dk and dv like k.
  TensorRef dq, dk, dv;
  // Bitwise-identical dQ, dK and dV across runs (dQ adds ordered by key tile); slower.
  bool deterministic = false;
};

// Bytes of device workspace backward() needs for this descriptor (its query tiles) and problem
// size. Throws cm::Error for descriptors and sizes backward() would reject.
size_t backward_workspace_bytes(const DescriptorView& descriptor, int32_t batch, int32_t heads_q,
                                int32_t head_dim);

// dQ, dK, dV of O = softmax(scale * Q Kᵀ masked) V (and of its LSE, with args.dlse), through the
// forward's logit cap when args.softcap is set (pass the forward's Problem). `workspace` is
// device memory of at least backward_workspace_bytes(...) bytes, 256-byte aligned; its contents
// need not be initialised.
void backward(const DescriptorView& descriptor, const BackwardArgs& args, void* workspace,
              size_t workspace_bytes, cudaStream_t stream);

}  // namespace cm::cuda
