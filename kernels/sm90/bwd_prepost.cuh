// The element-wise kernels around the sm90 backward main kernel (bwd_kernel.cuh):
//   bwd_preprocess   per query row: dsum = rowsum(dO * O) - dLSE, lse_log2 = LSE * log2(e)
//                    with +inf for rows that see no key (LSE = -inf) and for the padding rows
//                    of each query tile (bwd_params.h); zeroes, per 64 rows, the deterministic
//                    semaphore, per kv slice the zeroed count, and the row's dq_accum if its kv
//                    slice is one of the first BwdPrepParams::zeroed_slices (the main kernel zeroes
//                    the others, bwd_zeroing.cuh).
//   bwd_postprocess  dQ = scale * dq_accum in the element type, for the query tiles' rows
//                    (not their padding) and the first head_dim columns, except those of a
//                    packed sequence that does not fit its tensors (packed_rows.cu writes
//                    them).
// Eight threads share a row and read 16-byte vectors; a block of 128 threads covers 16 rows.
#pragma once

#include "bwd_params.h"

#include <stdint.h>

namespace cm::sm90 {

inline constexpr int kRowThreads = 8;
inline constexpr int kPrepostThreads = 128;
inline constexpr int kPrepostRows = kPrepostThreads / kRowThreads;

template <class Element>
struct alignas(16) Vec8 {
  Element x[8];
};

// Row `row` of sequence b in a strided or packed tensor, at head h.
template <class Element>
__device__ __forceinline__ Element* row_ptr(void* base, const BwdShape& s, int64_t stride_b,
                                            int64_t stride_s, int64_t stride_h, int b, int row,
                                            int h) {
  const bool packed = s.q_offsets != nullptr;
  const int64_t batch = packed ? 0 : b;
  const int64_t srow = (packed ? s.q_offsets[b] : 0) + int64_t{row};
  return static_cast<Element*>(base) + batch * stride_b + srow * stride_s + h * stride_h;
}

// A thread's row of both kernels: workspace row `padded` of head h of sequence b, at index
// `at` of the per-row workspace arrays, which is query row `row` of the sequence when `valid`
// (else a padding row of its query tile); the thread handles the part `lane` of kRowThreads.
// `fits`: sequence_fits (problem_shape.h); else neither kernel touches the sequence's rows.
struct RowSlot {
  int padded, row, lane, h, b;
  bool valid, fits;
  int64_t at;
};

__device__ __forceinline__ RowSlot row_slot(const BwdShape& s) {
  RowSlot t;
  t.padded =
      static_cast<int>(blockIdx.x) * kPrepostRows + static_cast<int>(threadIdx.x) / kRowThreads;
  const desc::TileSpan tile = desc::tile_span(s.q_starts, t.padded / kBwdTile);
  t.row = tile.begin + t.padded % kBwdTile;
  t.valid = t.row < tile.end;
  t.lane = static_cast<int>(threadIdx.x) % kRowThreads;
  t.h = static_cast<int>(blockIdx.y);
  t.b = static_cast<int>(blockIdx.z);
  t.fits = sequence_fits(s, t.b);
  t.at = (int64_t{t.b} * s.heads_q + t.h) * s.rows_padded + t.padded;
  return t;
}

// Grid: (rows_padded / kPrepostRows, heads_q, batch), kPrepostThreads threads. Every thread of
// the grid maps to a row below rows_padded (rows_padded is a multiple of kPrepostRows), which
// the row-group shuffles rely on.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kPrepostThreads)
    bwd_preprocess(const __grid_constant__ BwdPrepParams p) {
  const BwdShape& s = p.shape;
  const auto [padded, row, lane, h, b, in_tile, fits, at] = row_slot(s);
  const bool valid = in_tile && fits;  // a sequence that does not fit is read as padding
  float acc = 0.f;
  if (valid) {
    const Element* o = row_ptr<Element>(const_cast<void*>(p.out), s, p.out_stride_b, p.out_stride_s,
                                        p.out_stride_h, b, row, h);
    const Element* d = row_ptr<Element>(const_cast<void*>(p.dout), s, p.dout_stride_b,
                                        p.dout_stride_s, p.dout_stride_h, b, row, h);
    for (int c = 8 * lane; c < s.head_dim; c += 8 * kRowThreads) {
      const Vec8<Element> ov = *reinterpret_cast<const Vec8<Element>*>(o + c);
      const Vec8<Element> dv = *reinterpret_cast<const Vec8<Element>*>(d + c);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += static_cast<float>(ov.x[j]) * static_cast<float>(dv.x[j]);
    }
  }
#pragma unroll
  for (int offset = 1; offset < kRowThreads; offset *= 2) {
    acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  }
  if (lane == 0) {
    const bool packed = s.q_offsets != nullptr;
    const int64_t lse_row = (packed ? s.q_offsets[b] : 0) + int64_t{row};
    const int64_t lse_at = (packed ? 0 : b) * p.lse_stride_b + h * p.lse_stride_h + lse_row;
    const float lse = valid ? p.lse[lse_at] : -__builtin_huge_valf();
    const bool sees_keys = lse != -__builtin_huge_valf();
    p.ws.lse_log2[at] = sees_keys ? lse * 1.4426950408889634f : __builtin_huge_valf();
    // d lse / d s_j = P_j: the LSE's gradient adds dLSE * P_j to dS_j = P_j (dP_j - dsum).
    const float dlse = valid && p.dlse != nullptr ? p.dlse[lse_at] : 0.f;
    p.ws.dsum[at] = valid ? acc - dlse : 0.f;
    if (padded % kBwdStepRows == 0)
      p.ws.semaphores[at / kBwdStepRows] = 0;  // rows_padded is a multiple of kBwdStepRows
  }
  const int group = s.heads_q / s.heads_kv;
  const int slice = kv_slice(s, b, h / group);
  if (padded == 0 && lane == 0 && h % group == 0) p.ws.zeroed[slice] = 0;
  if (slice >= p.zeroed_slices) return;
  float4* dq = reinterpret_cast<float4*>(p.ws.dq_accum + at * kHeadDim);
  for (int c = lane; c < kHeadDim / 4; c += kRowThreads) dq[c] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// Grid: (rows_padded / kPrepostRows, heads_q, batch), kPrepostThreads threads.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kPrepostThreads)
    bwd_postprocess(const __grid_constant__ BwdPostParams p) {
  const BwdShape& s = p.shape;
  const auto [padded, row, lane, h, b, valid, fits, at] = row_slot(s);
  if (!valid || !fits) return;
  const float* acc = p.dq_accum + at * kHeadDim;
  Element* dq = row_ptr<Element>(p.dq, s, p.dq_stride_b, p.dq_stride_s, p.dq_stride_h, b, row, h);
  // All of the thread's loads are issued before its first store (the store could alias them
  // as far as the compiler knows), with the streaming hint: the accumulator is read once.
  constexpr int kChunks = kHeadDim / 8 / kRowThreads;
  const auto in_head_dim = [&](int i) { return 8 * (lane + i * kRowThreads) < s.head_dim; };
  float4 values[kChunks][2];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (!in_head_dim(i)) continue;
    const float4* src =
        reinterpret_cast<const float4*>(acc + dq_chunk_swizzle(padded, lane + i * kRowThreads) * 8);
    values[i][0] = __ldcs(src);
    values[i][1] = __ldcs(src + 1);
  }
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (!in_head_dim(i)) continue;
    const float4 lo = values[i][0], hi = values[i][1];
    const float chunk[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    Vec8<Element> out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.x[j] = static_cast<Element>(chunk[j] * p.scale);
    *reinterpret_cast<Vec8<Element>*>(dq + (lane + i * kRowThreads) * 8) = out;
  }
}

}  // namespace cm::sm90
