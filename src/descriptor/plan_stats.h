// PlanStats from what a descriptor fixes: the stats the builder reports for the descriptor it
// writes, and the same stats read back from a descriptor alone (Plan::from_descriptor).
#pragma once

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include <cstdint>

namespace cm::descriptor {

// Post: counts.instances = instances, and counts.empty_tiles the rest of the instances x
// q_tiles x k_tiles tiles after its full and partial ones.
void complete_counts(TileCounts& counts, int64_t instances, int64_t q_tiles, int64_t k_tiles);

// Pre: header complete (total_bytes included); counts holds the full and partial tiles and the
// visible and computed pairs summed over the descriptor's distinct masks. Post: the plan's
// stats, build_seconds 0.
PlanStats plan_stats(const desc::Header& header, TileCounts counts);

// Pre: blob passed verify_descriptor. Post: plan_stats of its header and of the counts its
// forward form lists: what its builder reported, but build_seconds (0).
PlanStats read_plan_stats(const void* blob);

}  // namespace cm::descriptor
