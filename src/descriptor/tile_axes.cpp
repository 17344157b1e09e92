// Tile axes with restarts at block boundaries (see tile_axes.h).
#include "descriptor/tile_axes.h"

#include <compilemask/descriptor.h>

#include <algorithm>
#include <limits>

namespace cm::descriptor {
namespace {

// Appends the starts of uniform tiles of `size` tokens from `from` up to `to` (exclusive).
void append_uniform(std::vector<int32_t>& starts, int32_t from, int32_t to, int32_t size) {
  for (int32_t s = from; s < to; s += size) starts.push_back(s);
}

}  // namespace

TileAxis::TileAxis(std::vector<int32_t> starts, int32_t size)
    : starts_(std::move(starts)), div_(desc::divisor(size)) {
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
  append_uniform(starts, 0, length, size);
  starts.push_back(length);
  return TileAxis(std::move(starts), size);
}

namespace {

// Clears is_boundary[c], c in [1, n), where one instance's rows cross c: a row at or above c
// (rows >= n included) sees a key below c, or a row below c a key at or above c. Rows are
// walked up from the last, keeping the smallest key seen: once it is 0, no c >= 1 is left
// (causal, shared prefixes: one row). Then down from the first row, keeping the largest key,
// only as far as the last c still marked. Returns that c (0: none is left).
int32_t mark_boundaries(const RowIntervals& rows, int32_t n, std::vector<uint8_t>& is_boundary) {
  const int64_t* offsets = rows.offsets.data();
  const Interval* intervals = rows.intervals.data();
  const auto has_keys = [&](int32_t q) { return offsets[q + 1] > offsets[q]; };
  int32_t lowest = std::numeric_limits<int32_t>::max();  // the smallest key seen from row q on
  int32_t last_marked = 0;
  int32_t q = rows.nq - 1;
  for (; q >= 1 && lowest > 0; --q) {
    if (has_keys(q)) lowest = std::min(lowest, intervals[offsets[q]].lo);
    if (q >= n) continue;
    uint8_t& mark = is_boundary[static_cast<size_t>(q)];
    mark &= static_cast<uint8_t>(lowest >= q);
    if (mark && last_marked == 0) last_marked = q;
  }
  for (int32_t c = std::min(q, n - 1); c >= 1; --c) {  // the rows the walk did not reach
    is_boundary[static_cast<size_t>(c)] = 0;
  }
  int32_t reach = 0;  // the largest key + 1 seen by a row below c
  for (int32_t c = 0; c < last_marked; ++c) {
    if (has_keys(c)) reach = std::max(reach, intervals[offsets[c + 1] - 1].hi);
    is_boundary[static_cast<size_t>(c) + 1] &= static_cast<uint8_t>(reach <= c + 1);
  }
  return last_marked;
}

}  // namespace

TileAxes choose_tile_axes(const std::vector<InstanceRows>& instances, const Tiling& tiling) {
  const int32_t nq = instances.front().listed().nq, nk = instances.front().listed().nk;
  TileAxes uniform{TileAxis::uniform(nq, tiling.m), TileAxis::uniform(nk, tiling.n)};
  const int32_t n = std::min(nq, nk);
  std::vector<uint8_t> is_boundary(static_cast<size_t>(std::max(n, 0)), 1);
  int32_t last = n - 1;  // the last c that may still be a boundary
  for (const InstanceRows& instance : instances) {
    if (!instance.formulas.empty()) return uniform;
    last = std::min(last, mark_boundaries(instance.all, n, is_boundary));
  }
  if (last < 1) return uniform;
  std::vector<int32_t> q_starts, k_starts;
  const int32_t min_gap = kMinTilesBetweenRestarts * std::max(tiling.m, tiling.n);
  int32_t run = 0;  // where the current uniform tiles started
  const auto add_run = [&](int32_t end) {
    append_uniform(q_starts, run, std::min(end, nq), tiling.m);
    append_uniform(k_starts, run, std::min(end, nk), tiling.n);
  };
  for (int32_t c = 1; c <= last; ++c) {
    if (!is_boundary[static_cast<size_t>(c)] || c - run < min_gap) continue;
    if ((c - run) % tiling.m == 0 && (c - run) % tiling.n == 0) continue;  // already a start
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
