// The descriptor builder: validates the inputs, stores identical instances once, encodes each
// distinct instance's tiles, and lays out the blob (see build.h and docs/descriptor.md).
#include "descriptor/build.h"

#include "descriptor/blob_writer.h"
#include "descriptor/half_widths.h"
#include "descriptor/hash.h"
#include "descriptor/input_checks.h"
#include "descriptor/instance_tiles.h"
#include "descriptor/pattern_table.h"
#include "descriptor/plan_stats.h"
#include "descriptor/tile_axes.h"
#include "descriptor/tile_runs.h"

#include <cstring>
#include <span>

namespace cm {
namespace {

using descriptor::BlobWriter;
using descriptor::DedupIndex;
using descriptor::RunForm;

uint64_t hash_instance(const InstanceRows& instance) {
  uint64_t h = descriptor::hash_values(instance.all.offsets, 1);
  h = descriptor::hash_values(instance.all.intervals, h);
  h = descriptor::hash_values(instance.formulas, h);
  h = descriptor::hash_values(instance.row_formula, h);
  h = descriptor::hash_values(instance.residual.offsets, h);
  return descriptor::hash_values(instance.residual.intervals, h);
}

// InstanceRows' defaulted operator== is deleted (GridFormula has none), so compare by parts.
bool same_instance(const InstanceRows& a, const InstanceRows& b) {
  return a.all == b.all && a.row_formula == b.row_formula && a.residual == b.residual &&
         a.formulas.size() == b.formulas.size() &&
         (a.formulas.empty() || std::memcmp(a.formulas.data(), b.formulas.data(),
                                            a.formulas.size() * sizeof(desc::GridFormula)) == 0);
}

// distinct[i] is the input index of the i-th distinct instance; remap[j] the distinct index of
// input instance j.
struct DistinctInstances {
  std::vector<size_t> distinct;
  std::vector<int32_t> remap;
};

DistinctInstances find_distinct(const std::vector<InstanceRows>& instances) {
  DistinctInstances out;
  out.remap.resize(instances.size());
  DedupIndex seen;
  for (size_t j = 0; j < instances.size(); ++j) {
    const uint64_t h = instances.size() > 1 ? hash_instance(instances[j]) : 0;
    auto match = static_cast<int32_t>(seen.find(h, [&](int64_t i) {
      return same_instance(instances[out.distinct[static_cast<size_t>(i)]], instances[j]);
    }));
    if (match < 0) {
      match = static_cast<int32_t>(out.distinct.size());
      out.distinct.push_back(j);
      seen.insert(h, match);
    }
    out.remap[j] = match;
  }
  return out;
}

// Places one form's runs and TileRows; returns the TileRow array offset and the order offset.
struct PlacedForm {
  uint32_t rows_offset;
  uint32_t order_offset;
};

PlacedForm place_form(BlobWriter& writer, RunForm form) {
  const uint32_t full = writer.append(std::span<const desc::FullRun>(form.full));
  const uint32_t partial = writer.append(std::span<const desc::PartialRun>(form.partial));
  for (desc::TileRow& row : form.rows) {
    row.full_offset = full + row.full_offset * static_cast<uint32_t>(sizeof(desc::FullRun));
    row.partial_offset =
        partial + row.partial_offset * static_cast<uint32_t>(sizeof(desc::PartialRun));
  }
  const uint32_t rows = writer.append(std::span<const desc::TileRow>(form.rows));
  const uint32_t order = writer.append(std::span<const uint16_t>(form.order));
  return {rows, order};
}

// Appends each formula's half-width table, then the formula table pointing at them; returns
// the formula table's offset.
uint32_t place_formulas(BlobWriter& writer, const std::vector<desc::GridFormula>& formulas) {
  std::vector<desc::GridFormula> placed = formulas;
  for (desc::GridFormula& f : placed) {
    f.half_widths_offset = writer.append(std::span<const int16_t>(descriptor::half_width_table(f)));
  }
  return writer.append(std::span<const desc::GridFormula>(placed));
}

// The checks both building and counting start with; returns nq and nk.
std::pair<int32_t, int32_t> check_inputs(const std::vector<InstanceRows>& instances,
                                         const Tiling& tiling) {
  if (instances.empty()) throw Error("descriptor: at least one mask instance is needed");
  const int32_t nq = instances.front().listed().nq;
  const int32_t nk = instances.front().listed().nk;
  descriptor::check_tiling(tiling, nq, nk);
  for (size_t i = 0; i < instances.size(); ++i) descriptor::check_instance(instances[i], nq, nk, i);
  return {nq, nk};
}

void add_counts(TileCounts& total, const TileCounts& instance) {
  total.full_tiles += instance.full_tiles;
  total.partial_tiles += instance.partial_tiles;
  total.visible_pairs += instance.visible_pairs;
  total.computed_pairs += instance.computed_pairs;
}

}  // namespace

TileCounts count_tiles(const std::vector<InstanceRows>& instances, const Tiling& tiling) {
  check_inputs(instances, tiling);
  const descriptor::TileAxes axes = descriptor::choose_tile_axes(instances, tiling);
  const DistinctInstances unique = find_distinct(instances);
  TileCounts counts;
  for (size_t index : unique.distinct) {
    add_counts(counts, descriptor::count_instance_tiles(instances[index], axes));
  }
  descriptor::complete_counts(counts, static_cast<int64_t>(unique.distinct.size()), axes.q.count(),
                              axes.k.count());
  return counts;
}

std::vector<uint64_t> build_descriptor(const std::vector<InstanceRows>& instances,
                                       const std::vector<int32_t>& instance_map, int32_t batch,
                                       int32_t heads, const Tiling& tiling, PlanStats& stats) {
  const auto [nq, nk] = check_inputs(instances, tiling);
  descriptor::check_instance_map(instance_map, batch, heads, instances.size());

  const descriptor::TileAxes axes = descriptor::choose_tile_axes(instances, tiling);
  const int32_t num_q_tiles = axes.q.count();
  const int32_t num_k_tiles = axes.k.count();
  const DistinctInstances unique = find_distinct(instances);

  descriptor::PatternTable table(tiling.m, tiling.n);
  std::vector<descriptor::EncodedInstance> encoded;
  encoded.reserve(unique.distinct.size());
  for (size_t index : unique.distinct) {
    encoded.push_back(descriptor::encode_instance(instances[index], tiling, axes, table));
  }

  BlobWriter writer;
  const uint32_t header_offset = writer.reserve(sizeof(desc::Header));
  const uint32_t q_starts_offset = writer.append(std::span<const int32_t>(axes.q.starts()));
  const uint32_t k_starts_offset = writer.append(std::span<const int32_t>(axes.k.starts()));
  std::vector<int32_t> map(instance_map.size());
  for (size_t i = 0; i < map.size(); ++i)
    map[i] = unique.remap[static_cast<size_t>(instance_map[i])];
  const uint32_t map_offset = writer.append(std::span<const int32_t>(map));
  const uint32_t instances_offset = writer.reserve(sizeof(desc::Instance) * encoded.size());
  const uint32_t formulas_offset = place_formulas(writer, table.formulas());
  const uint32_t data_offset = writer.append(std::span<const unsigned char>(table.data()));
  std::vector<desc::Pattern> patterns = table.patterns();
  for (desc::Pattern& p : patterns) p.data_offset += data_offset;
  const uint32_t patterns_offset = writer.append(std::span<const desc::Pattern>(patterns));

  TileCounts counts;
  for (size_t i = 0; i < encoded.size(); ++i) {
    const descriptor::EncodedInstance& e = encoded[i];
    const PlacedForm fwd = place_form(writer, e.forward);
    const PlacedForm bwd =
        place_form(writer, descriptor::transpose_runs(e.forward, e.partial, num_k_tiles, table));
    desc::Instance inst{};
    inst.q_tiles_offset = fwd.rows_offset;
    inst.k_tiles_offset = bwd.rows_offset;
    inst.fwd_order_offset = fwd.order_offset;
    inst.bwd_order_offset = bwd.order_offset;
    inst.visible_pairs = static_cast<uint64_t>(e.counts.visible_pairs);
    writer.write(instances_offset + static_cast<uint32_t>(i * sizeof(desc::Instance)), inst);
    add_counts(counts, e.counts);
  }

  desc::Header header{};
  header.magic = desc::kMagic;
  header.version = desc::kVersion;
  header.header_bytes = sizeof(desc::Header);
  header.nq = nq;
  header.nk = nk;
  header.tile_m = tiling.m;
  header.tile_n = tiling.n;
  header.num_q_tiles = num_q_tiles;
  header.num_k_tiles = num_k_tiles;
  header.batch = batch;
  header.heads = heads;
  header.num_instances = static_cast<int32_t>(encoded.size());
  header.num_patterns = static_cast<int32_t>(patterns.size());
  header.num_grid_formulas = static_cast<int32_t>(table.formulas().size());
  header.instance_map_offset = map_offset;
  header.instances_offset = instances_offset;
  header.patterns_offset = patterns_offset;
  header.grid_formulas_offset = formulas_offset;
  header.q_starts_offset = q_starts_offset;
  header.k_starts_offset = k_starts_offset;
  std::vector<uint64_t> blob = writer.finish();
  header.total_bytes = blob.size() * sizeof(uint64_t);
  std::memcpy(reinterpret_cast<unsigned char*>(blob.data()) + header_offset, &header,
              sizeof(header));

  stats = descriptor::plan_stats(header, counts);
  return blob;
}

}  // namespace cm
