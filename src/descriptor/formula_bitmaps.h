// Bitmaps of the tiles a grid formula reaches, computed once per distinct tile geometry.
// A formula's visibility between a query row and a key depends only on the offset between
// their grid cells (both lie on the grid), so two tiles whose rows' cells have the same shape,
// whose keys' cells have the same shape, and whose first cells lie at the same offset from
// each other have the same bitmap. In strip layouts a tile's tokens form a compact patch and
// few geometries repeat across a whole mask (clear in 16-column strips at N = 32K: 3,896
// partial tiles, 278 geometries).
#pragma once

#include <compilemask/compilemask.h>

#include "descriptor/tile_axes.h"
#include "specialize/row_intervals.h"

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace cm::descriptor {

class FormulaBitmaps {
 public:
  // Pre: `instance` passed check_instance, f indexes its formulas, tiling passed check_tiling,
  // `axes` hold its tiles. The instance and the axes must outlive this object.
  FormulaBitmaps(const InstanceRows& instance, int32_t f, const Tiling& tiling,
                 const TileAxes& axes);

  // The geometry of tile (m, n): tiles with the same id have the same bitmap. Cost: one walk of
  // the cells of query tile m and of key tile n the first time each is seen, then a hash
  // lookup; a new geometry also computes its bitmap, one half-width per pair of query and key
  // grid segments and one column run per row and key segment.
  int32_t geometry(int32_t m, int32_t n);

  // Pre: id came from geometry(). Post: tiling.m rows of bitmap_words_per_row(tiling.n) words;
  // bit c of row r is set exactly when row q0 + r carries the formula and sees key k0 + c
  // through it.
  const std::vector<uint32_t>& bitmap(int32_t id) const {
    return bitmaps_[static_cast<size_t>(id)];
  }

 private:
  // A tile side's cells relative to its first cell: the shape's id and that first cell.
  struct Side {
    int32_t shape = -1;
    std::array<int32_t, 3> anchor{};  // (t, y, x)
  };
  // FNV-1a over a sequence of int32 (a shape vector or a geometry key).
  struct IntsHash {
    template <class Ints>
    size_t operator()(const Ints& ints) const {
      size_t h = 14695981039346656037ull;
      for (const int32_t x : ints) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
      return h;
    }
  };

  const Side& rows_of(int32_t m);
  const Side& keys_of(int32_t n);
  static int32_t shape_id(std::unordered_map<std::vector<int32_t>, int32_t, IntsHash>& ids,
                          const std::vector<int32_t>& shape);
  std::vector<uint32_t> compute(int32_t m, int32_t n);

  const InstanceRows& instance_;
  int32_t f_;
  Tiling tiling_;
  const TileAxes& axes_;
  std::vector<int16_t> half_widths_;  // half_width_table of the formula
  std::vector<Side> rows_, keys_;     // per query tile and key tile, filled on first use
  std::unordered_map<std::vector<int32_t>, int32_t, IntsHash> row_shapes_, key_shapes_;
  std::unordered_map<std::array<int32_t, 5>, int32_t, IntsHash> geometries_;
  std::vector<std::vector<uint32_t>> bitmaps_;  // per geometry
  std::vector<int32_t> scratch_;
  std::vector<desc::GridSegment> key_segments_;  // compute's scratch
};

}  // namespace cm::descriptor
