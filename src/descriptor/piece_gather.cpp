// Per-tile piece collection (see piece_gather.h).
#include "descriptor/piece_gather.h"

#include <algorithm>

namespace cm::descriptor {

void PieceGatherer::gather(const RowIntervals& rows, int32_t q0, int32_t q1,
                           std::span<const int32_t> partial) {
  if (slots_.size() < partial.size()) slots_.resize(partial.size());
  for (size_t i = 0; i < partial.size(); ++i) slots_[i].clear();
  for (int32_t q = q0; q < q1; ++q) {
    const Interval* row = rows.row(q);
    const int64_t count = rows.row_size(q);
    auto next = partial.begin();
    for (int64_t i = 0; i < count && next != partial.end(); ++i) {
      const auto [lo, hi] = row[i];
      next = std::lower_bound(next, partial.end(), lo / tile_n_);
      const int32_t last_tile = (hi - 1) / tile_n_;
      for (auto it = next; it != partial.end() && *it <= last_tile; ++it) {
        const int32_t k0 = *it * tile_n_;
        slots_[static_cast<size_t>(it - partial.begin())].push_back(
            RowPiece{q - q0, std::max(lo - k0, 0), std::min(hi - k0, tile_n_)});
      }
    }
  }
}

}  // namespace cm::descriptor
