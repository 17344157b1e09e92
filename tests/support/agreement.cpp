// Test-only agreement check (see agreement.h).
#include "agreement.h"

#include "brute_force.h"
#include "descriptor/decode.h"
#include "descriptor/expand_rows.h"
#include "specialize/bind.h"
#include "specialize/evaluator.h"
#include "specialize/rows.h"

namespace cm::testing {

namespace {

std::vector<uint8_t> dense_from_rows(const RowIntervals& rows) {
  std::vector<uint8_t> out(static_cast<size_t>(rows.nq) * static_cast<size_t>(rows.nk), 0);
  for (int32_t q = 0; q < rows.nq; ++q) {
    for (int64_t i = 0; i < rows.row_size(q); ++i) {
      const Interval iv = rows.row(q)[i];
      for (int32_t k = iv.lo; k < iv.hi; ++k) out[static_cast<size_t>(q) * rows.nk + k] = 1;
    }
  }
  return out;
}

std::string first_difference(const char* path, const std::vector<uint8_t>& got,
                             const std::vector<uint8_t>& want, const Dims& dims, int32_t b,
                             int32_t h) {
  if (got.size() != want.size()) return std::string(path) + ": wrong size";
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return std::string(path) + " at b=" + std::to_string(b) + " h=" + std::to_string(h) +
             " q=" + std::to_string(static_cast<int64_t>(i) / dims.nk) +
             " k=" + std::to_string(static_cast<int64_t>(i) % dims.nk) + ": got " +
             std::to_string(got[i]) + ", oracle " + std::to_string(want[i]);
    }
  }
  return "";
}

}  // namespace

std::string disagreement(const Mask& mask, const Params& params, const Dims& dims,
                         const Tiling& tiling) {
  const Plan plan = mask.specialize(params, dims, tiling);
  verify_descriptor(plan.blob(), plan.size_bytes());
  if (mask.count_tiles(params, dims, tiling) != static_cast<const TileCounts&>(plan.stats())) {
    return "count_tiles differs from specialize's stats: " + plan.stats().to_json();
  }
  PlanStats built = plan.stats();
  built.build_seconds = 0;
  const PlanStats read = Plan::from_descriptor(plan.blob(), plan.size_bytes()).stats();
  if (read.to_json() != built.to_json()) {
    return "the stats read back from the descriptor, " + read.to_json() + ", differ from " +
           built.to_json();
  }
  const Bindings bindings = bind(mask.program(), params, dims);
  const ProgramCode code = compile_program(mask.program());
  for (int32_t b = 0; b < dims.batch; ++b) {
    for (int32_t h = 0; h < dims.heads; ++h) {
      const std::vector<uint8_t> want = brute_force_dense(mask, params, dims, b, h);
      const InstanceRows rows = evaluate_rows(mask.program(), code, bindings, dims, b, h);
      std::string d =
          first_difference("row intervals", dense_from_rows(complete_rows(rows)), want, dims, b, h);
      if (d.empty()) {
        d = first_difference("descriptor (forward)", decode_dense(plan.blob(), b, h), want, dims, b,
                             h);
      }
      if (d.empty()) {
        d = first_difference("descriptor (transposed)",
                             decode_dense(plan.blob(), b, h, DescriptorForm::kTransposed), want,
                             dims, b, h);
      }
      if (!d.empty()) return d;
    }
  }
  return "";
}

}  // namespace cm::testing
