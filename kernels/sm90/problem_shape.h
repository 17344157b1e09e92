// The problem's shape as the sm90 kernels see it: the part of their parameters that the forward
// (FwdParams) and the backward kernels (BwdShape) share, filled by host::problem_shape.
#pragma once

#include <compilemask/descriptor.h>

#include <stdint.h>

namespace cm::sm90 {

inline constexpr int kKernelTile = 128;  // the descriptor tiles the sm90 kernels read: 128 x 128

struct ProblemShape {
  int32_t batch, heads_q, heads_kv;
  int32_t nq, nk;
  // D, the columns of Q and K (and dQ, dK), and Dv, those of V and O (and dO, dV). The kernel
  // instantiated for kHeadDim >= both reads the columns past each tensor's own as zeros (TMA
  // fills them) and writes only a tensor's own.
  int32_t head_dim, head_dim_v;
  int32_t num_q_tiles, num_k_tiles;
  // Packed layout: sequence b starts at row q_offsets[b] (k_offsets[b]) of the [T, H, D]
  // tensors of total_q (total_k) rows, and the batch strides are unused. The offsets are null
  // for the strided layouts.
  const int32_t* q_offsets;
  const int32_t* k_offsets;
  int64_t total_q, total_k;
  // The descriptor's tile-start tables (device memory). The forward gets null for an axis whose
  // tiles are the uniform ones (tile t is [128 t, min(n, 128 t + 128))) and computes them
  // (query_tile, key_tile); tiles restart only at block boundaries (descriptor.h). The
  // backward always gets the tables and loads the spans: query spans from q_starts
  // (desc::tile_span), key spans through the descriptor (desc::k_tile_span), as run 124 timed; the
  // branch on null in its step loop cost causal's and sliding's backward 1.5-2.3% against the
  // loads (run 126).
  const int32_t* q_starts;
  const int32_t* k_starts;
};

// The head dims of a kernel instantiation: of Q and K (and dQ, dK), and of V and O (and dO,
// dV). Each pass picks its own (forward_kernel_dims, backward_kernel_dims); the kernels read the
// columns past a tensor's own as zeros and write only its own.
struct KernelDims {
  int head_dim, head_dim_v;
};

// Rows of query tile m.
CM_HD desc::TileSpan query_tile(const ProblemShape& s, int m) {
  if (s.q_starts != nullptr) return desc::tile_span(s.q_starts, m);
  const int begin = m * kKernelTile;
  return {begin, begin + kKernelTile < s.nq ? begin + kKernelTile : s.nq};
}

// Columns of key tile n.
CM_HD desc::TileSpan key_tile(const ProblemShape& s, int n) {
  if (s.k_starts != nullptr) return desc::tile_span(s.k_starts, n);
  const int begin = n * kKernelTile;
  return {begin, begin + kKernelTile < s.nk ? begin + kKernelTile : s.nk};
}

// Packed layout: whether sequence b's rows lie in their tensors, [q_offsets[b], + nq) in
// [0, total_q) and [k_offsets[b], + nk) in [0, total_k); always true for the strided layouts.
// The offsets are device data that the host does not read (that would cost a sync), so the
// kernels check them: a sequence that does not fit is not computed, its output rows that lie in
// the tensors get NaN (packed_rows.h), so that the bad offsets show in every result, and no
// kernel touches a row outside.
CM_HD bool sequence_fits(const ProblemShape& s, int b) {
  if (s.q_offsets == nullptr) return true;
  const int64_t q = s.q_offsets[b], k = s.k_offsets[b];
  return q >= 0 && q + s.nq <= s.total_q && k >= 0 && k + s.nk <= s.total_k;
}

// Both kernels take their work units (the forward's query tiles, the backward's key tiles) in
// groups of instances (the forward's (b, h), the backward's kv slices (b, hk)), one unit of each
// instance of the group in turn, each instance's units in their order; the last group may be
// short. In pairs (kPairedInstances), an instance's longest units start while the other
// instance's work is still left, and the last pair ends on short units from both, instead of the
// last instance's long units starting at the tail (hstu's forward: 4.3% of the SMs' time idle at
// the end). A group of all the instances starts every instance's longest units first, which a
// grid of a few waves wants (the backward's, bwd_head_splits.h). Unit `index` of `instances` x
// `units` is unit `rank` of `instance`.
inline constexpr int kPairedInstances = 2;  // the instances of a pair
struct GroupedUnit {
  int instance, rank;
};
CM_HD GroupedUnit grouped_unit(int index, int units, int instances, int group) {
  const int first = index / (group * units) * group;  // the group's first instance
  const int in_group = index - first * units;
  const int width = instances - first < group ? instances - first : group;
  return {first + in_group % width, in_group / width};
}

}  // namespace cm::sm90
