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

// One mask instance as the descriptor builder needs it.
//   all:          every row's full visible set.
//   formulas:     grid neighbourhood formulas a kernel can evaluate in closed form.
//   row_formula:  per row, the formula contained in that row's visible set, or -1.
//   residual:     per row, `all` minus what row_formula[q] contributes (equal to `all` for rows
//                 with no formula). all[q] == residual[q] ∪ formula(q) for every row.
struct InstanceRows {
  RowIntervals all;
  std::vector<desc::GridFormula> formulas;
  std::vector<int32_t> row_formula;  // empty when formulas is empty
  RowIntervals residual;             // empty when formulas is empty
  friend bool operator==(const InstanceRows&, const InstanceRows&) = default;
};

}  // namespace cm
