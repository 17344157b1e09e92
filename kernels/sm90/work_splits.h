// Work cut into near-equal parts when a launch has fewer work items than the GPU has SMs: the
// forward's key splits (fwd_splits.h) and the backward's head splits (BwdShape::head_splits).
// Host and device code.
#pragma once

#include <compilemask/descriptor.h>

#include <stdint.h>

namespace cm::sm90 {

// Elements [begin, begin + count) of a row: listed key tiles, or query heads of a kv group.
struct TileRange {
  int begin, count;
};

// Part `split` of `splits` of a row of `length` elements. The parts cover the row once, in order,
// and their sizes differ by at most one (some are empty when length < splits).
CM_HD TileRange split_range(int length, int split, int splits) {
  const int begin = static_cast<int>(int64_t{length} * split / splits);
  const int end = static_cast<int>(int64_t{length} * (split + 1) / splits);
  return {begin, end - begin};
}

// The part count s in [1, most] that minimises the estimated time of `items` work items on `sms`
// SMs when the longest item, `length` elements of `element_cost` each, is cut into s parts:
// waves(s) = ceil(items * s / sms) rounds of the longest part, ceil(length / s) elements plus a
// work item's own cost `item_cost` (both in any one unit of time); the fewest parts among equals.
inline int best_part_count(int64_t items, int sms, int length, int most, int64_t element_cost,
                           int64_t item_cost) {
  auto estimate = [&](int s) {
    const int64_t waves = (items * s + sms - 1) / sms;
    const int64_t part = (length + s - 1) / s;
    return waves * (element_cost * part + item_cost);
  };
  int best = 1;
  for (int s = 2; s <= most; ++s) {
    if (estimate(s) < estimate(best)) best = s;
  }
  return best;
}

}  // namespace cm::sm90
