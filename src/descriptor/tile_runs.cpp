// Run building, cost, LPT order and transposition (see tile_runs.h).
#include "descriptor/tile_runs.h"

#include <algorithm>
#include <numeric>

namespace cm::descriptor {

void RunFormBuilder::begin_row() {
  desc::TileRow row{};
  row.full_offset = static_cast<uint32_t>(form_.full.size());
  row.partial_offset = static_cast<uint32_t>(form_.partial.size());
  form_.rows.push_back(row);
  full_tiles_ = partial_tiles_ = 0;
  next_full_ = form_.full.size();
}

void RunFormBuilder::add_full(int32_t first, int32_t end) {
  full_tiles_ += end - first;
  if (form_.full.size() > form_.rows.back().full_offset &&
      form_.full.back().first + form_.full.back().count == first) {
    form_.full.back().count = static_cast<uint16_t>(form_.full.back().count + end - first);
  } else {
    form_.full.push_back({static_cast<uint16_t>(first), static_cast<uint16_t>(end - first)});
  }
}

void RunFormBuilder::add_partial(int32_t other, uint32_t pattern) {
  ++partial_tiles_;
  desc::PartialRun* last =
      form_.partial.size() > form_.rows.back().partial_offset ? &form_.partial.back() : nullptr;
  if (last != nullptr && last->pattern == pattern) {
    const int32_t end = last->first + last->count;
    bool joins = end == other;
    if (!joins && other - end <= desc::kMaxSparseGap &&
        table_.patterns()[pattern].kind == desc::kPatternGridSparse) {
      while (next_full_ < form_.full.size() &&
             form_.full[next_full_].first + form_.full[next_full_].count <= end) {
        ++next_full_;
      }
      joins = next_full_ == form_.full.size() || form_.full[next_full_].first >= other;
    }
    if (joins) {
      last->count = static_cast<uint16_t>(other + 1 - last->first);
      return;
    }
  }
  form_.partial.push_back({static_cast<uint16_t>(other), 1, pattern});
}

void RunFormBuilder::end_row() {
  desc::TileRow& row = form_.rows.back();
  row.full_count = static_cast<uint16_t>(form_.full.size() - row.full_offset);
  row.partial_count = static_cast<uint16_t>(form_.partial.size() - row.partial_offset);
  row.cost = kFullTileCost * static_cast<float>(full_tiles_) +
             kPartialTileCost * static_cast<float>(partial_tiles_);
}

RunForm RunFormBuilder::finish() {
  form_.order.resize(form_.rows.size());
  std::iota(form_.order.begin(), form_.order.end(), uint16_t{0});
  std::stable_sort(form_.order.begin(), form_.order.end(),
                   [&](uint16_t a, uint16_t b) { return form_.rows[a].cost > form_.rows[b].cost; });
  return std::move(form_);
}

namespace {

// A full run of the transposed form: key tile n, query tiles [first, first + count).
struct ColumnRun {
  int32_t n;
  int32_t first;
  int32_t count;
};

// The full runs of every key tile, from the change of full coverage between consecutive query
// tiles: a key tile opens a run where it enters coverage and closes it where it leaves.
std::vector<ColumnRun> column_full_runs(const RunForm& forward, int32_t num_k_tiles) {
  std::vector<ColumnRun> runs;
  std::vector<int32_t> opened(static_cast<size_t>(num_k_tiles), 0);
  struct Edge {
    int32_t at;
    int32_t previous;  // +1/-1 where a run of query tile m-1 starts/ends, else 0
    int32_t current;   // the same for query tile m
  };
  std::vector<Edge> edges;
  auto add_edges = [&](int32_t m, bool current) {
    if (m < 0 || m >= static_cast<int32_t>(forward.rows.size())) return;
    const desc::TileRow& row = forward.rows[static_cast<size_t>(m)];
    for (uint32_t i = row.full_offset; i < row.full_offset + row.full_count; ++i) {
      const desc::FullRun& r = forward.full[i];
      edges.push_back(current ? Edge{r.first, 0, 1} : Edge{r.first, 1, 0});
      const int32_t end = r.first + r.count;
      edges.push_back(current ? Edge{end, 0, -1} : Edge{end, -1, 0});
    }
  };
  const auto num_q_tiles = static_cast<int32_t>(forward.rows.size());
  for (int32_t m = 0; m <= num_q_tiles; ++m) {
    edges.clear();
    add_edges(m - 1, false);
    add_edges(m, true);
    std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
    int32_t in_previous = 0, in_current = 0;
    for (size_t i = 0; i + 1 < edges.size(); ++i) {
      in_previous += edges[i].previous;
      in_current += edges[i].current;
      if ((in_previous > 0) == (in_current > 0)) continue;  // coverage unchanged here
      for (int32_t n = edges[i].at; n < edges[i + 1].at; ++n) {
        int32_t& open = opened[static_cast<size_t>(n)];
        if (in_current > 0) {
          open = m;
        } else {
          runs.push_back({n, open, m - open});
        }
      }
    }
  }
  return runs;
}

// Stable counting sort of items by key(item) in [0, buckets); returns bucket starts.
template <class T, class Key>
std::vector<int32_t> bucket_by(std::vector<T>& items, int32_t buckets, Key key) {
  std::vector<int32_t> start(static_cast<size_t>(buckets) + 1, 0);
  for (const T& item : items) ++start[static_cast<size_t>(key(item)) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<T> sorted(items.size());
  std::vector<int32_t> fill(start.begin(), start.end() - 1);
  for (const T& item : items)
    sorted[static_cast<size_t>(fill[static_cast<size_t>(key(item))]++)] = item;
  items.swap(sorted);
  return start;
}

}  // namespace

RunForm transpose_runs(const RunForm& forward, std::span<const PartialTile> partial_tiles,
                       int32_t num_k_tiles, const PatternTable& table) {
  std::vector<ColumnRun> full = column_full_runs(forward, num_k_tiles);
  const std::vector<int32_t> full_start =
      bucket_by(full, num_k_tiles, [](const ColumnRun& r) { return r.n; });
  std::vector<PartialTile> partial(partial_tiles.begin(), partial_tiles.end());
  const std::vector<int32_t> partial_start =
      bucket_by(partial, num_k_tiles, [](const PartialTile& t) { return t.n; });
  RunFormBuilder builder(table);
  for (int32_t n = 0; n < num_k_tiles; ++n) {
    builder.begin_row();
    for (int32_t i = full_start[n]; i < full_start[n + 1]; ++i) {
      const ColumnRun& r = full[static_cast<size_t>(i)];
      builder.add_full(r.first, r.first + r.count);
    }
    for (int32_t i = partial_start[n]; i < partial_start[n + 1]; ++i) {
      builder.add_partial(partial[static_cast<size_t>(i)].m,
                          partial[static_cast<size_t>(i)].pattern);
    }
    builder.end_row();
  }
  return builder.finish();
}

}  // namespace cm::descriptor
