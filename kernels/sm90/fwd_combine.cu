// The combine kernel of split keys (fwd_splits.h): each output row's parts, each with its O
// normalised over its own keys and its LSE, merge into the row's O and LSE. With L the row's
// LSE, log sum_s exp(lse_s), part s weighs exp(lse_s - L). Parts without a visible key
// (lse_s = -inf) weigh 0, and a row with none gets O = 0 and LSE = -inf. The head's attention
// sink (FwdParams::sinks) is one more part, of LSE the sink and O = 0: it adds to L only.
#include "dependent_launch.cuh"
#include "fwd_launch.h"
#include "fwd_splits.h"
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

// Lane l of a row's warp holds the LSEs of parts l, l + 32, ...
constexpr int kPartsPerLane = kMaxSplits / 32;
// Parts' O rows a lane loads before it adds any.
constexpr int kLoadsInFlight = 8;

// (The minimum of 1 block per SM: without it ptxas held the kernel to 64 registers and spilled.)
template <class Element>
__global__ void __launch_bounds__(32 * kRowsPerBlock, 1)
    fwd_combine(const __grid_constant__ FwdParams p) {
  // Launched as the main kernel's programmatic dependent (launch_combine): its parts are
  // complete and visible only past this wait.
  wait_for_primary();
  const int64_t rows = int64_t{p.batch} * p.heads_q * p.nq;  // a part's rows (fwd_workspace)
  const int64_t row = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  // rows < 2^32 (launch.cu): 32-bit divisions, where 64-bit ones call a subroutine.
  const auto row32 = static_cast<uint32_t>(row);
  const int q = static_cast<int>(row32 % static_cast<uint32_t>(p.nq));
  const int bh = static_cast<int>(row32 / static_cast<uint32_t>(p.nq));
  const int h = bh % p.heads_q;
  const int b = bh / p.heads_q;
  // Its parts were not computed (fwd_work.cuh); packed_rows.cu writes its NaN rows.
  if (!sequence_fits(p, b)) return;
  const bool packed = p.q_offsets != nullptr;
  const int64_t batch = packed ? 0 : b;
  const int64_t q_row = (packed ? p.q_offsets[b] : 0) + q;
  Element* out = static_cast<Element*>(p.out) + batch * p.out_stride_b + h * p.out_stride_h;
  float* lse_out = p.lse + batch * p.lse_stride_b + h * p.lse_stride_h;
  const float* part_lse = p.split_lse + row;  // part s at part_lse[s * rows]

  // Each lane reads its parts' LSEs once (all loads in flight together) and keeps them.
  float lse_of[kPartsPerLane];
#pragma unroll
  for (int i = 0; i < kPartsPerLane; ++i) {
    const int s = i * 32 + lane;
    lse_of[i] = s < p.num_splits ? part_lse[s * rows] : kNegInf;
  }
  const float sink = p.sinks != nullptr ? p.sinks[h] : kNegInf;
  float max = kNegInf;
#pragma unroll
  for (int i = 0; i < kPartsPerLane; ++i) max = fmaxf(max, lse_of[i]);
  max = fmaxf(warp_max(max), sink);
  float sum = 0.f;
  if (max != kNegInf) {
#pragma unroll
    for (int i = 0; i < kPartsPerLane; ++i) sum += __expf(lse_of[i] - max);  // exp(-inf) = 0
  }
  sum = warp_sum(sum);
  if (sink != kNegInf) sum += __expf(sink - max);
  const float lse = sum > 0.f ? max + __logf(sum) : kNegInf;
  // Lane l's weights of parts l, l + 32, ...: 0 for a part without a visible key (LSE -inf),
  // whose O was never written, so that it is dropped by a select, not multiplied.
  float weight_of[kPartsPerLane];
#pragma unroll
  for (int i = 0; i < kPartsPerLane; ++i) {
    weight_of[i] = lse_of[i] != kNegInf ? __expf(lse_of[i] - lse) : 0.f;
  }

  Element* out_row = out + q_row * p.out_stride_s;
  // Every lane runs every pass (the shuffles take the whole warp); a lane past O's columns
  // reads column 0 and stores nothing.
  for (int c0 = 0; c0 < p.head_dim_v; c0 += 4 * 32) {
    const int c = c0 + 4 * lane;
    const bool mine = c < p.head_dim_v;
    const float* column = p.split_out + row * p.head_dim_v + (mine ? c : 0);
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int first = 0; first < p.num_splits; first += 32) {
      // Lane j's weight for part first + j, picked by selects (indexed, the array would live in
      // local memory).
      float weight = 0.f;
#pragma unroll
      for (int i = 0; i < kPartsPerLane; ++i) weight = i * 32 == first ? weight_of[i] : weight;
      const int parts = min(32, p.num_splits - first);
      for (int j0 = 0; j0 < parts; j0 += kLoadsInFlight) {
        // The loads first, unconditionally (past the last part, the last part again), so that
        // they are all in flight at once: one L2 round trip per kLoadsInFlight parts.
        float4 o[kLoadsInFlight];
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
          const int64_t part = first + min(j0 + u, parts - 1);
          o[u] = *reinterpret_cast<const float4*>(column + part * rows * p.head_dim_v);
        }
#pragma unroll
        for (int u = 0; u < kLoadsInFlight; ++u) {
          const float w = __shfl_sync(0xffffffffu, weight, (j0 + u) % 32);
          if (j0 + u < parts && w != 0.f) {
            acc.x = fmaf(w, o[u].x, acc.x);
            acc.y = fmaf(w, o[u].y, acc.y);
            acc.z = fmaf(w, o[u].z, acc.z);
            acc.w = fmaf(w, o[u].w, acc.w);
          }
        }
      }
    }
    if (mine) store4(out_row + c, acc);
  }
  if (lane == 0) lse_out[q_row] = lse;
}

}  // namespace

// The combine kernel is the main kernel's programmatic dependent (dependent_launch.cuh).
cudaError_t launch_combine(ElementKind element, const FwdParams& params, cudaStream_t stream) {
  const int64_t rows = int64_t{params.batch} * params.heads_q * params.nq;
  const dim3 grid(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  const dim3 block(32 * kRowsPerBlock);
  return element == ElementKind::kBFloat16
             ? launch_dependent(fwd_combine<__nv_bfloat16>, grid, block, params, stream)
             : launch_dependent(fwd_combine<__half>, grid, block, params, stream);
}

}  // namespace cm::sm90
