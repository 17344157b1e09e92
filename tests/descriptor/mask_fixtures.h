// Test fixtures for the descriptor tests: dense masks, their conversion to RowIntervals, a
// brute-force grid formula, tile counts, and random instances whose expected visibility is
// known densely.
#pragma once

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include "specialize/row_intervals.h"

#include <cstdint>
#include <ostream>
#include <random>
#include <vector>

namespace cm {
// How gtest prints TileCounts (found by argument-dependent lookup).
void PrintTo(const TileCounts& counts, std::ostream* os);
}  // namespace cm

namespace cm::testing {

// Row-major nq x nk visibility, 1 = visible.
struct Dense {
  int32_t nq = 0;
  int32_t nk = 0;
  std::vector<uint8_t> cells;

  Dense(int32_t rows, int32_t cols)
      : nq(rows), nk(cols), cells(static_cast<size_t>(rows) * static_cast<size_t>(cols), 0) {}
  uint8_t& at(int32_t q, int32_t k) { return cells[static_cast<size_t>(q) * nk + k]; }
  uint8_t at(int32_t q, int32_t k) const { return cells[static_cast<size_t>(q) * nk + k]; }
};

// The maximal runs of each row, as RowIntervals.
RowIntervals rows_from_dense(const Dense& dense);

// Tile classes and pair counts of a dense mask (one instance) cut into the tiles of descriptor
// `blob` (its tile-start tables), counted cell by cell.
TileCounts dense_tile_counts(const Dense& dense, const void* blob);

// Brute-force membership of key k in the neighbourhood of query q, straight from the
// definition in descriptor.h (no interval walking).
bool formula_sees(const desc::GridFormula& f, int32_t q, int32_t k);

// A random instance and its expected visibility.
struct RandomInstance {
  InstanceRows rows;
  Dense expected;
};

// Random rows of nq x nk: bands (causal-like diagonals), rectangles, scattered intervals,
// noisy rows that need bitmaps, empty rows; with `with_formulas`, one or two random grid
// formulas with independently computed residuals, and some rows deliberately not carrying
// their formula so that the builder must fall back to plain patterns.
RandomInstance random_instance(std::mt19937& rng, int32_t nq, int32_t nk, bool with_formulas);

}  // namespace cm::testing
