// What all three roles of the forward kernel walk in the same order: work items (decoded by
// the loader, taken by the mask warps and consumers from its ring) and the key tiles of each.
// The walks are host-callable too: tests/gpu/kernel_walk_test.cu checks them on the CPU.
#pragma once

#include "fwd_config.cuh"
#include "fwd_params.h"
#include "sync.cuh"
#include "tile_mask.cuh"

#include <compilemask/descriptor.h>

namespace cm::sm90 {

// Work item `index`: items come in groups of num_splits consecutive indices, the parts of one
// query tile, and the groups in paired order (grouped_unit) over the instances (b, group of
// heads_per_item query heads). The item's h is the group's first query head.
__host__ __device__ inline WorkItem decode_item(const FwdParams& p, int index) {
  const int split = index % p.num_splits;
  const int unit_index = index / p.num_splits;
  const int units = p.total_items / p.num_splits;
  const GroupedUnit unit =
      grouped_unit(unit_index, p.num_q_tiles, units / p.num_q_tiles, kPairedInstances);
  const int bh = unit.instance;
  const int rank = unit.rank;
  const int head_groups = p.heads_q / p.heads_per_item;
  const int b = bh / head_groups;
  const int h = (bh - b * head_groups) * p.heads_per_item;
  const desc::Instance& inst = desc::mask_of(p.descriptor, b, h);
  const int m = desc::at<uint16_t>(p.descriptor, inst.fwd_order_offset)[rank];
  const desc::TileRow& row = desc::q_tile(p.descriptor, inst, m);
  const desc::TileSpan rows = query_tile(p, m);
  const int q_row0 = (p.q_offsets != nullptr ? p.q_offsets[b] : 0) + rows.begin;
  // Unsplit, the row's tiles are not counted: the cursor stops at the row's end first. An item
  // of a sequence that does not fit its tensors walks none and holds no rows: the kernel reads
  // and writes none of them (packed_rows.cu writes its NaN rows).
  const bool fits = sequence_fits(p, b);
  const TileRange keys =
      !fits               ? TileRange{0, 0}
      : p.num_splits == 1 ? TileRange{0, row.full_count + row.partial_count > 0 ? kAllTiles : 0}
                          : split_range(desc::listed_tiles(p.descriptor, row), split, p.num_splits);
  return {b, h, m, rows.begin, fits ? rows.size() : 0, q_row0, keys.count > 0, &row, split, keys};
}

// The K/V stages of a key tile `width` keys wide: its kStageKeys-wide parts that hold keys.
template <class Config>
__host__ __device__ inline int stage_parts(int width) {
  const int parts = (width + Config::kStageKeys - 1) / Config::kStageKeys;
  return parts < Config::kTileParts ? parts : Config::kTileParts;
}

// Walks the key tiles of a work item in ascending order: the listed tiles of its query tile
// (full runs and partial runs merged by position), from keys.begin, keys.count of them. Producer
// and consumers walk the same sequence, which is what keeps their pipelines in step. A
// kPatternGridSparse run may list empty tiles (descriptor version 2); they are not skipped but
// computed as fully masked tiles, which adds nothing to O or the LSE (row-major clear at N = 32K
// holds none; in 16-column strips 197 of its 4,093 listed tiles are empty).
class KeyTileCursor {
 public:
  __host__ __device__ KeyTileCursor(const void* blob, const WorkItem& item)
      : full_(desc::full_runs(blob, *item.row)),
        partial_(desc::partial_runs(blob, *item.row)),
        full_count_(item.row->full_count),
        partial_count_(item.row->partial_count),
        left_(item.keys.count) {
    for (int skip = item.keys.begin; skip > 0;) {
      if (at_ == end_ && !next_run()) break;
      const int step = skip < end_ - at_ ? skip : end_ - at_;
      at_ += step;
      skip -= step;
    }
  }

  // Moves to the next tile: n is its index, pattern its pattern (-1 for a full tile).
  // Returns false after the last tile.
  __host__ __device__ bool next(int& n, int& pattern) {
    if (left_ == 0 || (at_ == end_ && !next_run())) return false;
    n = at_++;
    pattern = pattern_;
    --left_;
    return true;
  }

  // Whether the tile next() returned last was the item's last.
  __host__ __device__ bool done() const {
    return left_ == 0 || (at_ == end_ && fi_ == full_count_ && pi_ == partial_count_);
  }

 private:
  // Enters the next run by position; false when none is left.
  __host__ __device__ bool next_run() {
    if (fi_ == full_count_ && pi_ == partial_count_) return false;
    const bool take_partial =
        fi_ == full_count_ || (pi_ < partial_count_ && partial_[pi_].first < full_[fi_].first);
    if (take_partial) {
      const desc::PartialRun run = partial_[pi_++];
      at_ = run.first;
      end_ = run.first + run.count;
      pattern_ = static_cast<int>(run.pattern);
    } else {
      const desc::FullRun run = full_[fi_++];
      at_ = run.first;
      end_ = run.first + run.count;
      pattern_ = -1;
    }
    return true;
  }

  const desc::FullRun* full_;
  const desc::PartialRun* partial_;
  int full_count_, partial_count_;
  int left_;
  int fi_ = 0, pi_ = 0;
  int at_ = 0, end_ = 0, pattern_ = -1;
};

// The next work item from the loader's ring, for a whole warp (mask warps and consumers).
template <class Config>
__device__ WorkItem take_item(typename Config::SharedStorage& ss,
                              PipeState<Config::kItemSlots>& state) {
  wait_barrier(ss.item_full[state.stage], state.phase);
  const WorkItem item = warp_uniform_load(ss.item[state.stage]);
  arrive_per_warp(ss.item_empty[state.stage]);
  state.advance();
  return item;
}

}  // namespace cm::sm90
