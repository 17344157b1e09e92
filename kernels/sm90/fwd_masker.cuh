// The forward kernel's mask warps: the visibility of every masked key tile's rows, written to
// shared memory ahead of the consumers, and with FwdParams::zero_unseen the keys each warp's
// rows see, for the guard lanes (fwd_guard.cuh).
#pragma once

#include "fwd_config.cuh"
#include "fwd_params.h"
#include "fwd_work.cuh"
#include "sync.cuh"
#include "tile_mask.cuh"

#include <compilemask/descriptor.h>

namespace cm::sm90 {

inline constexpr int kNoPatternRead = -2;  // below every pattern index (-1: a full tile)

// The keys that the real rows among the thread's rows of mask slot `slot` see, as the union of
// its warp, for the guard lanes (fwd_guard.cuh). Rows past the item's end see what their pattern
// says, and nobody reads their O. Read back after the rows are written: a union kept beside
// them made ptxas spill in the mask warps.
template <class Config>
__device__ void publish_seen(const FwdParams& p, typename Config::SharedStorage& ss, int slot,
                             int rows, int first_row, int t) {
  QuadBits seen = QuadColumns::filled(false);
  for (int r = first_row; r < Config::kBlockM; r += Config::kMaskThreads) {
    if ((r & (p.rows_per_head - 1)) < rows) seen |= ss.mask[slot][r];
  }
  CUTE_UNROLL
  for (int q = 0; q < 4; ++q) seen.quad[q] = __reduce_or_sync(~0u, seen.quad[q]);
  if (t % 32 == 0) ss.seen[slot][t / 32] = seen;
}

// The mask warps: for every key tile that needs masking, in the loader's order, the visibility
// of the tile's 128 rows goes into the next mask slot, each row as four words, one per quad
// thread of the accumulator. Each row's intervals are walked once here, not once per thread
// that holds a part of the row, and the consumers wait on no descriptor read.
// The 96 threads take the rows of consecutive masked tiles as one sequence: thread t computes
// the rows whose position in it is t mod 96. Each tile then gets one or two rows from every
// thread, the warp that gives two changes from tile to tile, and a thread computes 4 rows per
// 3 tiles instead of 2 per tile. The mask warps run ahead of the consumers, so this is their
// throughput.
template <class Config>
__device__ void run_masker(const FwdParams& p, typename Config::SharedStorage& ss, int t) {
  static_assert(Config::kBlockM >= Config::kMaskThreads, "every thread has a row of every tile");
  PipeState<Config::kItemSlots> item_state;
  PipeState<Config::kMaskSlots> slot;
  int first_row = t;  // the thread's first row of the next masked tile
  // The mask of the last pattern read: consecutive masked tiles often share their pattern
  // (every partial tile of a grid mask), and reading it again costs dependent global loads.
  TileMask mask{};
  int mask_index = kNoPatternRead;
  const QuadColumns cols(ss.quad_below);
  for (;;) {
    const WorkItem item = take_item<Config>(ss, item_state);
    if (item.row == nullptr) return;
    if (!item.has_key_tiles) continue;

    KeyTileCursor cursor(p.descriptor, item);
    int n, pattern;
    while (cursor.next(n, pattern)) {
      const desc::TileSpan keys = key_tile(p, n);
      if (!tile_needs_mask(pattern, keys.size())) continue;
      if (pattern != mask_index) {
        mask = tile_mask_for_rows(p.descriptor, pattern);
        mask_index = pattern;
      }
      mask.at_keys(keys.begin, cols);
      wait_barrier(ss.mask_empty[slot.stage], slot.phase ^ 1u);
      int r = first_row;
      for (; r < Config::kBlockM; r += Config::kMaskThreads) {
        // Packed heads repeat the query rows every rows_per_head tile rows.
        ss.mask[slot.stage][r] = row_visibility(p.descriptor, mask, item.q0,
                                                r & (p.rows_per_head - 1), keys.size(), cols);
      }
      if (p.zero_unseen) publish_seen<Config>(p, ss, slot.stage, item.rows, first_row, t);
      first_row = r - Config::kBlockM;
      arrive_barrier(ss.mask_full[slot.stage]);  // each thread releases its own rows
      slot.advance();
    }
  }
}

}  // namespace cm::sm90
