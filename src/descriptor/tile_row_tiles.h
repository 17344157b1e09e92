// Classifies the key tiles of an instance's query tile rows into full, partial and empty: the
// first half of encoding (instance_tiles.h), and all that counting tiles needs.
#pragma once

#include <compilemask/compilemask.h>

#include "descriptor/expand_rows.h"
#include "descriptor/grid_reach.h"
#include "descriptor/tile_axes.h"
#include "descriptor/tile_classify.h"
#include "specialize/row_intervals.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace cm::descriptor {

// One query tile row's key tiles.
struct TileRowTiles {
  // The grid formula a kernel evaluates for every row of the tile row, or -1 (see
  // encode_instance for when one is).
  int32_t formula = -1;
  // The rows whose listed intervals make up the partial tiles' other keys, as (rows, r0, r1):
  // the instance's listed rows, or, for a tile row whose formula rows are not closed-form, its
  // complete rows materialized from 0.
  const RowIntervals* rows = nullptr;
  int32_t r0 = 0, r1 = 0;
  struct Run {
    int32_t first, end;  // key tiles [first, end)
  };
  std::vector<Run> full;         // runs of full key tiles, increasing
  std::vector<int32_t> partial;  // partial key tiles, increasing
  std::vector<uint8_t> reached;  // per partial tile: `formula` reaches it
  int64_t visible_pairs = 0;
  int64_t computed_pairs = 0;  // clipped area of the full and partial tiles
};

class TileRowTileFinder {
 public:
  // Pre: instance passed check_instance; `axes` are its tiles (choose_tile_axes). Both outlive
  // the finder.
  TileRowTileFinder(const InstanceRows& instance, const TileAxes& axes);

  // Pre: 0 <= m < axes.q.count(). Post: the tiles of query tile row m, exactly: a full tile's
  // every (q, k) is visible, a partial tile's some, an empty tile's none. The result is valid
  // until the next call.
  // Cost: O(rows + listed intervals + grid line pairs + touched tiles), plus, per tile a
  // formula might fill, one row scan that stops at the first row that does not see it all.
  const TileRowTiles& find(int32_t m);

 private:
  const InstanceRows& instance_;
  const TileAxes& axes_;
  TileRowClassifier classifier_;
  std::vector<std::unique_ptr<GridReach>> reaches_;  // per formula, on first use
  std::vector<TileSegment> segments_;
  std::vector<Interval> scratch_;
  CompleteRowWriter complete_rows_;
  RowIntervals complete_;  // complete rows of a tile row that is not closed-form
  TileRowTiles tiles_;
};

}  // namespace cm::descriptor
