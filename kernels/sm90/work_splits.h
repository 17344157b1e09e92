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

}  // namespace cm::sm90
