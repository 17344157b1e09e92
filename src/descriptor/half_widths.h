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

// grid_half_width(f, dt, dy) read from `table` (half_width_table(f)), -1 past it: the host's
// desc::grid_half_width_table. Pre: |dt| < frames, |dy| < rows.
inline int half_width_from(const desc::GridFormula& f, const std::vector<int16_t>& table, int dt,
                           int dy) {
  const int i = desc::grid_half_width_index(f, dt, dy);
  return i < 0 ? -1 : table[static_cast<size_t>(i)];
}

}  // namespace cm::descriptor
