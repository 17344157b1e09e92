// Decodes a descriptor's forward form into padded per-query-tile key lists and tile masks.
#include "tile_lists.h"

#include <compilemask/descriptor.h>

#include <algorithm>
#include <unordered_map>

namespace cm::python {
namespace {

size_t index3(const TileLists& t, int32_t i, int32_t m, int32_t j) {
  return (static_cast<size_t>(i) * static_cast<size_t>(t.q_tiles) + static_cast<size_t>(m)) *
             static_cast<size_t>(t.width) +
         static_cast<size_t>(j);
}

int32_t widest_row(const void* blob, const desc::Header& header) {
  int32_t widest = 1;
  for (int32_t i = 0; i < header.num_instances; ++i) {
    const desc::Instance& inst = desc::instance(blob, i);
    for (int32_t m = 0; m < header.num_q_tiles; ++m) {
      const desc::TileRow& row = desc::q_tile(blob, inst, m);
      int32_t tiles = 0;
      for (int r = 0; r < row.full_count; ++r) tiles += desc::full_runs(blob, row)[r].count;
      for (int r = 0; r < row.partial_count; ++r) {
        const desc::PartialRun& run = desc::partial_runs(blob, row)[r];
        const desc::Pattern& pattern = desc::pattern(blob, run.pattern);
        for (int n = run.first; n < run.first + run.count; ++n) {
          tiles += desc::partial_tile_nonempty(blob, pattern, m, n) ? 1 : 0;
        }
      }
      widest = std::max(widest, tiles);
    }
  }
  return widest;
}

// Appends a tile mask slot and returns its index.
int32_t add_slot(TileLists& t) {
  t.masks.resize(t.masks.size() + static_cast<size_t>(t.tile_m) * static_cast<size_t>(t.tile_n));
  return t.slots++;
}

uint8_t* slot_data(TileLists& t, int32_t slot) {
  return t.masks.data() +
         static_cast<size_t>(slot) * static_cast<size_t>(t.tile_m) * static_cast<size_t>(t.tile_n);
}

void fill_pattern(const void* blob, const desc::Pattern& pattern, int q0, int k0, TileLists& t,
                  int32_t slot) {
  uint8_t* cells = slot_data(t, slot);
  for (int r = 0; r < t.tile_m; ++r) {
    uint8_t* row = cells + static_cast<size_t>(r) * static_cast<size_t>(t.tile_n);
    desc::for_each_pattern_interval(blob, pattern, q0, k0, r,
                                    [&](int lo, int hi) { std::fill(row + lo, row + hi, 1); });
  }
}

}  // namespace

TileLists decode_tile_lists(const void* blob) {
  const desc::Header& header = desc::header(blob);
  TileLists t;
  t.instances = header.num_instances;
  t.q_tiles = header.num_q_tiles;
  t.k_tiles = header.num_k_tiles;
  t.tile_m = header.tile_m;
  t.tile_n = header.tile_n;
  t.width = widest_row(blob, header);
  const size_t entries = static_cast<size_t>(t.instances) * static_cast<size_t>(t.q_tiles) *
                         static_cast<size_t>(t.width);
  t.key_tile.assign(entries, t.k_tiles);
  t.mask_slot.assign(entries, kPadSlot);
  add_slot(t);  // kFullSlot
  add_slot(t);  // kPadSlot, which stays all zero
  std::fill(slot_data(t, kFullSlot), slot_data(t, kPadSlot), 1);

  std::unordered_map<uint32_t, int32_t> slot_of_pattern;
  for (int32_t i = 0; i < t.instances; ++i) {
    const desc::Instance& inst = desc::instance(blob, i);
    for (int32_t m = 0; m < t.q_tiles; ++m) {
      const desc::TileRow& row = desc::q_tile(blob, inst, m);
      int32_t j = 0;
      for (int r = 0; r < row.full_count; ++r) {
        const desc::FullRun& run = desc::full_runs(blob, row)[r];
        for (int n = run.first; n < run.first + run.count; ++n, ++j) {
          t.key_tile[index3(t, i, m, j)] = n;
          t.mask_slot[index3(t, i, m, j)] = kFullSlot;
        }
      }
      for (int r = 0; r < row.partial_count; ++r) {
        const desc::PartialRun& run = desc::partial_runs(blob, row)[r];
        const desc::Pattern& pattern = desc::pattern(blob, run.pattern);
        for (int n = run.first; n < run.first + run.count; ++n) {
          if (!desc::partial_tile_nonempty(blob, pattern, m, n)) continue;  // a sparse-run gap
          int32_t slot = -1;
          if (!desc::is_grid_kind(pattern.kind)) {
            auto [it, inserted] = slot_of_pattern.emplace(run.pattern, t.slots);
            if (inserted) fill_pattern(blob, pattern, 0, 0, t, add_slot(t));
            slot = it->second;
          } else {
            slot = add_slot(t);
            fill_pattern(blob, pattern, m * t.tile_m, n * t.tile_n, t, slot);
          }
          t.key_tile[index3(t, i, m, j)] = n;
          t.mask_slot[index3(t, i, m, j)] = slot;
          ++j;
        }
      }
    }
  }
  return t;
}

}  // namespace cm::python
