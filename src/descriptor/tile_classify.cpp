// Tile classification by sparse difference arrays (see tile_classify.h).
#include "descriptor/tile_classify.h"

#include <algorithm>

namespace cm::descriptor {

TileRowClassifier::TileRowClassifier(int32_t nk, int32_t tile_n)
    : nk_(nk),
      tile_n_(tile_n),
      div_(tile_n),
      num_tiles_((nk + tile_n - 1) / tile_n),
      counts_(static_cast<size_t>(num_tiles_) + 1) {}

int64_t TileRowClassifier::add_rows(const RowIntervals& rows, int32_t q0, int32_t q1) {
  int64_t width = 0;
  const Interval* it = rows.row(q0);
  const Interval* end = rows.row(q1);
  for (; it != end; ++it) {
    const auto [lo, hi] = *it;
    width += hi - lo;
    const int32_t first = div_(lo);
    const int32_t last = div_(hi - 1);
    bump(&Counts::touch, first, 1);
    bump(&Counts::touch, last + 1, -1);
    // Tiles wholly inside [lo, hi); the last tile is clipped to nk.
    const int32_t cover_first = div_(lo + tile_n_ - 1);
    const int32_t cover_end = hi == nk_ ? num_tiles_ : div_(hi);
    if (cover_first < cover_end) {
      bump(&Counts::cover, cover_first, 1);
      bump(&Counts::cover, cover_end, -1);
    }
  }
  return width;
}

void TileRowClassifier::finish(int32_t num_rows, std::vector<TileSegment>& segments) {
  segments.clear();
  std::sort(changed_.begin(), changed_.end());
  int32_t touching = 0, covering = 0, reaching = 0;
  for (size_t i = 0; i < changed_.size(); ++i) {
    Counts& c = counts_[static_cast<size_t>(changed_[i])];
    touching += c.touch;
    covering += c.cover;
    reaching += c.formula;
    c = Counts{};
    const int32_t end = i + 1 < changed_.size() ? changed_[i + 1] : num_tiles_;
    if (changed_[i] >= end || (touching == 0 && reaching == 0)) continue;
    // Disjoint intervals of one row never both cover a tile, so a tile is covered by every
    // row exactly when its cover count equals the number of rows.
    const TileSegment s{changed_[i], end, touching > 0, covering == num_rows, reaching > 0};
    if (!segments.empty() && segments.back().end == s.first &&
        segments.back().listed_touch == s.listed_touch &&
        segments.back().listed_full == s.listed_full &&
        segments.back().formula_touch == s.formula_touch) {
      segments.back().end = end;
    } else {
      segments.push_back(s);
    }
  }
  changed_.clear();
}

}  // namespace cm::descriptor
