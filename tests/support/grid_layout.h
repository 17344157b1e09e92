// Test-only oracle for a grid's token order (desc::GridFormula): finds a token's cell by
// walking the layout strip by strip, sharing no code with desc::grid_cell or the lowering.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cm::testing {

struct GridPosition {
  int64_t t, y, x;
};

// The cell of the token at offset rel in [0, frames*rows*cols) of a rows x cols grid laid out
// frame by frame, each frame strip by strip (strips of `strip` columns, the last one narrower),
// each strip row by row.
inline GridPosition walk_grid_cell(int64_t rows, int64_t cols, int64_t strip, int64_t rel) {
  const int64_t t = rel / (rows * cols);
  rel -= t * rows * cols;
  int64_t x0 = 0;
  while (rel >= rows * std::min(strip, cols - x0)) {
    rel -= rows * std::min(strip, cols - x0);
    x0 += strip;
  }
  const int64_t width = std::min(strip, cols - x0);
  return {t, rel / width, x0 + rel % width};
}

}  // namespace cm::testing
