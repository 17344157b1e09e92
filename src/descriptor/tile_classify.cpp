// Tile classification by difference arrays (see tile_classify.h).
#include "descriptor/tile_classify.h"

#include <algorithm>

namespace cm::descriptor {

TileRowClassifier::TileRowClassifier(int32_t nk, int32_t tile_n)
    : nk_(nk),
      tile_n_(tile_n),
      num_tiles_((nk + tile_n - 1) / tile_n),
      touch_(static_cast<size_t>(num_tiles_) + 1, 0),
      cover_(static_cast<size_t>(num_tiles_) + 1, 0) {}

void TileRowClassifier::classify(const RowIntervals& rows, int32_t q0, int32_t q1,
                                 std::vector<int32_t>& full, std::vector<int32_t>& partial) {
  full.clear();
  partial.clear();
  int32_t span_lo = num_tiles_;
  int32_t span_hi = 0;
  for (int32_t q = q0; q < q1; ++q) {
    const Interval* row = rows.row(q);
    const int64_t count = rows.row_size(q);
    for (int64_t i = 0; i < count; ++i) {
      const auto [lo, hi] = row[i];
      const int32_t first = lo / tile_n_;
      const int32_t last = (hi - 1) / tile_n_;
      ++touch_[first];
      --touch_[last + 1];
      span_lo = std::min(span_lo, first);
      span_hi = std::max(span_hi, last + 1);
      // Tiles wholly inside [lo, hi); the last tile is clipped to nk.
      const int32_t cover_first = (lo + tile_n_ - 1) / tile_n_;
      const int32_t cover_end = hi == nk_ ? num_tiles_ : hi / tile_n_;
      if (cover_first < cover_end) {
        ++cover_[cover_first];
        --cover_[cover_end];
      }
    }
  }
  // Disjoint intervals of one row never both cover a tile, so a tile is full exactly when its
  // cover count equals the number of rows.
  const int32_t num_rows = q1 - q0;
  int32_t touching = 0;
  int32_t covering = 0;
  for (int32_t n = span_lo; n <= span_hi && n <= num_tiles_; ++n) {
    touching += touch_[n];
    covering += cover_[n];
    touch_[n] = 0;
    cover_[n] = 0;
    if (n == num_tiles_ || touching == 0) continue;
    (covering == num_rows ? full : partial).push_back(n);
  }
}

}  // namespace cm::descriptor
