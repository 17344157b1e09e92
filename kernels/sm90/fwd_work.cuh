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

__host__ __device__ inline WorkItem decode_item(const FwdParams& p, int index) {
  const PairedUnit unit = paired_unit(index, p.num_q_tiles, p.total_items / p.num_q_tiles);
  const int bh = unit.instance;
  const int rank = unit.rank;
  const int b = bh / p.heads_q;
  const int h = bh - b * p.heads_q;
  const desc::Instance& inst = instance_for(p.descriptor, p, b, h);
  const int m = desc::at<uint16_t>(p.descriptor, inst.fwd_order_offset)[rank];
  const desc::TileRow& row = desc::q_tile(p.descriptor, inst, m);
  const desc::TileSpan rows = query_tile(p, m);
  const int q_row0 = (p.q_offsets != nullptr ? p.q_offsets[b] : 0) + rows.begin;
  return {b, h, m, rows.begin, rows.size(), q_row0, row.full_count + row.partial_count > 0, &row};
}

// Walks the key tiles of a query tile in ascending order: full runs and partial runs merged by
// position. Producer and consumers walk the same sequence, which is what keeps their pipelines
// in step. A kPatternGridSparse run may list empty tiles (descriptor version 2); they are not
// skipped but computed as fully masked tiles, which adds nothing to O or the LSE (row-major
// clear at N = 32K holds none; in 16-column strips 197 of its 4,093 listed tiles are empty).
class KeyTileCursor {
 public:
  __host__ __device__ KeyTileCursor(const void* blob, const desc::TileRow& row)
      : full_(desc::full_runs(blob, row)),
        partial_(desc::partial_runs(blob, row)),
        full_count_(row.full_count),
        partial_count_(row.partial_count) {}

  // Moves to the next tile: n is its index, pattern its pattern (-1 for a full tile).
  // Returns false after the last tile.
  __host__ __device__ bool next(int& n, int& pattern) {
    if (at_ == end_) {
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
    }
    n = at_++;
    pattern = pattern_;
    return true;
  }

  // Whether the tile next() returned last was the row's last.
  __host__ __device__ bool done() const {
    return at_ == end_ && fi_ == full_count_ && pi_ == partial_count_;
  }

 private:
  const desc::FullRun* full_;
  const desc::PartialRun* partial_;
  int full_count_, partial_count_;
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
