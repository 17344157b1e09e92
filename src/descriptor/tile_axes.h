// The tiles along the query and key axes. They are the Tiling's uniform tiles, restarted at the
// boundaries of block-diagonal masks (packed sequences, documents), so that no tile spans two
// blocks: such a tile computes both blocks' key tiles for all its rows and masks most of them.
#pragma once

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include "specialize/row_intervals.h"

#include <cstdint>
#include <vector>

namespace cm::descriptor {

// The tiles of one axis of `length` tokens: tile t covers [start(t), end(t)), tiles are
// consecutive from 0 to length and hold 1 to `size` tokens each.
class TileAxis {
 public:
  // Pre: starts[0] == 0, strictly increasing, consecutive differences in [1, size].
  TileAxis(std::vector<int32_t> starts, int32_t size);

  // The uniform tiles [t * size, min(length, (t + 1) * size)).
  static TileAxis uniform(int32_t length, int32_t size);

  int32_t count() const { return static_cast<int32_t>(starts_.size()) - 1; }
  int32_t length() const { return starts_.back(); }
  int32_t start(int32_t t) const { return starts_[static_cast<size_t>(t)]; }
  int32_t end(int32_t t) const { return starts_[static_cast<size_t>(t) + 1]; }
  // The tile-start table of the descriptor: count() + 1 entries.
  const std::vector<int32_t>& starts() const { return starts_; }

  // Pre: 0 <= k < length(). The tile that holds token k. A window of `size` tokens holds at
  // most two tile starts when restarts are at least a tile apart, so this is a lookup and at
  // most two steps.
  int32_t tile_of(int32_t k) const {
    auto t = static_cast<size_t>(window_tile_[static_cast<size_t>(desc::divide(k, div_))]);
    while (starts_[t + 1] <= k) ++t;
    return static_cast<int32_t>(t);
  }

 private:
  std::vector<int32_t> starts_;
  std::vector<int32_t> window_tile_;  // per window [w * size, (w + 1) * size): the tile of w * size
  desc::Divisor div_;                 // by size
};

struct TileAxes {
  TileAxis q;
  TileAxis k;
};

// Tiles restart at a block boundary only this many (larger) tile sizes after the previous
// start of uniform tiles: each restart may add one short tile per axis, worth it only when the
// blocks on both sides span a few tiles.
inline constexpr int32_t kMinTilesBetweenRestarts = 2;

// Pre: every instance passed check_instance for (nq, nk); tiling passed check_tiling.
// Post: the tiles of tiling.m rows and tiling.n columns, restarted on both axes at each block
// boundary c in (0, min(nq, nk)) where, in every instance, no row below c sees a key at or
// above c and no row at or above c sees a key below c, unless c is already a tile start on
// both axes or lies within kMinTilesBetweenRestarts tiles of the previous restart. Instances
// with grid formulas have no block boundaries. Falls back to uniform tiles if restarts would
// exceed desc::kMaxTiles tiles on an axis. Cost: O(instances * nq + intervals).
TileAxes choose_tile_axes(const std::vector<InstanceRows>& instances, const Tiling& tiling);

}  // namespace cm::descriptor
