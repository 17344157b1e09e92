// cm::Mask: specialize binds parameters, evaluates rows once per distinct (b, h) dependence
// and builds the descriptor. It never re-parses or recompiles the program.
#include <compilemask/compilemask.h>

#include "descriptor/block_grid.h"
#include "descriptor/build.h"
#include "descriptor/expand_rows.h"
#include "descriptor/hash.h"
#include "descriptor/input_checks.h"
#include "parallel/parallel_for.h"
#include "specialize/bind.h"
#include "specialize/evaluator.h"
#include "specialize/rows.h"
#include "specialize/slices.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <unordered_map>

namespace cm {

namespace {

uint64_t hash_rows(const InstanceRows& rows) {
  uint64_t h = descriptor::hash_values(rows.all.intervals, 0);
  h = descriptor::hash_values(rows.all.offsets, h);
  return descriptor::hash_values(rows.row_formula, h);
}

// specialize's query_positions: strictly increasing, in [0, nq) (empty: every row).
void check_query_positions(std::span<const int32_t> positions, int64_t nq) {
  auto at = [&](size_t i) {
    return "query_positions[" + std::to_string(i) + "] = " + std::to_string(positions[i]);
  };
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] < 0 || positions[i] >= nq) {
      throw Error(at(i) + " is outside [0, nq) with nq = " + std::to_string(nq));
    }
    if (i > 0 && positions[i] <= positions[i - 1]) {
      throw Error(at(i) + " does not follow " + std::to_string(positions[i - 1]) +
                  "; query positions must be strictly increasing");
    }
  }
}

}  // namespace

// Flattening the row expressions and requirements depends only on the program, so it happens
// once here and every specialize call reuses it.
struct MaskCode {
  ProgramCode code;
};

Mask::Mask(std::shared_ptr<const ir::Program> program)
    : program_(std::move(program)),
      code_(std::make_shared<const MaskCode>(MaskCode{compile_program(*program_)})) {}

const std::string& Mask::name() const {
  return program_->name;
}

std::vector<ParamInfo> Mask::params() const {
  std::vector<ParamInfo> out;
  for (const ir::ParamDecl& p : program_->params) {
    out.push_back({p.name, ir::param_type_name(p.type), ir::param_text(p)});
  }
  return out;
}

struct Mask::Instances {
  std::vector<InstanceRows> rows;
  std::vector<int32_t> map;
};

Mask::Instances Mask::evaluate_instances(const Params& params, const Dims& dims,
                                         const Tiling& tiling,
                                         std::span<const int32_t> query_positions) const {
  const Bindings bindings = bind(*program_, params, dims);
  check_query_positions(query_positions, dims.nq);
  // Before any row is evaluated, so that a shape the descriptor cannot tile fails at once
  // rather than after O(nq) work and memory per (b, h).
  descriptor::check_tiling(tiling, static_cast<int32_t>(dims.nq), static_cast<int32_t>(dims.nk));
  const ProgramCode& code = code_->code;
  // Only the dimensions the mask reads get separate instances.
  const int32_t batches = program_->uses_batch ? dims.batch : 1;
  const int32_t heads = program_->uses_head ? dims.heads : 1;
  Instances out;
  std::unordered_multimap<uint64_t, int32_t> seen;
  const int64_t count = int64_t{batches} * heads;
  std::vector<int32_t> distinct(static_cast<size_t>(count));
  // Instances are evaluated on parallel workers (a per-head or per-batch-row mask at 32K rows
  // takes milliseconds each; workers_for_rows), in chunks of about kRowsPerChunk rows (at least
  // one instance per worker), so that many small instances start few threads and at most a
  // chunk is held beside the distinct instances. Each keeps its own error, and the chunk is
  // deduplicated in (b, h) order: the first failing instance's error is raised, as a sequential
  // loop would.
  constexpr int64_t kRowsPerChunk = int64_t{1} << 20;
  const int64_t rows_each = std::max<int64_t>(dims.nq, 1);
  const int workers = parallel::workers_for_rows(count, rows_each);
  const int64_t chunk_size = std::max<int64_t>(workers, kRowsPerChunk / rows_each);
  for (int64_t first = 0; first < count; first += chunk_size) {
    const auto chunk = static_cast<size_t>(std::min(chunk_size, count - first));
    std::vector<InstanceRows> rows(chunk);
    std::vector<std::exception_ptr> errors(chunk);
    parallel::parallel_for(static_cast<int64_t>(chunk), workers, {}, [&](int64_t i, int) {
      const auto at = static_cast<int32_t>(first + i);
      try {
        InstanceRows all = evaluate_rows(*program_, code, bindings, dims, at / heads, at % heads);
        rows[static_cast<size_t>(i)] =
            query_positions.empty() ? std::move(all) : select_rows(all, query_positions);
      } catch (...) {
        errors[static_cast<size_t>(i)] = std::current_exception();
      }
    });
    for (size_t i = 0; i < chunk; ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      const uint64_t key = hash_rows(rows[i]);
      int32_t index = -1;
      for (auto [it, end] = seen.equal_range(key); it != end && index < 0; ++it) {
        if (out.rows[static_cast<size_t>(it->second)] == rows[i]) index = it->second;
      }
      if (index < 0) {
        index = static_cast<int32_t>(out.rows.size());
        out.rows.push_back(std::move(rows[i]));
        seen.emplace(key, index);
      }
      distinct[static_cast<size_t>(first) + i] = index;
    }
  }
  out.map.resize(static_cast<size_t>(dims.batch) * static_cast<size_t>(dims.heads));
  for (int32_t b = 0; b < dims.batch; ++b) {
    for (int32_t h = 0; h < dims.heads; ++h) {
      const int32_t source = (program_->uses_batch ? b : 0) * heads + (program_->uses_head ? h : 0);
      out.map[static_cast<size_t>(b * dims.heads + h)] = distinct[static_cast<size_t>(source)];
    }
  }
  return out;
}

Plan Mask::specialize(const Params& params, const Dims& dims, const Tiling& tiling,
                      std::span<const int32_t> query_positions) const {
  const auto started = std::chrono::steady_clock::now();
  const Instances instances = evaluate_instances(params, dims, tiling, query_positions);
  PlanStats stats;
  std::vector<uint64_t> blob =
      build_descriptor(instances.rows, instances.map, dims.batch, dims.heads, tiling, stats);
  stats.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  Dims plan_dims = dims;
  if (!query_positions.empty()) plan_dims.nq = static_cast<int64_t>(query_positions.size());
  return Plan(std::move(blob), stats, plan_dims, tiling);
}

BlockGrid Mask::block_grid(const Params& params, const Dims& dims, const Tiling& tiling,
                           std::span<const int32_t> query_positions) const {
  Instances instances = evaluate_instances(params, dims, tiling, query_positions);
  return descriptor::block_grid(instances.rows, std::move(instances.map), tiling);
}

TileCounts Mask::count_tiles(const Params& params, const Dims& dims, const Tiling& tiling,
                             std::span<const int32_t> query_positions) const {
  return cm::count_tiles(evaluate_instances(params, dims, tiling, query_positions).rows, tiling);
}

std::vector<AttnSlice> Mask::slices(const Params& params, const Dims& dims, int32_t b,
                                    int32_t h) const {
  const Bindings bindings = bind(*program_, params, dims);
  descriptor::check_mask_index("slices", b, h, dims.batch, dims.heads);
  const InstanceRows rows = evaluate_rows(*program_, code_->code, bindings, dims, b, h);
  return slices_from_rows(rows.formulas.empty() ? rows.all : complete_rows(rows));
}

}  // namespace cm
