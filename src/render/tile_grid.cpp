// Reads tile classes from the forward form of a descriptor and merges them into coarser cells.
#include "render/tile_grid.h"

#include <compilemask/descriptor.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace cm::render {

int checked_instance(const void* blob, int b, int h) {
  const desc::Header& hd = desc::header(blob);
  if (hd.magic != desc::kMagic || hd.version != desc::kVersion) {
    throw std::invalid_argument("not a CompileMask descriptor of version " +
                                std::to_string(desc::kVersion));
  }
  if (b < 0 || b >= hd.batch || h < 0 || h >= hd.heads) {
    throw std::invalid_argument("mask (b=" + std::to_string(b) + ", h=" + std::to_string(h) +
                                ") is outside the descriptor's batch x heads grid (" +
                                std::to_string(hd.batch) + " x " + std::to_string(hd.heads) + ")");
  }
  return desc::instance_of(blob, b, h);
}

TileGrid classify_tiles(const void* blob, int b, int h) {
  const desc::Instance& inst = desc::instance(blob, checked_instance(blob, b, h));
  const desc::Header& hd = desc::header(blob);
  TileGrid grid;
  grid.rows = hd.num_q_tiles;
  grid.cols = hd.num_k_tiles;
  grid.cells.assign(static_cast<size_t>(grid.rows) * grid.cols, TileClass::kEmpty);
  for (int m = 0; m < grid.rows; ++m) {
    const desc::TileRow& row = desc::q_tile(blob, inst, m);
    TileClass* line = grid.cells.data() + static_cast<size_t>(m) * grid.cols;
    const desc::FullRun* full = desc::full_runs(blob, row);
    for (int i = 0; i < row.full_count; ++i) {
      std::fill_n(line + full[i].first, full[i].count, TileClass::kFull);
    }
    const desc::PartialRun* partial = desc::partial_runs(blob, row);
    for (int i = 0; i < row.partial_count; ++i) {
      const desc::Pattern& pattern = desc::pattern(blob, partial[i].pattern);
      for (int n = partial[i].first; n < partial[i].first + partial[i].count; ++n) {
        // Sparse grid runs may span empty tiles; those stay empty on the map.
        if (desc::partial_tile_nonempty(blob, pattern, m, n)) line[n] = TileClass::kPartial;
      }
    }
  }
  return grid;
}

TileGrid merge_cells(const TileGrid& grid, int factor) {
  if (factor < 1) throw std::invalid_argument("merge factor must be >= 1");
  TileGrid merged;
  merged.rows = (grid.rows + factor - 1) / factor;
  merged.cols = (grid.cols + factor - 1) / factor;
  merged.tiles_per_cell = grid.tiles_per_cell * factor;
  merged.cells.reserve(static_cast<size_t>(merged.rows) * merged.cols);
  for (int r = 0; r < merged.rows; ++r) {
    for (int c = 0; c < merged.cols; ++c) {
      bool all_full = true, all_empty = true;
      for (int i = r * factor; i < std::min(grid.rows, (r + 1) * factor); ++i) {
        for (int j = c * factor; j < std::min(grid.cols, (c + 1) * factor); ++j) {
          all_full = all_full && grid.at(i, j) == TileClass::kFull;
          all_empty = all_empty && grid.at(i, j) == TileClass::kEmpty;
        }
      }
      merged.cells.push_back(all_full    ? TileClass::kFull
                             : all_empty ? TileClass::kEmpty
                                         : TileClass::kPartial);
    }
  }
  return merged;
}

}  // namespace cm::render
