// The run form of the descriptor (TileRow, FullRun, PartialRun) built directly from runs, with
// per-row costs and the LPT order, and the transposition of a forward form into per-key-tile
// runs. Nothing here handles full tiles one by one.
#pragma once

#include <compilemask/descriptor.h>

#include "descriptor/pattern_table.h"

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

// Cost model, in units of one full tile: a partial tile also evaluates its mask.
inline constexpr float kFullTileCost = 1.0f;
inline constexpr float kPartialTileCost = 1.25f;

// One form (forward or transposed) before placement in the blob: TileRow::full_offset and
// partial_offset hold indices into `full` and `partial`, not byte offsets.
struct RunForm {
  std::vector<desc::TileRow> rows;
  std::vector<desc::FullRun> full;
  std::vector<desc::PartialRun> partial;
  std::vector<uint16_t> order;  // major tiles by descending cost, ties by index
};

// A partial tile of the forward form: query tile m, key tile n.
struct PartialTile {
  int32_t m;
  int32_t n;
  uint32_t pattern;
};

// Appends major tiles one at a time. Per major tile: add_full calls, then add_partial calls,
// each in increasing order of the other index.
class RunFormBuilder {
 public:
  explicit RunFormBuilder(const PatternTable& table) : table_(table) {}

  void begin_row();
  // Tiles [first, end), all full; merged with an adjacent previous run.
  void add_full(int32_t first, int32_t end);
  // One partial tile. It extends the previous partial run when that run has the same pattern
  // and ends right before it, or, for kPatternGridSparse, when at most kMaxSparseGap tiles
  // lie between them and none of them is full (the others are empty: the caller lists every
  // partial tile).
  void add_partial(int32_t other, uint32_t pattern);
  void end_row();

  // Post: the form with its LPT order; the builder is left empty.
  RunForm finish();

 private:
  const PatternTable& table_;
  RunForm form_;
  int32_t full_tiles_ = 0;
  int32_t partial_tiles_ = 0;
  size_t next_full_ = 0;  // first full run of this row that may lie after the last partial
};

// Pre: `forward` built by RunFormBuilder with `partial_tiles` its partial tiles in order.
// Post: the same tiles and patterns seen per key tile (num_k_tiles rows). Cost: O(runs +
// partial tiles + changes of full coverage between consecutive query tiles).
RunForm transpose_runs(const RunForm& forward, std::span<const PartialTile> partial_tiles,
                       int32_t num_k_tiles, const PatternTable& table);

}  // namespace cm::descriptor
