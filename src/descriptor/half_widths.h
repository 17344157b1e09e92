// The half-width table of a grid formula (docs/descriptor.md, "Half-width table"): what the
// builder writes into the blob and what the verifier expects to find there.
#pragma once

#include <compilemask/descriptor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cm::descriptor {

// Pre: f valid (input_checks.h). Post: grid_table_entries(f) values, entry
// |dt| * (grid_table_dy_max(f) + 1) + |dy| holding grid_half_width(f, dt, dy).
std::vector<int16_t> half_width_table(const desc::GridFormula& f);

}  // namespace cm::descriptor
