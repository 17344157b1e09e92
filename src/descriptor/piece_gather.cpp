// Per-tile piece collection and band fitting (see piece_gather.h).
#include "descriptor/piece_gather.h"

#include <algorithm>

namespace cm::descriptor {

void PieceGatherer::gather(const RowIntervals& rows, int32_t q0, int32_t q1,
                           std::span<const int32_t> partial) {
  if (fitters_.size() < partial.size()) fitters_.resize(partial.size());
  for (size_t i = 0; i < partial.size(); ++i) fitters_[i].reset();
  if (!partial.empty()) {
    const int32_t first_tile = partial.front(), last_partial = partial.back();
    for (int32_t q = q0; q < q1; ++q) {
      auto next = partial.begin();
      for (const Interval* it = rows.row(q); it != rows.row(q + 1) && next != partial.end(); ++it) {
        const auto [lo, hi] = *it;
        const int32_t last_tile = div_(hi - 1);
        if (last_tile < first_tile) continue;
        const int32_t lo_tile = div_(lo);
        if (lo_tile > last_partial) break;
        next = std::lower_bound(next, partial.end(), lo_tile);
        for (auto p = next; p != partial.end() && *p <= last_tile; ++p) {
          const int32_t k0 = *p * tile_n_;
          fitters_[static_cast<size_t>(p - partial.begin())].add(q - q0, std::max(lo - k0, 0),
                                                                 std::min(hi - k0, tile_n_));
        }
      }
    }
  }
  for (size_t i = 0; i < partial.size(); ++i) fitters_[i].finish();
}

void PieceGatherer::pieces_of(const RowIntervals& rows, int32_t q0, int32_t q1, int32_t n,
                              std::vector<RowPiece>& pieces) const {
  pieces.clear();
  const int32_t k0 = n * tile_n_, k1 = k0 + tile_n_;
  for (int32_t q = q0; q < q1; ++q) {
    for (const Interval* it = rows.row(q); it != rows.row(q + 1); ++it) {
      if (it->hi <= k0 || it->lo >= k1) continue;
      pieces.push_back({q - q0, std::max(it->lo - k0, 0), std::min(it->hi - k0, tile_n_)});
    }
  }
}

}  // namespace cm::descriptor
