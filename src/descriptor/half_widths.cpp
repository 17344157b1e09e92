// The half-width table of a grid formula (see half_widths.h).
#include "descriptor/half_widths.h"

namespace cm::descriptor {

std::vector<int16_t> half_width_table(const desc::GridFormula& f) {
  std::vector<int16_t> table;
  table.reserve(static_cast<size_t>(desc::grid_table_entries(f)));
  for (int dt = 0; dt <= desc::grid_table_dt_max(f); ++dt) {
    for (int dy = 0; dy <= desc::grid_table_dy_max(f); ++dy) {
      table.push_back(static_cast<int16_t>(desc::grid_half_width(f, dt, dy)));
    }
  }
  return table;
}

}  // namespace cm::descriptor
