// What the backward main kernel's producer and consumers walk in the same order: the CTA's
// work item (a key tile of one kv head) and its steps (64 query rows of one query head). The
// cursors are host-callable too: tests/gpu/kernel_walk_test.cu checks them on the CPU.
#pragma once

#include "bwd_params.h"

#include <compilemask/descriptor.h>

namespace cm::sm90 {

// Keys [part * keys, (part + 1) * keys) of key tile n of kv head hk of sequence b, where keys
// is the kernel's keys per CTA (BwdConfig::kBlockN; part is 0 when a CTA takes a whole tile).
struct BwdItem {
  int b, hk, n, part;
  int rank;  // default mode: of the item in its kv slice's order (the zeroing's chunk)
};

// CTAs are dispatched in blockIdx order, x fastest (the launch sets the grid to match), and
// each key tile is `parts` items, its parts in turn.
// Default: the linear block index is an item of a kv slice (b, hk) in paired order
// (paired_unit, problem_shape.h), each slice's key tiles in the descriptor's longest-first
// order of the group's first head. The CTAs running at once then share two or three (b, hk),
// so the dQ accumulator rows, Q and dO they all touch stay in L2 instead of streaming from
// DRAM (perf-notes). Deterministic: x is hk, y is b, z the item in ascending key order. An
// item's ordered dQ adds wait for the lower items of its head, which were all dispatched
// before it, and the CTAs running at once belong to different heads and so do not wait for
// each other.
__device__ inline BwdItem decode_bwd_item(const BwdMainParams& p, bool deterministic, int parts) {
  if (deterministic) {
    const int z = static_cast<int>(blockIdx.z);
    return {static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x), z / parts, z % parts, z};
  }
  const BwdShape& s = p.shape;
  const int index =
      static_cast<int>(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
  const PairedUnit unit = paired_unit(index, s.num_k_tiles * parts, s.batch * s.heads_kv);
  const int b = unit.instance / s.heads_kv;  // the kv slice, kv_slice (bwd_params.h)
  const int hk = unit.instance - b * s.heads_kv;
  const desc::Instance& inst = instance_for(p.descriptor, s, b, hk * (s.heads_q / s.heads_kv));
  return {b, hk, desc::at<uint16_t>(p.descriptor, inst.bwd_order_offset)[unit.rank / parts],
          unit.rank % parts, unit.rank};
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

// The 64-row halves of query tile m, masked by `pattern` (-1: full), that a backward step
// walks, as bits (bit h: half h): those that start inside the tile, less those the tile's
// pattern marks empty (Pattern::empty_halves), whose steps would add nothing.
__host__ __device__ inline unsigned walked_halves(const BwdMainParams& p, int m, int pattern) {
  unsigned halves = desc::tile_span(p.shape.q_starts, m).size() > kBwdStepRows ? 3u : 1u;
  if (pattern >= 0) {
    halves &= ~unsigned{desc::pattern(p.descriptor, static_cast<uint32_t>(pattern)).empty_halves};
  }
  return halves;
}

// Walks the steps of an item in the one order producer and consumers share: query heads of the
// kv group, then the query tiles of the key tile's row in the transposed form, then the
// walked halves of each (walked_halves).
class StepCursor {
 public:
  __host__ __device__ StepCursor(const BwdMainParams& p, const BwdItem& item)
      : p_(p), item_(item), group_(p.shape.heads_q / p.shape.heads_kv) {}

  __host__ __device__ bool next(BwdStep& step) {
    for (;;) {
      if (halves_ != 0) {  // the current query tile's halves still to walk, lowest first
        step_.half = (halves_ & 1u) != 0 ? 0 : 1;
        halves_ &= halves_ - 1;
        step = step_;
        return true;
      }
      if (g_ >= 0 && tiles_.next(step_.m, step_.pattern)) {
        halves_ = walked_halves(p_, step_.m, step_.pattern);
        continue;
      }
      if (++g_ == group_) return false;
      step_.h = item_.hk * group_ + g_;
      const desc::Instance& inst = instance_for(p_.descriptor, p_.shape, item_.b, step_.h);
      tiles_ = QueryTileCursor(p_.descriptor, desc::k_tile(p_.descriptor, inst, item_.n));
    }
  }

 private:
  const BwdMainParams& p_;
  BwdItem item_;
  int group_;
  int g_ = -1;
  unsigned halves_ = 0;
  BwdStep step_{0, -1, 0, -1};
  QueryTileCursor tiles_;
};

// Deterministic mode: the number of key tiles below item.n whose items add to the dQ of half
// `half` of query tile m of query head h. Every part of a key tile walks the same steps, so
// with `parts` items per key tile, parts * dq_rank + item.part dQ adds come before this item's.
// Counts what StepCursor walks: every listed tile of a full run, and the tiles of a partial
// run unless its pattern marks the half empty.
__host__ __device__ inline int dq_rank(const BwdMainParams& p, const BwdItem& item, int h, int m,
                                       int half) {
  const desc::Instance& inst = instance_for(p.descriptor, p.shape, item.b, h);
  const desc::TileRow& row = desc::q_tile(p.descriptor, inst, m);
  const desc::FullRun* full = desc::full_runs(p.descriptor, row);
  const desc::PartialRun* partial = desc::partial_runs(p.descriptor, row);
  const auto below = [&](int first, int count) {
    const int n = item.n - first;
    return n <= 0 ? 0 : (n < count ? n : count);
  };
  int rank = 0;
  for (int i = 0; i < row.full_count; ++i) rank += below(full[i].first, full[i].count);
  for (int i = 0; i < row.partial_count; ++i) {
    if ((walked_halves(p, m, static_cast<int>(partial[i].pattern)) >> half) & 1u) {
      rank += below(partial[i].first, partial[i].count);
    }
  }
  return rank;
}

}  // namespace cm::sm90
