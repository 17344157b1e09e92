// Run building, cost, LPT order and transposition (see tile_runs.h).
#include "descriptor/tile_runs.h"

#include <algorithm>
#include <numeric>

namespace cm::descriptor {

RunForm make_runs(const TileLists& lists) {
  RunForm form;
  const size_t num_major = lists.start.size() - 1;
  form.rows.resize(num_major);
  for (size_t t = 0; t < num_major; ++t) {
    desc::TileRow& row = form.rows[t];
    row.full_offset = static_cast<uint32_t>(form.full.size());
    row.partial_offset = static_cast<uint32_t>(form.partial.size());
    int32_t full_tiles = 0, partial_tiles = 0;
    for (int32_t i = lists.start[t]; i < lists.start[t + 1]; ++i) {
      const TileEntry& e = lists.entries[static_cast<size_t>(i)];
      const auto other = static_cast<uint16_t>(e.other);
      if (e.pattern == kFullTile) {
        ++full_tiles;
        if (form.full.size() > row.full_offset &&
            form.full.back().first + form.full.back().count == other) {
          ++form.full.back().count;
        } else {
          form.full.push_back({other, 1});
        }
      } else {
        ++partial_tiles;
        desc::PartialRun* last =
            form.partial.size() > row.partial_offset ? &form.partial.back() : nullptr;
        if (last != nullptr && last->pattern == e.pattern && last->first + last->count == other) {
          ++last->count;
        } else {
          form.partial.push_back({other, 1, e.pattern});
        }
      }
    }
    row.full_count = static_cast<uint16_t>(form.full.size() - row.full_offset);
    row.partial_count = static_cast<uint16_t>(form.partial.size() - row.partial_offset);
    row.cost = kFullTileCost * static_cast<float>(full_tiles) +
               kPartialTileCost * static_cast<float>(partial_tiles);
  }
  form.order.resize(num_major);
  std::iota(form.order.begin(), form.order.end(), uint16_t{0});
  std::stable_sort(form.order.begin(), form.order.end(),
                   [&](uint16_t a, uint16_t b) { return form.rows[a].cost > form.rows[b].cost; });
  return form;
}

TileLists transpose(const TileLists& lists, int32_t num_other) {
  TileLists out;
  out.start.assign(static_cast<size_t>(num_other) + 1, 0);
  for (const TileEntry& e : lists.entries) ++out.start[static_cast<size_t>(e.other) + 1];
  std::partial_sum(out.start.begin(), out.start.end(), out.start.begin());
  out.entries.resize(lists.entries.size());
  std::vector<int32_t> fill(out.start.begin(), out.start.end() - 1);
  const auto num_major = static_cast<int32_t>(lists.start.size()) - 1;
  for (int32_t t = 0; t < num_major; ++t) {
    for (int32_t i = lists.start[t]; i < lists.start[t + 1]; ++i) {
      const TileEntry& e = lists.entries[static_cast<size_t>(i)];
      out.entries[static_cast<size_t>(fill[e.other]++)] = {t, e.pattern};
    }
  }
  return out;
}

}  // namespace cm::descriptor
