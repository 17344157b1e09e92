// The parameters of the sm90 forward kernel: plain data shared by the host launcher
// (launch.cu) and the kernel (fwd_kernel.cuh). Tensors are addressed by element strides; the
// head dimension is contiguous. Q, K and V themselves are read through TMA tensor maps, which
// travel as separate kernel parameters.
#pragma once

#include "fwd_packing.h"
#include "fwd_splits.h"
#include "problem_shape.h"

#include <stdint.h>

namespace cm::sm90 {

struct FwdParams : ProblemShape {
  const void* descriptor;  // device copy of the descriptor blob
  int32_t total_items;     // num_q_tiles * batch * heads_q / heads_per_item * num_splits
  float scale_log2;        // log2(e) * the logits' factor: scale, or softcap with a cap
  float softcap_scale;     // scale / softcap: a capped logit is softcap * tanh(S softcap_scale);
                           // 0 for no cap
  // Attention sinks (cm::cuda::Problem::sinks): per query head, a natural-log logit that joins
  // each row's sum as a key of value 0. Null for none. Added by the epilogue, or by fwd_combine
  // with `combine`.
  const float* sinks;
  // ALiBi (cm::cuda::Problem::alibi_slopes): per query head, the slope of the bias
  // -slope |i + nk - nq - j| of logit (i, j). Null for none. score_units: a logit's unit in the
  // scores (host::LogitFactors), which turns a slope into the scores' units.
  const float* alibi_slopes;
  float score_units;

  void* out;  // same element type as Q
  int64_t out_stride_b, out_stride_s, out_stride_h;
  float* lse;  // natural log; row stride 1
  int64_t lse_stride_b, lse_stride_h;

  int32_t* work_counter;  // zeroed before each launch with more items than CTAs (fwd_loader.cuh)

  // Packed query heads (fwd_packing.h): a work item holds rows_per_head rows of each of
  // heads_per_item query heads (1 and 128 unpacked); rows_per_head is a power of two.
  int32_t heads_per_item, rows_per_head;

  // Split keys (fwd_splits.h): each query tile's listed key tiles in num_splits parts, one work
  // item each. With `combine` (split keys or packed heads) the items write their O and LSE to
  // split_lse and split_out (the workspace's layout, fwd_workspace) and fwd_combine writes out
  // and lse; else the epilogue writes them.
  int32_t num_splits;
  bool combine;
  float* split_lse;
  float* split_out;

  // Paged K and V (cm::cuda::PagedKV): key row j of sequence b is row j % page_size of page
  // page_table[b * page_table_stride + j / page_size], the batch coordinate of the K/V maps.
  // Null for the other layouts.
  const int32_t* page_table;
  int64_t page_table_stride;
  int32_t page_size;
  // Whether the guard lanes (fwd_guard.cuh) zero the V rows that no row of a masked tile sees
  // before P V, where 0 * NaN would be NaN: with packed or paged K/V, whose rows past a
  // sequence's keys and unwritten cache slots can hold anything.
  bool zero_unseen;
};

}  // namespace cm::sm90
