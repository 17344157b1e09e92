// What the backward main kernel's producer and consumers walk in the same order: the CTA's
// work item (a key tile of one kv head) and its steps (64 query rows of one query head). The
// cursors are host-callable too: tests/gpu/kernel_walk_test.cu checks them on the CPU.
#pragma once

#include "bwd_params.h"
#include "work_splits.h"

#include <compilemask/descriptor.h>

namespace cm::sm90 {

// Keys [part * keys, (part + 1) * keys) of key tile n of kv head hk of sequence b, where keys
// is the kernel's keys per CTA (BwdConfig::kBlockN; part is 0 when a CTA takes a whole tile),
// for the query heads of head split `split` (split_range over the kv group; 0 of 1 unless
// BwdShape::head_splits is more).
struct BwdItem {
  int b, hk, n, part, split;
  int rank;  // of the item in its kv slice's order (the zeroing's chunk)
};

// The items of one kv slice: key tiles x key parts x head splits.
__host__ __device__ inline int bwd_slice_items(const BwdShape& s, int parts, int head_splits) {
  return s.num_k_tiles * parts * head_splits;
}

// The head splits that the functions below take: BwdShape::head_splits, or in the kernels
// compiled without head splits the constant 1, so that the item's decode and the step walk fold
// their divisions away (a run-time count added about 280 instructions to each CTA's start).
template <bool kHeadSplits>
__host__ __device__ inline int head_splits_of(const BwdShape& s) {
  return kHeadSplits ? s.head_splits : 1;
}

// The main kernel's grid: one CTA per item, in the dispatch order bwd_item_at decodes.
__host__ __device__ inline dim3 bwd_main_grid(const BwdShape& s, int parts) {
  return dim3(static_cast<unsigned>(bwd_slice_items(s, parts, s.head_splits)),
              static_cast<unsigned>(s.heads_kv), static_cast<unsigned>(s.batch));
}

// The item of the CTA at `block` of bwd_main_grid `grid`, for `head_splits` (head_splits_of).
// CTAs are dispatched in block index order, x fastest: the linear block index is an item of a kv
// slice (b, hk) in groups of BwdShape::slice_group slices (grouped_unit, problem_shape.h), the
// group's slices in turn. Each key tile is `parts` x head_splits items, its parts in turn, each
// part's head splits in turn. In pairs, the CTAs running at once share two or three (b, hk), so
// the dQ accumulator rows, Q and dO they all touch stay in L2 instead of streaming from DRAM
// (perf-notes); a group of all the slices starts the grid's longest items first, for grids of a
// few waves. The default mode takes each slice's key tiles in the descriptor's longest-first
// order of the group's first head. Deterministic mode takes them in ascending order, in a group
// of all the slices (slice_group, bwd_head_splits.h): an item's ordered dQ adds wait for the
// lower key tiles' items of its query heads (dq_rank), which were all dispatched before it, so
// the wait always ends.
__host__ __device__ inline BwdItem bwd_item_at(const BwdMainParams& p, bool deterministic,
                                               int parts, int head_splits, dim3 block, dim3 grid) {
  const BwdShape& s = p.shape;
  const int index = static_cast<int>(block.x + grid.x * (block.y + grid.y * block.z));
  const GroupedUnit unit = grouped_unit(index, bwd_slice_items(s, parts, head_splits),
                                        s.batch * s.heads_kv, s.slice_group);
  const int b = unit.instance / s.heads_kv;  // the kv slice, kv_slice (bwd_params.h)
  const int hk = unit.instance - b * s.heads_kv;
  const int per_tile = parts * head_splits;
  const int in_tile = unit.rank % per_tile;
  int n = unit.rank / per_tile;
  if (!deterministic) {
    const desc::Instance& inst = desc::mask_of(p.descriptor, b, hk * (s.heads_q / s.heads_kv));
    n = desc::at<uint16_t>(p.descriptor, inst.bwd_order_offset)[n];
  }
  return {b, hk, n, in_tile / head_splits, in_tile % head_splits, unit.rank};
}

// This CTA's item.
__device__ inline BwdItem decode_bwd_item(const BwdMainParams& p, bool deterministic, int parts,
                                          int head_splits) {
  return bwd_item_at(p, deterministic, parts, head_splits, blockIdx, gridDim);
}

// One step of the main loop: rows [64 half, 64 half + 64) of query tile m of query head h;
// pattern is the tile's pattern, -1 for a full tile.
struct BwdStep {
  int h, m, half, pattern;
};

// The query tiles of one key tile's row in the transposed form. Ascending (the default mode):
// the partial runs, then the full runs, each run from its first tile up. Descending
// (deterministic mode): all the listed tiles from the highest down, the two lists merged (each is
// sorted by first, and their runs are disjoint, docs/descriptor.md).
template <bool kDescending>
class QueryTileCursor {
 public:
  QueryTileCursor() = default;
  __host__ __device__ QueryTileCursor(const void* blob, const desc::TileRow& row)
      : partial_(desc::partial_runs(blob, row)),
        full_(desc::full_runs(blob, row)),
        partial_count_(row.partial_count),
        full_count_(row.full_count),
        partial_next_(kDescending ? row.partial_count : 0),
        full_next_(kDescending ? row.full_count : 0) {}

  // Moves to the next query tile m with its pattern (-1 for a full tile); false at the end.
  __host__ __device__ bool next(int& m, int& pattern) {
    while (at_ == stop_) {
      if (!next_run()) return false;
    }
    m = kDescending ? --at_ : at_++;
    pattern = pattern_;
    return true;
  }

 private:
  // Takes the next run: [at_, stop_) ascending, or [stop_, at_) from at_ - 1 down.
  __host__ __device__ bool next_run() {
    bool take_partial;
    if constexpr (kDescending) {
      if (partial_next_ == 0 && full_next_ == 0) return false;
      take_partial = full_next_ == 0 || (partial_next_ > 0 && partial_[partial_next_ - 1].first >
                                                                  full_[full_next_ - 1].first);
    } else {
      if (partial_next_ == partial_count_ && full_next_ == full_count_) return false;
      take_partial = partial_next_ < partial_count_;
    }
    int first, count;
    if (take_partial) {
      const desc::PartialRun& run = partial_[kDescending ? --partial_next_ : partial_next_++];
      first = run.first;
      count = run.count;
      pattern_ = static_cast<int>(run.pattern);
    } else {
      const desc::FullRun& run = full_[kDescending ? --full_next_ : full_next_++];
      first = run.first;
      count = run.count;
      pattern_ = -1;
    }
    at_ = kDescending ? first + count : first;
    stop_ = kDescending ? first : first + count;
    return true;
  }

  const desc::PartialRun* partial_ = nullptr;
  const desc::FullRun* full_ = nullptr;
  int partial_count_ = 0, full_count_ = 0;
  int partial_next_ = 0, full_next_ = 0;  // descending: one past the next run of each list
  int at_ = 0, stop_ = 0, pattern_ = -1;
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

// Walks the steps of an item in the one order producer, consumers and dQ writer share: the
// item's query heads of the kv group (its head split's), then the query tiles of the key tile's
// row in the transposed form (QueryTileCursor<kDescending>), then the walked halves of each
// (walked_halves), lowest first. Deterministic mode walks the query tiles descending: its adds to
// a 64-row block go in ascending key tile order (dq_rank), and where a lower key tile also sees
// lower query tiles (causal, documents, windows), an ascending walk reaches each shared block
// later in the lower tile's item than in the next one's, so that every link of the order waited
// for those extra steps too; descending, the lower tile's item is at each shared block as early
// in its walk or earlier.
template <bool kDescending>
class StepCursor {
 public:
  __host__ __device__ StepCursor(const BwdMainParams& p, const BwdItem& item, int head_splits)
      : p_(p), b_(item.b), n_(item.n) {
    const int group = p.shape.heads_q / p.shape.heads_kv;
    const TileRange heads = split_range(group, item.split, head_splits);
    step_.h = item.hk * group + heads.begin - 1;  // the head before the item's first
    end_ = item.hk * group + heads.begin + heads.count;
  }

  __host__ __device__ bool next(BwdStep& step) {
    for (;;) {
      if (halves_ != 0) {  // the current query tile's halves still to walk, lowest first
        step_.half = (halves_ & 1u) != 0 ? 0 : 1;
        halves_ &= halves_ - 1;
        step = step_;
        return true;
      }
      if (tiles_.next(step_.m, step_.pattern)) {  // none before the first head's row
        halves_ = walked_halves(p_, step_.m, step_.pattern);
        continue;
      }
      if (++step_.h == end_) return false;
      const desc::Instance& inst = desc::mask_of(p_.descriptor, b_, step_.h);
      tiles_ = QueryTileCursor<kDescending>(p_.descriptor, desc::k_tile(p_.descriptor, inst, n_));
    }
  }

 private:
  const BwdMainParams& p_;
  int b_, n_;
  int end_;  // one past the item's last query head
  unsigned halves_ = 0;
  BwdStep step_{0, -1, 0, -1};
  QueryTileCursor<kDescending> tiles_;
};

// The first of step's kBwdStepRows rows among the (b, query head) rows of the workspace's dQ
// sections, rows_padded per head: dq_accum holds it at this row times dq_row_floats, and
// the deterministic semaphore of those rows is number row / kBwdStepRows (bwd_params.h).
__host__ __device__ inline int64_t dq_first_row(const BwdMainParams& p, int b,
                                                const BwdStep& step) {
  return (int64_t{b} * p.shape.heads_q + step.h) * p.shape.rows_padded + step.m * kBwdTile +
         step.half * kBwdStepRows;
}

// Deterministic mode: the number of key tiles below item.n whose items add to the dQ of half
// `half` of query tile m of query head h. Every part of a key tile walks the same steps, so
// with `parts` items per key tile, parts * dq_rank + item.part dQ adds come before this item's.
// Counts what StepCursor walks: every listed tile of a full run, and the tiles of a partial
// run unless its pattern marks the half empty.
__host__ __device__ inline int dq_rank(const BwdMainParams& p, const BwdItem& item, int h, int m,
                                       int half) {
  const desc::Instance& inst = desc::mask_of(p.descriptor, item.b, h);
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
