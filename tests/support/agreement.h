// Test-only check that every production path agrees with the brute-force oracle: the row
// intervals from specialize's evaluator, Mask::slices, Mask::block_grid, and the descriptor
// decoded from both of its forms.
#pragma once

#include <compilemask/compilemask.h>

#include <string>

namespace cm::testing {

// Returns "" when all paths agree for every (b, h) of dims at this tiling, else a description
// of the first disagreement (path, b, h, q, k). Mask::count_tiles must also find the counts of
// specialize's stats.
std::string disagreement(const Mask& mask, const Params& params, const Dims& dims,
                         const Tiling& tiling);

}  // namespace cm::testing
