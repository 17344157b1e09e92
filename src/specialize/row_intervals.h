// Per-row visible key intervals of one concrete mask instance: the output of specialize's row
// evaluation and the input of the descriptor builder.
#pragma once

#include <compilemask/descriptor.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace cm::desc {
// Formulas are plain records without padding: equal bytes means equal formulas.
inline bool operator==(const GridFormula& a, const GridFormula& b) {
  return std::memcmp(&a, &b, sizeof(GridFormula)) == 0;
}
}  // namespace cm::desc

namespace cm {

// Half-open key interval [lo, hi).
struct Interval {
  int32_t lo = 0;
  int32_t hi = 0;
  friend bool operator==(const Interval&, const Interval&) = default;
};

// Compressed sparse rows: row q owns intervals[offsets[q] .. offsets[q+1]). Within a row the
// intervals are non-empty, sorted, disjoint and non-adjacent, and lie inside [0, nk).
struct RowIntervals {
  int32_t nq = 0;
  int32_t nk = 0;
  std::vector<int64_t> offsets;  // nq + 1 entries
  std::vector<Interval> intervals;

  int64_t row_size(int32_t q) const { return offsets[q + 1] - offsets[q]; }
  const Interval* row(int32_t q) const { return intervals.data() + offsets[q]; }
  int64_t visible_pairs() const;
  friend bool operator==(const RowIntervals&, const RowIntervals&) = default;
};

// One mask instance as the descriptor builder needs it. Row q sees
//   all[q]                                       when `formulas` is empty;
//   residual[q] ∪ formula(row_formula[q], q)     otherwise, where formula(-1, q) is empty and
//                                                formula(f, q) is the neighbourhood of q under
//                                                formulas[f] (descriptor.h).
//   formulas:     grid neighbourhood formulas a kernel can evaluate in closed form.
//   row_formula:  per row, a formula index or -1 (empty when formulas is empty).
//   residual:     per row, the keys listed explicitly (empty when formulas is empty).
// With formulas the builder ignores `all`: evaluate_rows leaves it empty, because listing every
// neighbourhood interval is the cost formulas exist to avoid. complete_rows()
// (descriptor/expand_rows.h) materializes the full visible sets for tests and tools.
struct InstanceRows {
  RowIntervals all;
  std::vector<desc::GridFormula> formulas;
  std::vector<int32_t> row_formula;  // empty when formulas is empty
  RowIntervals residual;             // empty when formulas is empty

  // The explicitly listed intervals: `all`, or `residual` when there are formulas.
  const RowIntervals& listed() const { return formulas.empty() ? all : residual; }
  friend bool operator==(const InstanceRows&, const InstanceRows&) = default;
};

}  // namespace cm
