// Visible-column decoding for the reference attention. Partial tiles go through
// desc::for_each_pattern_interval, whose intervals may overlap and come unsorted, so each tile
// row is first marked into a column mask and then read back as runs.
#include "reference/visible_columns.h"

#include <algorithm>

namespace cm::reference {

VisibleColumns::VisibleColumns(const void* blob)
    : blob_(blob), column_mask_(static_cast<size_t>(desc::header(blob).tile_n)) {}

void VisibleColumns::append_tile(const desc::Pattern* pattern, int m, int n, int q) {
  const auto [k0, k1] = desc::k_tile_span(blob_, n);
  const int width = k1 - k0;
  if (pattern == nullptr) {
    intervals_.push_back({k0, k1});
    return;
  }
  std::fill(column_mask_.begin(), column_mask_.end(), uint8_t{0});
  const int q0 = desc::q_tile_span(blob_, m).begin;
  desc::for_each_pattern_interval(blob_, *pattern, q0, k0, q - q0, [&](int lo, int hi) {
    // Cut to the tile's columns: a grid may reach past the tile, a band past nk.
    const int first = std::clamp(lo, 0, width), end = std::clamp(hi, first, width);
    std::fill(column_mask_.begin() + first, column_mask_.begin() + end, uint8_t{1});
  });
  for (int c = 0; c < width;) {
    if (!column_mask_[static_cast<size_t>(c)]) {
      ++c;
      continue;
    }
    const int lo = c;
    while (c < width && column_mask_[static_cast<size_t>(c)]) ++c;
    intervals_.push_back({k0 + lo, k0 + c});
  }
}

const std::vector<Interval>& VisibleColumns::tile(const desc::Pattern* pattern, int m, int n,
                                                  int q) {
  intervals_.clear();
  append_tile(pattern, m, n, q);
  return intervals_;
}

const std::vector<uint8_t>& VisibleColumns::partial_members(const desc::TileRow& tile_row, int m) {
  if (&tile_row == members_row_) return members_nonempty_;
  members_row_ = &tile_row;
  members_nonempty_.clear();
  const desc::PartialRun* partial = desc::partial_runs(blob_, tile_row);
  for (int i = 0; i < tile_row.partial_count; ++i) {
    const desc::Pattern& pattern = desc::pattern(blob_, partial[i].pattern);
    for (int n = partial[i].first; n < partial[i].first + partial[i].count; ++n) {
      members_nonempty_.push_back(desc::partial_tile_nonempty(blob_, pattern, m, n) ? 1 : 0);
    }
  }
  return members_nonempty_;
}

const std::vector<Interval>& VisibleColumns::row(const desc::TileRow& tile_row, int m, int q) {
  intervals_.clear();
  const desc::FullRun* full = desc::full_runs(blob_, tile_row);
  for (int i = 0; i < tile_row.full_count; ++i) {
    for (int n = full[i].first; n < full[i].first + full[i].count; ++n) {
      append_tile(nullptr, m, n, q);
    }
  }
  const std::vector<uint8_t>& nonempty = partial_members(tile_row, m);
  const desc::PartialRun* partial = desc::partial_runs(blob_, tile_row);
  size_t member = 0;
  for (int i = 0; i < tile_row.partial_count; ++i) {
    const desc::Pattern& pattern = desc::pattern(blob_, partial[i].pattern);
    for (int n = partial[i].first; n < partial[i].first + partial[i].count; ++n) {
      if (nonempty[member++]) append_tile(&pattern, m, n, q);
    }
  }
  // Tiles are disjoint, so sorting by start orders the row; merging touching intervals keeps
  // the inner loops long.
  std::sort(intervals_.begin(), intervals_.end(),
            [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  size_t kept = 0;
  for (const Interval& iv : intervals_) {
    if (kept > 0 && intervals_[kept - 1].hi == iv.lo) {
      intervals_[kept - 1].hi = iv.hi;
    } else {
      intervals_[kept++] = iv;
    }
  }
  intervals_.resize(kept);
  return intervals_;
}

}  // namespace cm::reference
