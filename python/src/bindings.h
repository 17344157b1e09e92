// The parts of the compilemask._core module, one registration function per source file.
#pragma once

#include <compilemask/compilemask.h>

#include <nanobind/nanobind.h>

namespace cm::python {

void bind_mask(nanobind::module_& m);       // compile, Mask, specialize (bind_mask.cpp)
void bind_plan(nanobind::module_& m);       // Plan and its inspection (bind_plan.cpp)
void bind_reference(nanobind::module_& m);  // the CPU reference attention (bind_reference.cpp)

// TileCounts as a dict (keys as in PlanStats, plus "tiles", the three classes together); what
// Plan.stats() and Mask.count_tiles() share, and what the estimates read back (bind_plan.cpp).
nanobind::dict tile_counts_dict(const TileCounts& counts);
TileCounts tile_counts_from(const nanobind::dict& counts);

}  // namespace cm::python
