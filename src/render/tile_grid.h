// Tile classes (empty / partial / full) of one descriptor instance, read from the forward form,
// and their merging into coarser cells for display.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cm::render {

enum class TileClass : uint8_t { kEmpty, kPartial, kFull };

// A rows x cols grid of classes. Cell (r, c) covers a block of `tiles_per_cell` x
// `tiles_per_cell` tiles (1 before merging); blocks on the last row/column may be cut short.
struct TileGrid {
  int rows = 0;  // query-tile axis
  int cols = 0;  // key-tile axis
  int tiles_per_cell = 1;
  std::vector<TileClass> cells;  // row-major

  TileClass at(int r, int c) const { return cells[static_cast<size_t>(r) * cols + c]; }
};

// Throws std::invalid_argument unless `blob` starts with a descriptor header of the supported
// version and (b, h) lies inside its batch x heads grid. Returns the instance index of (b, h).
int checked_instance(const void* blob, int b, int h);

// Precondition: `blob` is a valid descriptor (as produced by the descriptor builder).
// Postcondition: cell (m, n) is kFull / kPartial exactly when key tile n appears in a full /
// partial run of query tile m of instance (b, h), and kEmpty otherwise.
TileGrid classify_tiles(const void* blob, int b, int h);

// Merges factor x factor blocks of cells: a merged cell is full if all its cells are full, empty
// if all are empty, and partial otherwise. Precondition: factor >= 1.
TileGrid merge_cells(const TileGrid& grid, int factor);

}  // namespace cm::render
