// Closed-form work on one grid formula for one query tile row: which key tiles the rows'
// neighbourhoods reach and how many pairs they see, per (query grid line, key grid line) pair
// instead of per row and interval.
#pragma once

#include <compilemask/descriptor.h>

#include "descriptor/tile_classify.h"

#include <cstdint>

namespace cm::descriptor {

// Pre: f valid (input_checks.h), 0 <= q0 < q1, the formula's key grid inside [0, nk).
// Post: marks in `classifier` every key tile that some row of [q0, q1) reaches through f (the
// union of the neighbourhoods, exactly), and returns the number of (q, k) pairs f makes
// visible to those rows. Cost: O(query grid lines of the rows x key grid lines in reach).
int64_t reach_grid(const desc::GridFormula& f, int32_t q0, int32_t q1,
                   TileRowClassifier& classifier);

// False when no single row of f can see all keys of [k0, k1) that lie on f's grid (some grid
// line part is wider than a neighbourhood line), so such a tile can never be full through f.
bool formula_may_cover(const desc::GridFormula& f, int32_t k0, int32_t k1);

}  // namespace cm::descriptor
