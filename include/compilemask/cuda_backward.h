// CompileMask GPU backward attention (Hopper, sm_90a), driven by the transposed form of a
// descriptor: dQ, dK and dV for the forward of compilemask/cuda.h.
//
//   size_t bytes = cm::cuda::backward_workspace_bytes(batch, heads_q, nq, head_dim);  // once
//   cm::cuda::backward(plan_gpu.view(), args, workspace, bytes, stream);              // per call
//
// backward() is stream-ordered, allocates nothing and can be captured in a CUDA graph. It
// checks the problem against the descriptor and throws cm::Error before launching anything
// when they do not fit; CUDA failures throw cm::cuda::CudaError. With GQA/MQA, dK and dV are
// summed over the query heads of each kv group. Rows that see no key contribute nothing.
#pragma once

#include <compilemask/cuda.h>

#include <cstddef>
#include <cstdint>

namespace cm::cuda {

struct BackwardArgs {
  DType dtype = DType::kBFloat16;
  int32_t batch = 1;
  int32_t heads_q = 1;
  int32_t heads_kv = 1;  // heads_q must be a multiple (GQA/MQA)
  int32_t nq = 0;        // must equal the descriptor's nq
  int32_t nk = 0;        // must equal the descriptor's nk
  int32_t head_dim = 0;  // 64 or 128
  float scale = 0.f;     // softmax scale of the forward; 0 means 1/sqrt(head_dim)

  // Inputs: the forward's q, k, v, its output and LSE, and the output gradient. Same layout
  // rules as ForwardArgs (strides in elements, head_dim contiguous, 16-byte alignment).
  TensorRef q, k, v;
  TensorRef out;
  TensorRef dout;
  const float* lse = nullptr;  // natural log, row stride 1, as forward() writes it
  int64_t lse_stride_b = 0;
  int64_t lse_stride_h = 0;

  // Outputs, written (their data pointers are cast to writable): dq like q, dk and dv like k.
  TensorRef dq, dk, dv;

  // Packed layout [T, H, D], as in ForwardArgs.
  const int32_t* q_offsets = nullptr;
  const int32_t* k_offsets = nullptr;
  int64_t total_q = 0;
  int64_t total_k = 0;

  // Bitwise-identical dQ, dK and dV across runs (dQ adds ordered by key tile); slower.
  bool deterministic = false;
};

// Bytes of device workspace backward() needs for this problem size. Throws cm::Error for
// sizes backward() would reject.
size_t backward_workspace_bytes(int32_t batch, int32_t heads_q, int32_t nq, int32_t head_dim);

// dQ, dK, dV of O = softmax(scale * Q Kᵀ masked) V. `workspace` is device memory of at least
// backward_workspace_bytes(...) bytes, 256-byte aligned; its contents need not be initialised.
void backward(const DescriptorView& descriptor, const BackwardArgs& args, void* workspace,
              size_t workspace_bytes, cudaStream_t stream);

}  // namespace cm::cuda
