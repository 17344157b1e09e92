// What the backward main kernel's producer and consumers walk in the same order: the CTA's
// work item (a key tile of one kv head) and its steps (64 query rows of one query head). The
// cursors are host-callable too: tests/gpu/kernel_walk_test.cu checks them on the CPU.
#pragma once

#include "bwd_params.h"

#include <compilemask/descriptor.h>

namespace cm::sm90 {

// The key tile n of kv head hk of sequence b.
struct BwdItem {
  int b, hk, n;
};

// CTAs are dispatched in blockIdx order, x fastest (the launch sets the grid to match).
// Default: x is the rank of the key tile in the descriptor's longest-first order of the group's
// first head, y the kv head hk, z the sequence b. The CTAs running at once then share one or
// two (b, hk), so the dQ accumulator rows, Q and dO they all touch stay in L2 instead of
// streaming from DRAM (perf-notes). Deterministic: x is hk, y is b, z the key tile in
// ascending order. A key tile's ordered dQ adds wait for the lower key tiles of its head,
// which were all dispatched before it, and the CTAs running at once belong to different heads
// and so do not wait for each other.
__device__ inline BwdItem decode_bwd_item(const BwdMainParams& p, bool deterministic) {
  if (deterministic) {
    return {static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x),
            static_cast<int>(blockIdx.z)};
  }
  const int rank = static_cast<int>(blockIdx.x);
  const int hk = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int group = p.shape.heads_q / p.shape.heads_kv;
  const desc::Instance& inst = instance_for(p.descriptor, p.shape, b, hk * group);
  return {b, hk, desc::at<uint16_t>(p.descriptor, inst.bwd_order_offset)[rank]};
}

// One step of the main loop: rows [64 half, 64 half + 64) of query tile m of query head h;
// pattern is the tile's pattern, -1 for a full tile.
struct BwdStep {
  int h, m, half, pattern;
};

// The query tiles of one key tile's row in the transposed form: partial runs, then full runs.
class QueryTileCursor {
 public:
  QueryTileCursor() = default;
  __host__ __device__ QueryTileCursor(const void* blob, const desc::TileRow& row)
      : partial_(desc::partial_runs(blob, row)),
        full_(desc::full_runs(blob, row)),
        partial_count_(row.partial_count),
        full_count_(row.full_count) {}

  // Moves to the next query tile m with its pattern (-1 for a full tile); false at the end.
  __host__ __device__ bool next(int& m, int& pattern) {
    while (at_ == end_) {
      if (run_ < partial_count_) {
        at_ = partial_[run_].first;
        end_ = at_ + partial_[run_].count;
        pattern_ = static_cast<int>(partial_[run_].pattern);
      } else if (run_ < partial_count_ + full_count_) {
        at_ = full_[run_ - partial_count_].first;
        end_ = at_ + full_[run_ - partial_count_].count;
        pattern_ = -1;
      } else {
        return false;
      }
      ++run_;
    }
    m = at_++;
    pattern = pattern_;
    return true;
  }

 private:
  const desc::PartialRun* partial_ = nullptr;
  const desc::FullRun* full_ = nullptr;
  int partial_count_ = 0, full_count_ = 0;
  int run_ = 0, at_ = 0, end_ = 0, pattern_ = -1;
};

// Walks the steps of an item in the one order producer and consumers share: query heads of the
// kv group, then the query tiles of the key tile's row in the transposed form, then the two
// 64-row halves of each (a second half starting at or past nq is skipped).
class StepCursor {
 public:
  __host__ __device__ StepCursor(const BwdMainParams& p, const BwdItem& item)
      : p_(p), item_(item), group_(p.shape.heads_q / p.shape.heads_kv) {}

  __host__ __device__ bool next(BwdStep& step) {
    for (;;) {
      if (g_ >= 0 && step_.half == 0 && step_.m >= 0 &&
          step_.m * kBwdTile + kBwdStepRows < p_.shape.nq) {
        step_.half = 1;
        step = step_;
        return true;
      }
      if (g_ >= 0 && tiles_.next(step_.m, step_.pattern)) {
        step_.half = 0;  // row m * 128 < nq: query tile m exists
        step = step_;
        return true;
      }
      if (++g_ == group_) return false;
      step_.h = item_.hk * group_ + g_;
      step_.m = -1;
      const desc::Instance& inst = instance_for(p_.descriptor, p_.shape, item_.b, step_.h);
      tiles_ = QueryTileCursor(p_.descriptor, desc::k_tile(p_.descriptor, inst, item_.n));
    }
  }

 private:
  const BwdMainParams& p_;
  BwdItem item_;
  int group_;
  int g_ = -1;
  BwdStep step_{0, -1, 0, -1};
  QueryTileCursor tiles_;
};

}  // namespace cm::sm90
