// Validation of the inputs of the descriptor builder and readers: tiling limits, the RowIntervals
// invariants, mask indices. Every failure throws cm::Error naming the place and the rule it breaks.
#pragma once

#include <compilemask/compilemask.h>

#include "specialize/row_intervals.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cm::descriptor {

// Tile sizes must be multiples of 16 in [16, 256]; nq and nk must be >= 0 and give at most
// desc::kMaxTiles tiles along each axis.
void check_tiling(const Tiling& tiling, int32_t nq, int32_t nk);

// Checks one instance's listed rows (`all`, or `residual` with formulas; row_intervals.h): CSR
// shape, sorted/disjoint/non-adjacent non-empty intervals inside [0, nk); with formulas also
// row_formula's shape and indices and each formula. `all` is not read when there are formulas.
void check_instance(const InstanceRows& instance, int32_t nq, int32_t nk, size_t index);

// Returns "" if the formula is well-formed for a mask of nq query rows (extents >= 1, both
// grids' token positions in int32, its query rows in [0, nq], a known shape, radii in range for
// exact 64-bit arithmetic), else the rule it breaks.
std::string grid_formula_problem(const desc::GridFormula& formula, int32_t nq);

// Checks that mask (b, h) is one of a batch x heads problem's: else throws cm::Error
// "<where>: b ... must be in [0, batch ...)" (or h).
void check_mask_index(const std::string& where, int32_t b, int32_t h, int32_t batch, int32_t heads);

// Checks that the (b, h) map has batch*heads entries, each a valid instance index.
void check_instance_map(const std::vector<int32_t>& instance_map, int32_t batch, int32_t heads,
                        size_t num_instances);

}  // namespace cm::descriptor
