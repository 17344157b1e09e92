// Tile classification by sparse difference arrays (see tile_classify.h).
#include "descriptor/tile_classify.h"

#include <algorithm>

namespace cm::descriptor {

TileRowClassifier::TileRowClassifier(const TileAxis& keys)
    : keys_(keys), num_tiles_(keys.count()), counts_(static_cast<size_t>(num_tiles_) + 1) {}

TileRowClassifier::IntervalTiles TileRowClassifier::tiles_of(int32_t lo, int32_t hi) const {
  IntervalTiles t;
  t.first = keys_.tile_of(lo);
  t.last = keys_.tile_of(hi - 1);
  // Tiles wholly inside [lo, hi).
  const int32_t lo_base = keys_.start(t.first), hi_end = keys_.end(t.last);
  t.cover_first = lo == lo_base ? t.first : t.first + 1;
  t.cover_end = hi == hi_end ? t.last + 1 : t.last;
  // lo keeps first and cover_first inside its tile, off the tile's first key; a lo on that key
  // keeps them alone. Likewise for hi, off and on tile ends.
  t.lo_min = lo == lo_base ? lo : lo_base + 1;
  t.lo_max = lo == lo_base ? lo : keys_.end(t.first) - 1;
  const int32_t hi_base = keys_.start(t.last);
  t.hi_min = hi == hi_end ? hi : hi_base + 1;
  t.hi_max = hi == hi_end ? hi : hi_end - 1;
  return t;
}

int64_t TileRowClassifier::add_rows(const RowIntervals& rows, int32_t q0, int32_t q1) {
  // Consecutive rows whose intervals meet and cover the same tiles (the usual case inside a
  // tile row) bump the difference arrays once, with their count.
  int64_t width = 0;
  int32_t repeats = 0;  // rows with the tiles in pending_
  pending_.clear();
  for (int32_t q = q0; q < q1; ++q) {
    const Interval* it = rows.row(q);
    const auto count = static_cast<size_t>(rows.row_size(q));
    bool same = count == pending_.size();
    for (size_t j = 0; same && j < count; ++j) {
      const IntervalTiles& t = pending_[j];
      same = it[j].lo >= t.lo_min && it[j].lo <= t.lo_max && it[j].hi >= t.hi_min &&
             it[j].hi <= t.hi_max;
    }
    if (same) {
      ++repeats;
    } else {
      flush_pending(repeats);
      pending_.resize(count);
      for (size_t j = 0; j < count; ++j) pending_[j] = tiles_of(it[j].lo, it[j].hi);
      repeats = 1;
    }
    for (size_t j = 0; j < count; ++j) width += it[j].hi - it[j].lo;
  }
  flush_pending(repeats);
  return width;
}

void TileRowClassifier::flush_pending(int32_t repeats) {
  for (const IntervalTiles& t : pending_) {
    bump(&Counts::touch, t.first, repeats);
    bump(&Counts::touch, t.last + 1, -repeats);
    if (t.cover_first < t.cover_end) {
      bump(&Counts::cover, t.cover_first, repeats);
      bump(&Counts::cover, t.cover_end, -repeats);
    }
  }
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
