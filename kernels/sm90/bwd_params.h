// The parameters of the sm90 backward kernels: plain data shared by the host launcher
// (bwd_launch.cu) and the kernels (bwd_kernel.cuh, bwd_prepost.cuh). Tensors are addressed by
// element strides with the head dimension contiguous; the main kernel reads Q, K, V and dO
// through TMA tensor maps, which travel as separate kernel parameters.
//
// Workspace (fp32 unless noted), per (b, query head) "bh = b * heads_q + h", with the query
// rows of each query tile padded to 128 (BwdShape), rows_padded = num_q_tiles * 128:
//   lse_log2[bh][rows_padded]   LSE * log2(e); +inf for padding rows and rows that see no key,
//                               so that P = exp2(S * scale_log2 - lse_log2) is exactly 0 there
//   dsum[bh][rows_padded]       rowsum(dO * O) - dLSE; 0 for padding rows
//   dq_accum[bh][rows_padded][dq_row_floats]  dQ / scale accumulated over key tiles, rows of
//                               dq_row_floats(kernel head dim, ProblemShape::head_dim) floats
//                               (below; columns past head_dim stay 0); inside each row the
//                               8-float chunks are permuted (dq_chunk_swizzle) so that the kernel
//                               stages it in shared memory without bank conflicts
//   semaphores (int32)[bh][rows_padded / 64]  deterministic mode: dQ adds done per 64 rows
//   zeroed (int32)[b * heads_kv + hk]  default mode: the main kernel's CTAs that have zeroed
//                               their share of the kv slice's dq_accum (bwd_zeroing.cuh)
//   dkv_parts[split][kv slice][k_rows_padded][kHeadDim + kHeadDimV]  only with head_splits > 1
//                               (else null): split `split`'s dK (scaled) and dV of each key row,
//                               its key tile's rows padded to 128 as the query rows are; the kv
//                               postprocess sums the splits in order
#pragma once

#include "problem_shape.h"

#include <stdint.h>

namespace cm::sm90 {

inline constexpr int kBwdTile = kKernelTile;  // descriptor tile_m and tile_n
inline constexpr int kBwdStepRows = 64;       // query rows per main-loop step (half a query tile)

// Column chunk (8 floats) where dq_accum stores logical column chunk `chunk` of row `row`: the
// permutation stays inside each group of 8 chunks (64 floats).
__host__ __device__ __forceinline__ int dq_chunk_swizzle(int row, int chunk) {
  return chunk ^ (row & 7);
}

// Floats per dq_accum row for the kernel whose Q has kernel_head_dim columns and a problem whose
// Q has head_dim: above 128 (the design whose two CTAs per key tile each add every step's dQ,
// bwd_config.cuh), head_dim rounded up to whole 64-float swizzle groups, so that the columns the
// kernel pads with zeros are neither added nor zeroed (a quarter of each add for MLA's 192);
// else the kernel's head dim, which the smaller kernels' consumers take as a constant.
__host__ __device__ constexpr int dq_row_floats(int kernel_head_dim, int head_dim) {
  return kernel_head_dim > 128 ? (head_dim + 63) / 64 * 64 : kernel_head_dim;
}

struct BwdWorkspace {
  float* lse_log2;
  float* dsum;
  float* dq_accum;
  int32_t* semaphores;
  int32_t* zeroed;
  float* dkv_parts;
};

// Shared by the three kernels.
// Workspace row m * kBwdTile + r is row desc::tile_span(q_starts, m).begin + r of the sequence
// (problem_shape.h), for r below the tile's size; the tile's other rows are padding.
struct BwdShape : ProblemShape {
  int32_t rows_padded;    // num_q_tiles * kBwdTile
  int32_t k_rows_padded;  // num_k_tiles * kBwdTile
  // The main kernel's CTAs per key tile and kv slice, each for a near-equal share of the kv
  // group's query heads (split_range, work_splits.h): more CTAs when the key tiles alone make
  // few waves over the SMs (bwd_head_splits.h). With more than one, each writes its sums to
  // ws.dkv_parts and the kv postprocess adds them up in split order (so deterministic mode stays
  // bitwise reproducible).
  int32_t head_splits;
  // The kv slices of a dispatch group (bwd_item_at, grouped_unit): kPairedInstances, or all of
  // them for a grid of a few waves (bwd_head_splits.h) and always in deterministic mode. The
  // preprocess zeroes the dq_accum of the first group, and the default mode's CTAs zero each
  // later group's from the group before (bwd_zeroing.cuh).
  int32_t slice_group;
};

// The kv slice of sequence b and kv head hk: its number in the main kernel's dispatch order
// (bwd_work.cuh). Its dq_accum rows, those of the kv group's query heads, are contiguous.
__host__ __device__ inline int kv_slice(const BwdShape& s, int b, int hk) {
  return b * s.heads_kv + hk;
}

// The first float of padded key row `padded_key` (key tile n's rows start at n * kBwdTile) of kv
// slice `slice` in head split `split`'s dkv_parts, whose rows hold kRowFloats: the row's dK (the
// kernel's kHeadDim floats), then its dV.
template <int kRowFloats>
__host__ __device__ inline int64_t dkv_part_row(const BwdShape& s, int split, int slice,
                                                int padded_key) {
  return ((int64_t{split} * s.batch * s.heads_kv + slice) * s.k_rows_padded + padded_key) *
         kRowFloats;
}

// preprocess: dsum and lse_log2 from O, dO, the LSE and its gradient; zeroes the semaphores, the
// zeroed counts and the dq_accum of the first shape.slice_group kv slices (b * heads_kv + hk).
struct BwdPrepParams {
  BwdShape shape;
  const void* out;
  int64_t out_stride_b, out_stride_s, out_stride_h;
  const void* dout;
  int64_t dout_stride_b, dout_stride_s, dout_stride_h;
  const float* lse;  // natural log, row stride 1
  int64_t lse_stride_b, lse_stride_h;
  const float* dlse;  // the LSE's gradient in the LSE's layout, or null for none
  BwdWorkspace ws;
};

// sink gradient: dsinks[h] from the preprocess's lse_log2 and dsum rows (bwd_sink_gradient.cu).
struct SinkGradientParams {
  BwdShape shape;
  const float* lse_log2;
  const float* dsum;
  const float* sinks;  // [heads_q], natural log
  float* dsinks;       // [heads_q], written
};

// A gradient tensor the kernels write, addressed by element strides (stride_b 0 for the packed
// layout).
struct GradientRef {
  void* data;
  int64_t stride_b, stride_s, stride_h;
};

// main: dK, dV per key tile (summed over the query heads of its kv group), dQ into dq_accum.
struct BwdMainParams {
  BwdShape shape;
  const void* descriptor;     // device copy of the descriptor blob
  float scale;                // softmax scale (dK = scale * dSᵀ Q)
  float scale_log2;           // log2(e) * the logits' factor: scale, or softcap with a cap
  float softcap_scale;        // scale / softcap (FwdParams); 0 for no cap
  const float* alibi_slopes;  // per query head (FwdParams); null for none
  float score_units;          // FwdParams's
  GradientRef dk, dv;
  BwdWorkspace ws;
};

// postprocess: dQ = scale * dq_accum, converted to the element type.
struct BwdPostParams {
  BwdShape shape;
  float scale;
  GradientRef dq;
  const float* dq_accum;
};

// kv postprocess (head_splits > 1 only): dK and dV = the sums of the splits' dkv_parts, converted
// to the element type.
struct BwdKvPostParams {
  BwdShape shape;
  GradientRef dk, dv;
  const float* dkv_parts;
};

}  // namespace cm::sm90
