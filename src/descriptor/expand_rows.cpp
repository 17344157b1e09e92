// Complete-row materialization (see expand_rows.h).
#include "descriptor/expand_rows.h"

#include "descriptor/half_widths.h"

#include <algorithm>

namespace cm::descriptor {

CompleteRowWriter::CompleteRowWriter(const InstanceRows& instance)
    : instance_(instance), half_widths_(instance.formulas.size()) {}

void CompleteRowWriter::append(int32_t q, RowIntervals& out) {
  const RowIntervals& listed = instance_.listed();
  scratch_.assign(listed.row(q), listed.row(q) + listed.row_size(q));
  const int32_t f = instance_.formulas.empty() ? -1 : instance_.row_formula[q];
  if (f >= 0) {
    const desc::GridFormula& formula = instance_.formulas[static_cast<size_t>(f)];
    std::vector<int16_t>& table = half_widths_[static_cast<size_t>(f)];
    if (table.empty()) table = half_width_table(formula);
    const auto listed_end = static_cast<ptrdiff_t>(scratch_.size());
    desc::for_each_grid_interval(
        formula, q, 0, listed.nk,
        [&](int dt, int dy) { return half_width_from(formula, table, dt, dy); },
        [&](int lo, int hi) {
          scratch_.push_back({lo, hi});
        });
    // Both runs are in key order: the listed intervals, then the formula's.
    std::inplace_merge(scratch_.begin(), scratch_.begin() + listed_end, scratch_.end(),
                       [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  }
  const size_t first = out.intervals.size();
  for (const Interval& x : scratch_) {
    if (out.intervals.size() > first && x.lo <= out.intervals.back().hi) {
      out.intervals.back().hi = std::max(out.intervals.back().hi, x.hi);
    } else {
      out.intervals.push_back(x);
    }
  }
  out.offsets.push_back(static_cast<int64_t>(out.intervals.size()));
}

void CompleteRowWriter::write_rows(int32_t q0, int32_t q1, RowIntervals& out) {
  out.nq = q1 - q0;
  out.nk = instance_.listed().nk;
  out.offsets.assign(1, 0);
  out.intervals.clear();
  for (int32_t q = q0; q < q1; ++q) append(q, out);
}

}  // namespace cm::descriptor

namespace cm {

RowIntervals complete_rows(const InstanceRows& instance) {
  if (instance.formulas.empty()) return instance.all;
  RowIntervals out;
  descriptor::CompleteRowWriter(instance).write_rows(0, instance.residual.nq, out);
  return out;
}

InstanceRows select_rows(const InstanceRows& instance, std::span<const int32_t> positions) {
  InstanceRows out;
  out.all.nq = static_cast<int32_t>(positions.size());
  out.all.nk = instance.listed().nk;
  out.all.offsets.assign(1, 0);
  descriptor::CompleteRowWriter writer(instance);
  for (int32_t q : positions) writer.append(q, out.all);
  return out;
}

}  // namespace cm
