// The combine kernel of split keys (fwd_splits.h): each output row's parts, each with its O
// normalised over its own keys and its LSE, merge into the row's O and LSE. With L the row's
// LSE, log sum_s exp(lse_s), part s weighs exp(lse_s - L). Parts without a visible key
// (lse_s = -inf) weigh 0, and a row with none gets O = 0 and LSE = -inf.
#include "fwd_launch.h"
#include "thread_helpers.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cm::sm90 {
namespace {

constexpr int kRowsPerBlock = 8;  // one warp per output row

__device__ __forceinline__ float warp_max(float x) {
  for (int d = 16; d > 0; d /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, d));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int d = 16; d > 0; d /= 2) x += __shfl_xor_sync(0xffffffffu, x, d);
  return x;
}

// Four output elements from four floats, as one 8-byte store.
template <class Element>
__device__ __forceinline__ void store4(Element* at, float4 x);

template <>
__device__ __forceinline__ void store4(__nv_bfloat16* at, float4 x) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(x.x, x.y), hi = __floats2bfloat162_rn(x.z, x.w);
  *reinterpret_cast<uint2*>(at) =
      make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

template <>
__device__ __forceinline__ void store4(__half* at, float4 x) {
  const __half2 lo = __floats2half2_rn(x.x, x.y), hi = __floats2half2_rn(x.z, x.w);
  *reinterpret_cast<uint2*>(at) =
      make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

template <class Element>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    fwd_combine(const __grid_constant__ FwdParams p) {
  const int64_t rows = int64_t{p.batch} * p.heads_q * p.nq;  // a part's rows (fwd_workspace)
  const int64_t row = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* part_lse = p.split_lse + row;  // part s at part_lse[s * rows]

  float max = kNegInf;
  for (int s = lane; s < p.num_splits; s += 32) max = fmaxf(max, part_lse[s * rows]);
  max = warp_max(max);
  float sum = 0.f;
  if (max != kNegInf) {
    for (int s = lane; s < p.num_splits; s += 32) sum += __expf(part_lse[s * rows] - max);
  }
  sum = warp_sum(sum);
  const float lse = sum > 0.f ? max + __logf(sum) : kNegInf;

  // rows < 2^32 (launch.cu): 32-bit divisions, where 64-bit ones call a subroutine.
  const auto row32 = static_cast<uint32_t>(row);
  const int q = static_cast<int>(row32 % static_cast<uint32_t>(p.nq));
  const int bh = static_cast<int>(row32 / static_cast<uint32_t>(p.nq));
  const int h = bh % p.heads_q;
  const int b = bh / p.heads_q;
  const bool packed = p.q_offsets != nullptr;
  const int64_t batch = packed ? 0 : b;
  const int64_t q_row = (packed ? p.q_offsets[b] : 0) + q;
  Element* out = static_cast<Element*>(p.out) + batch * p.out_stride_b + h * p.out_stride_h +
                 q_row * p.out_stride_s;
  for (int c = 4 * lane; c < p.head_dim; c += 4 * 32) {
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s = 0; s < p.num_splits; ++s) {
      const float lse_s = part_lse[s * rows];
      if (lse_s == kNegInf) continue;  // no visible key in the part (or in the row)
      const float w = __expf(lse_s - lse);
      const float4 o =
          *reinterpret_cast<const float4*>(p.split_out + (s * rows + row) * p.head_dim + c);
      acc.x = fmaf(w, o.x, acc.x);
      acc.y = fmaf(w, o.y, acc.y);
      acc.z = fmaf(w, o.z, acc.z);
      acc.w = fmaf(w, o.w, acc.w);
    }
    store4(out + c, acc);
  }
  if (lane == 0) p.lse[batch * p.lse_stride_b + h * p.lse_stride_h + q_row] = lse;
}

}  // namespace

cudaError_t launch_combine(ElementKind element, const FwdParams& params, cudaStream_t stream) {
  const int64_t rows = int64_t{params.batch} * params.heads_q * params.nq;
  const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (element == ElementKind::kBFloat16) {
    fwd_combine<__nv_bfloat16><<<blocks, 32 * kRowsPerBlock, 0, stream>>>(params);
  } else {
    fwd_combine<__half><<<blocks, 32 * kRowsPerBlock, 0, stream>>>(params);
  }
  return cudaGetLastError();
}

}  // namespace cm::sm90
