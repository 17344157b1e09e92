// Encodes one mask instance into its forward run form: per query tile, runs of full key tiles
// and partial key tiles with pattern ids from the shared PatternTable, plus the list of partial
// tiles that the transposition needs.
#pragma once

#include <compilemask/compilemask.h>

#include "descriptor/pattern_table.h"
#include "descriptor/tile_axes.h"
#include "descriptor/tile_runs.h"
#include "specialize/row_intervals.h"

#include <cstdint>
#include <vector>

namespace cm::descriptor {

struct EncodedInstance {
  RunForm forward;
  std::vector<PartialTile> partial;  // every partial tile, by query tile then key tile
  TileCounts counts;                 // tiles and pairs (instances and empty tiles left 0)
};

// Pre: instance passed check_instance for its shape; tiling passed check_tiling.
// Post: the forward form, with `table`'s patterns, describes exactly the visible sets of
// row_intervals.h. A query tile whose rows carry one grid formula consistently, and list no
// key on that formula's grid, is classified in closed form per grid line (tile_row_tiles.h);
// its formula-reached partial tiles get kPatternGridSparse (no listed keys in the tile) or
// kPatternGrid (formula plus listed keys as bands) patterns, or, for a strip-layout formula,
// kPatternBitmap patterns of the formula's and the listed keys. Other query tiles with formula rows
// are classified from their complete rows, materialized for that tile row only. Other partial
// tiles get bands (at most four), else their query tile's row table when its rows hold at most
// four intervals each, else per-row ranges, else a bitmap, whichever comes first no larger than
// the bitmap (docs/descriptor.md, Pattern choice).
// Cost: O(rows + listed intervals + grid line pairs + partial tiles + pieces), plus, per
// partial tile a formula might fill, one row scan that stops at the first uncovered row, and
// per formula-reached strip tile, its rows' grid intervals and a bitmap.
// `axes` are the instance's tiles (choose_tile_axes); patterns are tiling.m x tiling.n.
EncodedInstance encode_instance(const InstanceRows& instance, const Tiling& tiling,
                                const TileAxes& axes, PatternTable& table);

// Pre: as for encode_instance. Post: encode_instance's counts, from the classification alone
// (no patterns, pieces or runs).
TileCounts count_instance_tiles(const InstanceRows& instance, const TileAxes& axes);

}  // namespace cm::descriptor
