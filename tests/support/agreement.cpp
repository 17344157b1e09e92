// Test-only agreement check (see agreement.h).
#include "agreement.h"

#include "brute_force.h"
#include "descriptor/decode.h"
#include "descriptor/expand_rows.h"
#include "specialize/bind.h"
#include "specialize/evaluator.h"
#include "specialize/rows.h"

#include <utility>

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

// Counts, per pair, the slices that cover it (so 2 shows an overlap), with each slice row's keys
// as compilemask.h states the shapes; "" in `error` unless a slice leaves [0, nq) x [0, nk), has
// a row that sees no key, or is out of order.
std::vector<uint8_t> dense_from_slices(const std::vector<AttnSlice>& slices, const Dims& dims,
                                       std::string& error) {
  std::vector<uint8_t> out(static_cast<size_t>(dims.nq) * static_cast<size_t>(dims.nk), 0);
  for (size_t j = 0; j < slices.size(); ++j) {
    const AttnSlice& s = slices[j];
    const std::string name = "slice " + std::to_string(j);
    if (s.q_begin < 0 || s.q_end > dims.nq || s.q_begin >= s.q_end || s.k_begin < 0 ||
        s.k_end > dims.nk) {
      error = name + " leaves the problem or has no rows";
      return out;
    }
    if (j > 0 && std::pair{slices[j - 1].q_begin, slices[j - 1].k_begin} >=
                     std::pair{s.q_begin, s.k_begin}) {
      error = name + " is not sorted by (q_begin, k_begin)";
      return out;
    }
    const bool moves_end = s.shape == SliceShape::kCausal || s.shape == SliceShape::kBiCausal;
    const bool moves_start =
        s.shape == SliceShape::kInverseCausal || s.shape == SliceShape::kBiCausal;
    const int32_t rows = s.q_end - s.q_begin;
    for (int32_t i = 0; i < rows; ++i) {
      const int32_t lo = s.k_begin + (moves_start ? i : 0);
      const int32_t hi = moves_end ? s.k_end - rows + 1 + i : s.k_end;
      if (lo >= hi) {
        error = name + " has a row that sees no key";
        return out;
      }
      for (int32_t k = lo; k < hi; ++k) ++out[static_cast<size_t>(s.q_begin + i) * dims.nk + k];
    }
  }
  return out;
}

// Mask (b, h) of a block grid, read back pair by pair from its codes and bits; "" in `error`
// unless the grid breaks BlockGrid's rules: a code out of range, a full block the edge cuts, a
// set bit past (nq, nk), or a block coded partial that sees every pair of a whole block or none.
std::vector<uint8_t> dense_from_block_grid(const BlockGrid& grid, const Dims& dims, int32_t b,
                                           int32_t h, std::string& error) {
  std::vector<uint8_t> out(static_cast<size_t>(dims.nq) * static_cast<size_t>(dims.nk), 0);
  const size_t blocks = static_cast<size_t>(grid.q_blocks) * static_cast<size_t>(grid.k_blocks);
  const size_t block_words = static_cast<size_t>(grid.block_q) * grid.words_per_row;
  const auto bitmaps = static_cast<int64_t>(grid.bits.size() / block_words);
  const int32_t instance = grid.instance_of.at(static_cast<size_t>(b) * dims.heads + h);
  for (int32_t i = 0; i < grid.q_blocks; ++i) {
    for (int32_t j = 0; j < grid.k_blocks; ++j) {
      auto name = [&] { return "block (" + std::to_string(i) + ", " + std::to_string(j) + ")"; };
      const int32_t code = grid.codes.at(static_cast<size_t>(instance) * blocks +
                                         static_cast<size_t>(i) * grid.k_blocks + j);
      if (code < 0 || code >= bitmaps) {
        error = name() + " has code " + std::to_string(code);
        return out;
      }
      const bool whole = (i + 1) * grid.block_q <= dims.nq && (j + 1) * grid.block_k <= dims.nk;
      if (code == BlockGrid::kFull && !whole) {
        error = name() + " is full but the edge cuts it";
        return out;
      }
      int64_t seen = 0;
      for (int32_t y = 0; y < grid.block_q; ++y) {
        for (int32_t x = 0; x < grid.block_k; ++x) {
          const uint32_t word =
              grid.bits[static_cast<size_t>(code) * block_words +
                        static_cast<size_t>(y) * grid.words_per_row + static_cast<size_t>(x / 32)];
          if (((word >> (x % 32)) & 1u) == 0) continue;
          const int64_t q = int64_t{i} * grid.block_q + y;
          const int64_t k = int64_t{j} * grid.block_k + x;
          if (q >= dims.nq || k >= dims.nk) {
            if (code == BlockGrid::kFull) continue;  // the full bitmap serves whole blocks only
            error = name() + " sets a bit past the problem";
            return out;
          }
          out[static_cast<size_t>(q * dims.nk + k)] = 1;
          ++seen;
        }
      }
      if (code >= 2 && (seen == 0 || (whole && seen == int64_t{grid.block_q} * grid.block_k))) {
        error = name() + " is coded partial but sees " + std::to_string(seen) + " pairs";
        return out;
      }
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
  const BlockGrid grid = mask.block_grid(params, dims, tiling);
  const Bindings bindings = bind(mask.program(), params, dims);
  const ProgramCode code = compile_program(mask.program());
  for (int32_t b = 0; b < dims.batch; ++b) {
    for (int32_t h = 0; h < dims.heads; ++h) {
      const std::vector<uint8_t> want = brute_force_dense(mask, params, dims, b, h);
      const InstanceRows rows = evaluate_rows(mask.program(), code, bindings, dims, b, h);
      // A path that breaks its own format's rules reports that instead of a difference.
      auto compare = [&](const char* path, const std::vector<uint8_t>& got,
                         const std::string& error) {
        return error.empty() ? first_difference(path, got, want, dims, b, h)
                             : std::string(path) + " at b=" + std::to_string(b) +
                                   " h=" + std::to_string(h) + ": " + error;
      };
      std::string d =
          first_difference("row intervals", dense_from_rows(complete_rows(rows)), want, dims, b, h);
      std::string error;
      if (d.empty()) {
        const std::vector<uint8_t> sliced =
            dense_from_slices(mask.slices(params, dims, b, h), dims, error);
        d = compare("slices", sliced, error);
      }
      if (d.empty()) {
        const std::vector<uint8_t> blocks = dense_from_block_grid(grid, dims, b, h, error);
        d = compare("block grid", blocks, error);
      }
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
