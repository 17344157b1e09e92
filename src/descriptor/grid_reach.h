// Closed-form work on one grid formula for one query tile row: which key tiles the rows'
// neighbourhoods reach and how many pairs they see, per (query grid line, key grid line) pair
// instead of per row and interval.
#pragma once

#include <compilemask/descriptor.h>

#include "descriptor/tile_classify.h"

#include <cstdint>
#include <vector>

namespace cm::descriptor {

// One grid formula's reach, tile row by tile row. Keeps the formula's half-width table and
// per-key-line scratch between tile rows.
class GridReach {
 public:
  // Pre: f valid (input_checks.h), its key grid inside [0, nk).
  explicit GridReach(const desc::GridFormula& f);

  // Pre: 0 <= q0 < q1. Post: marks in `classifier` every key tile that some row of [q0, q1)
  // reaches through the formula (the union of the neighbourhoods, exactly), and returns the
  // number of (q, k) pairs it makes visible to those rows. Cost: O(query grid lines of the rows
  // x key grid lines in reach); the reached columns of each key line are merged across the
  // query lines before the classifier sees them, so a strip tile's 8 query lines touch its
  // ~40 key lines once each, not 8 x 33 times.
  int64_t reach(int32_t q0, int32_t q1, TileRowClassifier& classifier);

 private:
  // Reached columns [lo, hi) of one key line not yet given to the classifier; empty if lo >= hi.
  struct Columns {
    int lo = 0, hi = 0;
  };

  void touch(int t, int y, const Columns& columns, TileRowClassifier& classifier) const;

  desc::GridFormula f_;
  std::vector<int16_t> half_widths_;  // half_width_table(f_)
  std::vector<desc::GridSegment> segments_;
  std::vector<Columns> lines_;  // per key line of the current tile row's reach box
};

// False when no single row of f can see all keys of [k0, k1) that lie on f's grid (some grid
// line part is wider than a neighbourhood line), so such a tile can never be full through f.
bool formula_may_cover(const desc::GridFormula& f, int32_t k0, int32_t k1);

}  // namespace cm::descriptor
