// Row intervals to attention slices (slices.h).
#include "specialize/slices.h"

#include <algorithm>
#include <cstddef>

namespace cm {
namespace {

// A slice under construction: rows [q_begin, q_begin + rows), the first row's start lo0 and
// the last row's interval [last_lo, last_hi). The steps per row of the start and the end are
// fixed by the second row (-1 until then).
struct OpenSlice {
  int32_t q_begin = 0;
  int32_t rows = 0;
  int32_t lo0 = 0;
  int32_t last_lo = 0;
  int32_t last_hi = 0;
  int32_t lo_step = -1;
  int32_t hi_step = -1;

  // Whether [lo, hi), one row below the last, continues the slice.
  bool extends_to(int32_t lo, int32_t hi) const {
    const int32_t dlo = lo - last_lo;
    const int32_t dhi = hi - last_hi;
    if (dlo < 0 || dlo > 1 || dhi < 0 || dhi > 1) return false;
    return lo_step < 0 || (dlo == lo_step && dhi == hi_step);
  }

  AttnSlice close() const {
    // The key range runs from the first row's start to the last row's end: a start that moves
    // begins at k_begin in the first row, an end that moves reaches k_end in the last.
    static constexpr SliceShape kShapes[2][2] = {
        {SliceShape::kFull, SliceShape::kCausal},
        {SliceShape::kInverseCausal, SliceShape::kBiCausal}};
    const SliceShape shape = lo_step < 0 ? SliceShape::kFull : kShapes[lo_step][hi_step];
    return {q_begin, q_begin + rows, lo0, last_hi, shape};
  }
};

}  // namespace

std::vector<AttnSlice> slices_from_rows(const RowIntervals& rows) {
  std::vector<AttnSlice> out;
  std::vector<OpenSlice> open, next;  // in key order: one per interval of the row above
  for (int32_t q = 0; q < rows.nq; ++q) {
    next.clear();
    size_t j = 0;
    for (const Interval* it = rows.row(q); it != rows.row(q) + rows.row_size(q); ++it) {
      // The one open slice that may continue here starts at it->lo - 1 or it->lo: the row
      // above's intervals are disjoint and non-adjacent, so their starts differ by 2 or more.
      while (j < open.size() && open[j].last_lo < it->lo - 1) out.push_back(open[j++].close());
      if (j < open.size() && open[j].extends_to(it->lo, it->hi)) {
        OpenSlice s = open[j++];
        if (s.rows == 1) {
          s.lo_step = it->lo - s.last_lo;
          s.hi_step = it->hi - s.last_hi;
        }
        s.rows += 1;
        s.last_lo = it->lo;
        s.last_hi = it->hi;
        next.push_back(s);
      } else {
        next.push_back({q, 1, it->lo, it->lo, it->hi});
      }
    }
    while (j < open.size()) out.push_back(open[j++].close());
    open.swap(next);
  }
  for (const OpenSlice& s : open) out.push_back(s.close());
  std::sort(out.begin(), out.end(), [](const AttnSlice& a, const AttnSlice& b) {
    return a.q_begin != b.q_begin ? a.q_begin < b.q_begin : a.k_begin < b.k_begin;
  });
  return out;
}

}  // namespace cm
