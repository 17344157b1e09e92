// Turns tile lists into the run form of the descriptor (TileRow, FullRun, PartialRun), with
// per-row costs and the LPT order, and transposes forward lists into per-key-tile lists.
#pragma once

#include <compilemask/descriptor.h>

#include "descriptor/instance_tiles.h"

#include <cstdint>
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

// Pre: entries of each major tile sorted by `other`, all < kMaxTiles.
// Post: maximal runs of consecutive full tiles, and maximal runs of consecutive partial tiles
// with one pattern, per major tile.
RunForm make_runs(const TileLists& lists);

// Pre: lists valid with `num_other` tiles along the other axis.
// Post: the same tiles seen from the other axis (entries sorted by the old major index).
TileLists transpose(const TileLists& lists, int32_t num_other);

}  // namespace cm::descriptor
