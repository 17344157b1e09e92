// Materializes the complete visible key intervals of InstanceRows rows (residual united with
// each row's grid formula), for the builder's fallback tile rows, tests and tools.
#pragma once

#include "specialize/row_intervals.h"

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

// Pre: instance valid (input_checks.h), 0 <= q < nq. Post: appends row q's complete visible
// set, sorted, disjoint and non-adjacent, to out.intervals and closes the row in out.offsets.
// `scratch` is working storage. Cost: O(listed intervals + formula grid lines of the row).
void append_complete_row(const InstanceRows& instance, int32_t q, std::vector<Interval>& scratch,
                         RowIntervals& out);

}  // namespace cm::descriptor

namespace cm {

// The complete visible sets of every row of `instance` (row_intervals.h); equal to
// instance.all when there are no formulas.
RowIntervals complete_rows(const InstanceRows& instance);

// Rows `positions` of `instance` as an instance of positions.size() rows against the same keys:
// plan row i is the mask's query position positions[i]. Grid formulas are expanded (they are
// stated on a row's own position). Pre: instance valid, positions in [0, nq). Cost: as
// complete_rows on the selected rows.
InstanceRows select_rows(const InstanceRows& instance, std::span<const int32_t> positions);

}  // namespace cm
