// Materializes the complete visible key intervals of InstanceRows rows (residual united with
// each row's grid formula), for the builder's fallback tile rows, block grids, tests and tools.
#pragma once

#include "specialize/row_intervals.h"

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

// Appends complete rows of one instance. Each formula's half-widths come from its table
// (half_width_table, built on the formula's first row), as the kernels read them, instead of
// a square root per grid line.
class CompleteRowWriter {
 public:
  // Pre: instance valid (input_checks.h); it outlives the writer.
  explicit CompleteRowWriter(const InstanceRows& instance);

  // Pre: 0 <= q < nq. Post: appends row q's complete visible set, sorted, disjoint and
  // non-adjacent, to out.intervals and closes the row in out.offsets. Cost: O(listed
  // intervals + formula grid lines of the row).
  void append(int32_t q, RowIntervals& out);

  // Pre: 0 <= q0 <= q1 <= nq. Post: out holds the complete rows [q0, q1), its row i being row
  // q0 + i (its earlier content dropped).
  void write_rows(int32_t q0, int32_t q1, RowIntervals& out);

 private:
  const InstanceRows& instance_;
  std::vector<std::vector<int16_t>> half_widths_;  // per formula, empty until first used
  std::vector<Interval> scratch_;
};

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
