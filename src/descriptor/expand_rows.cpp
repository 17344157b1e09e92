// Complete-row materialization (see expand_rows.h).
#include "descriptor/expand_rows.h"

#include <algorithm>

namespace cm::descriptor {

void append_complete_row(const InstanceRows& instance, int32_t q, std::vector<Interval>& scratch,
                         RowIntervals& out) {
  const RowIntervals& listed = instance.listed();
  scratch.assign(listed.row(q), listed.row(q) + listed.row_size(q));
  const int32_t f = instance.formulas.empty() ? -1 : instance.row_formula[q];
  if (f >= 0) {
    desc::for_each_grid_interval(instance.formulas[static_cast<size_t>(f)], q, 0, listed.nk,
                                 [&](int lo, int hi) {
                                   scratch.push_back({lo, hi});
                                 });
    std::sort(scratch.begin(), scratch.end(),
              [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  }
  const size_t first = out.intervals.size();
  for (const Interval& x : scratch) {
    if (out.intervals.size() > first && x.lo <= out.intervals.back().hi) {
      out.intervals.back().hi = std::max(out.intervals.back().hi, x.hi);
    } else {
      out.intervals.push_back(x);
    }
  }
  out.offsets.push_back(static_cast<int64_t>(out.intervals.size()));
}

}  // namespace cm::descriptor

namespace cm {

RowIntervals complete_rows(const InstanceRows& instance) {
  if (instance.formulas.empty()) return instance.all;
  RowIntervals out;
  out.nq = instance.residual.nq;
  out.nk = instance.residual.nk;
  out.offsets.assign(1, 0);
  std::vector<Interval> scratch;
  for (int32_t q = 0; q < out.nq; ++q) descriptor::append_complete_row(instance, q, scratch, out);
  return out;
}

InstanceRows select_rows(const InstanceRows& instance, std::span<const int32_t> positions) {
  InstanceRows out;
  out.all.nq = static_cast<int32_t>(positions.size());
  out.all.nk = instance.listed().nk;
  out.all.offsets.assign(1, 0);
  std::vector<Interval> scratch;
  for (int32_t q : positions) descriptor::append_complete_row(instance, q, scratch, out.all);
  return out;
}

}  // namespace cm
