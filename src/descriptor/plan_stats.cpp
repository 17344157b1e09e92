// PlanStats from a descriptor's header and tile counts (see plan_stats.h).
#include "descriptor/plan_stats.h"

#include "descriptor/decode.h"

namespace cm::descriptor {

void complete_counts(TileCounts& counts, int64_t instances, int64_t q_tiles, int64_t k_tiles) {
  counts.instances = static_cast<int32_t>(instances);
  counts.empty_tiles = q_tiles * k_tiles * instances - counts.full_tiles - counts.partial_tiles;
}

PlanStats plan_stats(const desc::Header& header, TileCounts counts) {
  complete_counts(counts, header.num_instances, header.num_q_tiles, header.num_k_tiles);
  PlanStats stats;
  static_cast<TileCounts&>(stats) = counts;
  stats.bytes = static_cast<int64_t>(header.total_bytes);
  stats.patterns = header.num_patterns;
  stats.grid_formulas = header.num_grid_formulas;
  const double area = static_cast<double>(header.nq) * static_cast<double>(header.nk) *
                      static_cast<double>(header.num_instances);
  stats.density = area > 0 ? static_cast<double>(counts.visible_pairs) / area : 0.0;
  return stats;
}

PlanStats read_plan_stats(const void* blob) {
  const desc::Header& hd = desc::header(blob);
  TileCounts counts;
  for (int32_t i = 0; i < hd.num_instances; ++i) {
    const desc::Instance& inst = desc::instance(blob, i);
    counts.visible_pairs += static_cast<int64_t>(inst.visible_pairs);
    for (int32_t m = 0; m < hd.num_q_tiles; ++m) {
      const desc::TileRow& row = desc::q_tile(blob, inst, m);
      const int64_t height = desc::q_tile_span(blob, m).size();
      for_each_listed_tile(blob, row, m, DescriptorForm::kForward,
                           [&](int32_t, int32_t n, int64_t pattern) {
                             ++(pattern == kFullTile ? counts.full_tiles : counts.partial_tiles);
                             counts.computed_pairs += height * desc::k_tile_span(blob, n).size();
                           });
    }
  }
  return plan_stats(hd, counts);
}

}  // namespace cm::descriptor
