// Tile axes with restarts at block boundaries (see tile_axes.h).
#include "descriptor/tile_axes.h"

#include <compilemask/descriptor.h>

#include <algorithm>
#include <limits>

namespace cm::descriptor {

TileAxis::TileAxis(std::vector<int32_t> starts, int32_t size)
    : starts_(std::move(starts)), div_(size) {
  const int32_t windows = (length() + size - 1) / size;
  window_tile_.resize(static_cast<size_t>(windows));
  int32_t t = 0;
  for (int32_t w = 0; w < windows; ++w) {
    while (end(t) <= w * size) ++t;
    window_tile_[static_cast<size_t>(w)] = t;
  }
}

TileAxis TileAxis::uniform(int32_t length, int32_t size) {
  std::vector<int32_t> starts;
  for (int32_t s = 0; s < length; s += size) starts.push_back(s);
  starts.push_back(length);
  return TileAxis(std::move(starts), size);
}

namespace {

// is_boundary[c] for c in [0, n): whether rows and keys split at c as in choose_tile_axes,
// for one instance's rows (n = min(nq, nk)).
void mark_boundaries(const RowIntervals& rows, int32_t n, std::vector<uint8_t>& is_boundary) {
  // below[c]: the largest key + 1 seen by a row < c; at_or_above[c]: the smallest key seen by
  // a row >= c (rows >= n included, since they must not see keys below c either).
  std::vector<int32_t> below(static_cast<size_t>(n) + 1, 0);
  for (int32_t q = 0; q < n; ++q) {
    const int32_t hi = rows.row_size(q) > 0 ? rows.row(q)[rows.row_size(q) - 1].hi : 0;
    below[static_cast<size_t>(q) + 1] = std::max(below[static_cast<size_t>(q)], hi);
  }
  int32_t lowest = std::numeric_limits<int32_t>::max();
  for (int32_t q = rows.nq - 1; q >= 1; --q) {
    if (rows.row_size(q) > 0) lowest = std::min(lowest, rows.row(q)[0].lo);
    if (q < n && (below[static_cast<size_t>(q)] > q || lowest < q))
      is_boundary[static_cast<size_t>(q)] = 0;
  }
}

}  // namespace

TileAxes choose_tile_axes(const std::vector<InstanceRows>& instances, const Tiling& tiling) {
  const int32_t nq = instances.front().listed().nq, nk = instances.front().listed().nk;
  TileAxes uniform{TileAxis::uniform(nq, tiling.m), TileAxis::uniform(nk, tiling.n)};
  const int32_t n = std::min(nq, nk);
  std::vector<uint8_t> is_boundary(static_cast<size_t>(std::max(n, 0)), 1);
  for (const InstanceRows& instance : instances) {
    if (!instance.formulas.empty()) return uniform;
    mark_boundaries(instance.all, n, is_boundary);
  }
  std::vector<int32_t> q_starts, k_starts;
  const int32_t min_gap = kMinTilesBetweenRestarts * std::max(tiling.m, tiling.n);
  int32_t run = 0;  // where the current uniform tiles started
  const auto add_run = [&](int32_t end) {
    for (int32_t s = run; s < std::min(end, nq); s += tiling.m) q_starts.push_back(s);
    for (int32_t s = run; s < std::min(end, nk); s += tiling.n) k_starts.push_back(s);
  };
  for (int32_t c = 1; c < n; ++c) {
    const bool aligned = (c - run) % tiling.m == 0 && (c - run) % tiling.n == 0;
    if (!is_boundary[static_cast<size_t>(c)] || aligned || c - run < min_gap) continue;
    add_run(c);
    run = c;
  }
  add_run(std::max(nq, nk));
  q_starts.push_back(nq);
  k_starts.push_back(nk);
  if (q_starts.size() > static_cast<size_t>(desc::kMaxTiles) + 1 ||
      k_starts.size() > static_cast<size_t>(desc::kMaxTiles) + 1) {
    return uniform;
  }
  return {TileAxis(std::move(q_starts), tiling.m), TileAxis(std::move(k_starts), tiling.n)};
}

}  // namespace cm::descriptor
