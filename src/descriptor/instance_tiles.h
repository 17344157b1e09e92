// Encodes one mask instance into its forward tile lists: every non-empty (query tile, key tile)
// with its class (full, or partial with a pattern id from the shared PatternTable).
#pragma once

#include <compilemask/compilemask.h>

#include "descriptor/pattern_table.h"
#include "specialize/row_intervals.h"

#include <cstdint>
#include <vector>

namespace cm::descriptor {

inline constexpr uint32_t kFullTile = 0xFFFFFFFFu;  // TileEntry::pattern of a full tile

// A visible tile seen from its major axis: `other` is the tile index along the other axis.
struct TileEntry {
  int32_t other;
  uint32_t pattern;  // pattern index, or kFullTile
};

// Compressed rows: major tile t owns entries[start[t] .. start[t+1]), sorted by `other`.
struct TileLists {
  std::vector<int32_t> start;
  std::vector<TileEntry> entries;
};

struct EncodedInstance {
  TileLists forward;  // major = query tile, other = key tile
  int64_t visible_pairs = 0;
  int64_t full_tiles = 0;
  int64_t partial_tiles = 0;
  int64_t computed_pairs = 0;  // clipped area of full and partial tiles
};

// Pre: instance passed check_instance for (nq, nk); tiling passed check_tiling.
// Post: the returned lists, with `table`'s patterns, describe exactly instance.all. A tile row
// whose rows carry one grid formula consistently (see tile_row_formula in the .cpp) gets
// kPatternGrid patterns built from the residual rows.
EncodedInstance encode_instance(const InstanceRows& instance, const Tiling& tiling,
                                PatternTable& table);

}  // namespace cm::descriptor
