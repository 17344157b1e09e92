// The element-wise kernels around the sm90 backward main kernel (bwd_kernel.cuh):
//   bwd_preprocess   per query row: dsum = rowsum(dO * O) - dLSE, lse_log2 = LSE * log2(e)
//                    with +inf for rows that see no key (LSE = -inf) and for the padding rows
//                    of each query tile (bwd_params.h); zeroes, per 64 rows, the deterministic
//                    semaphore, per kv slice the zeroed count, and the row's dq_accum if its kv
//                    slice is one of the first BwdShape::slice_group (the main kernel zeroes the
//                    others, bwd_zeroing.cuh).
//   bwd_postprocess  dQ = scale * dq_accum in the element type, for the query tiles' rows
//                    (not their padding) and the first head_dim columns, except those of a
//                    packed sequence that does not fit its tensors (packed_rows.cu writes
//                    them).
//   bwd_kv_postprocess  with head splits only: dK and dV = the sums of the splits' dkv_parts in
//                    split order, in the element type, for the key tiles' rows, likewise (dV's
//                    first head_dim_v columns).
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

// Row `row` of sequence b in a strided tensor, or a packed one (offsets not null), at head h.
template <class Element>
__device__ __forceinline__ Element* row_ptr(void* base, const int32_t* offsets, int64_t stride_b,
                                            int64_t stride_s, int64_t stride_h, int b, int row,
                                            int h) {
  const bool packed = offsets != nullptr;
  const int64_t batch = packed ? 0 : b;
  const int64_t srow = (packed ? offsets[b] : 0) + int64_t{row};
  return static_cast<Element*>(base) + batch * stride_b + srow * stride_s + h * stride_h;
}

// The rows the kernels walk: the query rows (per query head) or the key rows (per kv head), each
// tile's padded to kBwdTile in the workspace.
struct RowAxis {
  const int32_t* starts;  // the tile-start table
  int heads, rows_padded;
};

__device__ __forceinline__ RowAxis query_rows(const BwdShape& s) {
  return {s.q_starts, s.heads_q, s.rows_padded};
}

__device__ __forceinline__ RowAxis key_rows(const BwdShape& s) {
  return {s.k_starts, s.heads_kv, s.k_rows_padded};
}

// A thread's row: workspace row `padded` of head h of sequence b, at index `at` of the per-row
// workspace arrays, which is row `row` of the sequence when `valid` (else a padding row of its
// tile); the thread handles the part `lane` of kRowThreads. `fits`: sequence_fits
// (problem_shape.h); else no kernel here touches the sequence's rows.
struct RowSlot {
  int padded, row, lane, h, b;
  bool valid, fits;
  int64_t at;
};

__device__ __forceinline__ RowSlot row_slot(const BwdShape& s, const RowAxis& axis) {
  RowSlot t;
  t.padded =
      static_cast<int>(blockIdx.x) * kPrepostRows + static_cast<int>(threadIdx.x) / kRowThreads;
  const desc::TileSpan tile = desc::tile_span(axis.starts, t.padded / kBwdTile);
  t.row = tile.begin + t.padded % kBwdTile;
  t.valid = t.row < tile.end;
  t.lane = static_cast<int>(threadIdx.x) % kRowThreads;
  t.h = static_cast<int>(blockIdx.y);
  t.b = static_cast<int>(blockIdx.z);
  t.fits = sequence_fits(s, t.b);
  t.at = (int64_t{t.b} * axis.heads + t.h) * axis.rows_padded + t.padded;
  return t;
}

// Row `row` of sequence b of a gradient, at head h.
template <class Element>
__device__ __forceinline__ Element* row_ptr(const GradientRef& t, const int32_t* offsets, int b,
                                            int row, int h) {
  return row_ptr<Element>(t.data, offsets, t.stride_b, t.stride_s, t.stride_h, b, row, h);
}

// Stores scale * values at dst in the element type.
template <class Element>
__device__ __forceinline__ void store_scaled(Element* dst, const float (&values)[8], float scale) {
  Vec8<Element> out;
#pragma unroll
  for (int j = 0; j < 8; ++j) out.x[j] = static_cast<Element>(values[j] * scale);
  *reinterpret_cast<Vec8<Element>*>(dst) = out;
}

// Grid: (rows_padded / kPrepostRows, heads_q, batch), kPrepostThreads threads. Every thread of
// the grid maps to a row below rows_padded (rows_padded is a multiple of kPrepostRows), which
// the row-group shuffles rely on.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kPrepostThreads)
    bwd_preprocess(const __grid_constant__ BwdPrepParams p) {
  const BwdShape& s = p.shape;
  const auto [padded, row, lane, h, b, in_tile, fits, at] = row_slot(s, query_rows(s));
  const bool valid = in_tile && fits;  // a sequence that does not fit is read as padding
  float acc = 0.f;
  if (valid) {
    const Element* o = row_ptr<Element>(const_cast<void*>(p.out), s.q_offsets, p.out_stride_b,
                                        p.out_stride_s, p.out_stride_h, b, row, h);
    const Element* d = row_ptr<Element>(const_cast<void*>(p.dout), s.q_offsets, p.dout_stride_b,
                                        p.dout_stride_s, p.dout_stride_h, b, row, h);
    for (int c = 8 * lane; c < s.head_dim_v; c += 8 * kRowThreads) {
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
  if (slice >= s.slice_group) return;
  const int row_floats = dq_row_floats(kHeadDim, s.head_dim);
  float4* dq = reinterpret_cast<float4*>(p.ws.dq_accum + at * row_floats);
  for (int c = lane; c < row_floats / 4; c += kRowThreads) dq[c] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// Grid: (rows_padded / kPrepostRows, heads_q, batch), kPrepostThreads threads.
template <class Element, int kHeadDim>
__global__ void __launch_bounds__(kPrepostThreads)
    bwd_postprocess(const __grid_constant__ BwdPostParams p) {
  const BwdShape& s = p.shape;
  const auto [padded, row, lane, h, b, valid, fits, at] = row_slot(s, query_rows(s));
  if (!valid || !fits) return;
  const float* acc = p.dq_accum + at * dq_row_floats(kHeadDim, s.head_dim);
  Element* dq = row_ptr<Element>(p.dq, s.q_offsets, b, row, h);
  // All of the thread's loads are issued before its first store (the store could alias them
  // as far as the compiler knows), with the streaming hint: the accumulator is read once.
  constexpr int kChunks = kHeadDim / 8 / kRowThreads;
  const auto in_head_dim = [&](int i) { return 8 * (lane + i * kRowThreads) < s.head_dim; };
  float values[kChunks][8];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (!in_head_dim(i)) continue;
    const float4* src =
        reinterpret_cast<const float4*>(acc + dq_chunk_swizzle(padded, lane + i * kRowThreads) * 8);
    const float4 lo = __ldcs(src), hi = __ldcs(src + 1);
    const float chunk[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) values[i][j] = chunk[j];
  }
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (in_head_dim(i)) store_scaled(dq + (lane + i * kRowThreads) * 8, values[i], p.scale);
  }
}

// Grid: (k_rows_padded / kPrepostRows, heads_kv, batch), kPrepostThreads threads. Launched only
// with head splits; every split wrote every row of its items (bwd_consumer.cuh).
template <class Element, int kHeadDim, int kHeadDimV>
__global__ void __launch_bounds__(kPrepostThreads)
    bwd_kv_postprocess(const __grid_constant__ BwdKvPostParams p) {
  const BwdShape& s = p.shape;
  const RowSlot t = row_slot(s, key_rows(s));
  if (!t.valid || !t.fits) return;
  constexpr int kRowFloats = kHeadDim + kHeadDimV;
  const int64_t row = dkv_part_row<kRowFloats>(s, 0, kv_slice(s, t.b, t.h), t.padded);
  const int64_t split_floats = dkv_part_row<kRowFloats>(s, 1, 0, 0);
  for (int tensor = 0; tensor < 2; ++tensor) {  // dK, then dV
    Element* out = row_ptr<Element>(tensor == 0 ? p.dk : p.dv, s.k_offsets, t.b, t.row, t.h);
    const int columns = tensor == 0 ? s.head_dim : s.head_dim_v;
    const float* first = p.dkv_parts + row + (tensor == 0 ? 0 : kHeadDim);
#pragma unroll
    for (int i = 0; i < (kHeadDim > kHeadDimV ? kHeadDim : kHeadDimV) / 8 / kRowThreads; ++i) {
      const int col = 8 * (t.lane + i * kRowThreads);
      if (col >= columns) continue;
      float sum[8] = {};
      for (int split = 0; split < s.head_splits; ++split) {
        const float4* src = reinterpret_cast<const float4*>(first + split * split_floats + col);
        const float4 lo = __ldcs(src), hi = __ldcs(src + 1);
        const float chunk[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) sum[j] += chunk[j];
      }
      store_scaled(out + col, sum, 1.f);
    }
  }
}

}  // namespace cm::sm90
