// Parameter binding: checks user-supplied parameters, dims and tiling against a program's
// declarations and stores them by parameter index for evaluation.
#pragma once

#include <compilemask/compilemask.h>

#include "ir/ir.h"

#include <vector>

namespace cm {

struct Bindings {
  std::vector<int64_t> ints;                 // kInt parameters, by parameter index
  std::vector<std::vector<int64_t>> arrays;  // kIntArray parameters
  std::vector<Segments> segments;            // kSegment / kSegments parameters
};

// Throws cm::Error naming the parameter and the rule when: a parameter is missing, unknown or
// of the wrong kind; an int (an int[] element) is below its declared lower bound; a segment list is
// unsorted, overlapping, has end < start or a negative bound; a `segment` parameter does not hold
// exactly one segment; dims are negative or exceed int32; batch or heads is below 1, or batch *
// heads exceeds kMaxBatchHeads.
Bindings bind(const ir::Program& program, const Params& params, const Dims& dims);

}  // namespace cm
