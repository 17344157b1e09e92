// Problem checks (and the softmax scale and problem shape) shared by the sm90 launchers (launch.cu
// for the forward, bwd_host.cu for the backward). Each check throws cm::Error, or
// cm::cuda::CudaError for a CUDA failure, with a message that starts with the entry point's
// name and states the broken rule.
#pragma once

#include "packed_rows.h"
#include "problem_shape.h"

#include <compilemask/cuda.h>
#include <compilemask/descriptor.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace cm::cuda::host {

// The checks of one entry point; `entry` (e.g. "cm::cuda::forward") prefixes every message.
class LaunchChecks {
 public:
  explicit constexpr LaunchChecks(const char* entry) : entry_(entry) {}

  const char* entry() const { return entry_; }

  // Throws cm::Error "<entry>: <rule>" unless ok.
  void require(bool ok, const std::string& rule) const;

  // Throws CudaError "<entry>: <what>: <CUDA message>" unless status is cudaSuccess.
  void cuda(cudaError_t status, const char* what) const;

  // The current device's multiprocessor count (CudaError if it cannot be read).
  int multiprocessors() const;
  // Makes the current device's primary context current in this thread, for the driver calls
  // (cuTensorMapEncodeTiled): a thread that has made no runtime call that binds it, such as
  // autograd's backward worker, has none (CUDA_ERROR_INVALID_CONTEXT).
  void bind_device_context() const;

  // Host and device pointers set, a CompileMask descriptor of the supported version with
  // tile x tile tiles. Returns its header.
  const desc::Header& descriptor(const DescriptorView& d, int tile) const;

  void dtype(DType dtype) const;  // bf16 or fp16

  // head_dim_supported (cuda_limits.h) for head_dim, and for head_dim_v unless it is 0.
  void head_dims(const Problem& a) const;

  // heads_q is a multiple of heads_kv (heads_kv >= 1 already checked).
  void heads_group(int32_t heads_q, int32_t heads_kv) const;

  void scale(float scale) const;      // finite and >= 0 (0 means 1/sqrt(head_dim))
  void softcap(float softcap) const;  // finite and >= 0 (0 means no cap)
  // A per-head float32 vector (sinks, alibi_slopes, dsinks) named `name`: null or 4-byte aligned.
  void per_head(const float* values, const char* name) const;

  // The problem's lengths, batch and heads fit the descriptor header `h` with tile x tile tiles.
  void fits_header(const desc::Header& h, int tile, int32_t batch, int32_t heads_q, int32_t nq,
                   int32_t nk) const;

  // Packed layout ([T, H, D] with offsets) needs both offset arrays and totals >= the lengths.
  // Returns whether the layout is packed.
  bool packed_layout(const int32_t* q_offsets, const int32_t* k_offsets, int64_t total_q,
                     int64_t total_k, int32_t nq, int32_t nk) const;

  // A 16-bit tensor the kernels read or write through TMA or 16-byte vectors: data set and
  // 16-byte aligned, strides positive multiples of 8 elements (stride_b unused when packed).
  void tensor(const TensorRef& t, const char* name, bool packed) const;

  void lse(const float* lse, int64_t stride_h, int64_t stride_b) const;  // set, strides >= 0

  // Everything above for the fields forward and backward share: dtype, head dims,
  // sizes >= 1 that fit the header `h` (tile x tile tiles), GQA grouping, scale, softcap, layout,
  // and q, k, v, out and the LSE. Returns whether the layout is packed.
  bool problem(const desc::Header& h, int tile, const Problem& a) const;

 private:
  const char* entry_;
};

// The columns of v and out (and dout, dv): Problem::head_dim_v, or head_dim for 0.
int32_t value_head_dim(const Problem& a);

// The scale the kernels apply: Problem::scale, or 1/sqrt(head_dim) for 0.
float softmax_scale(const Problem& a);

// The factors the kernels form the logits with (FwdParams, BwdMainParams): scale_log2 is log2(e)
// times the softmax scale, or times softcap with a cap; softcap_scale is scale / softcap, or 0;
// score_units is log2(e) / scale_log2, what a logit's unit is in the scores the kernels hold
// (S, or the capped tanh), by which they scale the ALiBi slopes (a product in the kernels: a
// division there took IEEE division's slow-path call, whose register saves spilled).
struct LogitFactors {
  float scale_log2;
  float softcap_scale;
  float score_units;
};
LogitFactors logit_factors(const Problem& a);

// How a kernel gets the tile spans (ProblemShape::q_starts): always from the tables (the
// backward), or computed where the tiles are uniform (the forward).
enum class TileTables { kAlways, kWhereRestarted };

// The kernels' view of a checked problem masked by a checked descriptor.
sm90::ProblemShape problem_shape(const Problem& a, const DescriptorView& descriptor,
                                 TileTables tables);

// A packed problem's 16-bit output tensor t (out, dQ, dK or dV) as packed_rows.cu writes its
// rows: their first `columns` elements, 0 outside every sequence.
sm90::RowsTensor rows_tensor(const TensorRef& t, int32_t columns);

}  // namespace cm::cuda::host
