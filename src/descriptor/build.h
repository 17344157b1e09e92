// Builds the descriptor blob (include/compilemask/descriptor.h) from concrete row intervals.
#pragma once

#include <compilemask/compilemask.h>

#include "specialize/row_intervals.h"

#include <cstdint>
#include <vector>

namespace cm {

// Preconditions: every instance has the same nq and nk; instance_map has batch*heads entries,
// each a valid index into `instances`; tiling fits the limits in descriptor.h.
// Postconditions: the returned blob (8-byte aligned storage) decodes, through the accessors of
// descriptor.h, to exactly the visible sets of `instances`, in both the forward and transposed
// forms. Fills every field of `stats` except build_seconds.
// Cost: O(rows + intervals + tiles touched); no per-(q, k) work except for bitmap patterns.
std::vector<uint64_t> build_descriptor(const std::vector<InstanceRows>& instances,
                                       const std::vector<int32_t>& instance_map, int32_t batch,
                                       int32_t heads, const Tiling& tiling, PlanStats& stats);

// Preconditions: as for build_descriptor. Postconditions: the counts build_descriptor puts in
// its stats for the same instances and tiling. Cost: the classification alone, without
// patterns, runs or the transposed form.
TileCounts count_tiles(const std::vector<InstanceRows>& instances, const Tiling& tiling);

}  // namespace cm
