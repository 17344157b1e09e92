// Validation of the descriptor builder's inputs (see input_checks.h).
#include "descriptor/input_checks.h"

#include <cstdint>
#include <string>

namespace cm::descriptor {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw Error("descriptor: " + message);
}

std::string where(size_t instance, const char* part, int32_t row) {
  return "instance " + std::to_string(instance) + " " + part + " row " + std::to_string(row);
}

void check_rows(const RowIntervals& rows, int32_t nq, int32_t nk, size_t index, const char* part) {
  const std::string name = "instance " + std::to_string(index) + " " + part;
  if (rows.nq != nq || rows.nk != nk) {
    fail(name + ": shape " + std::to_string(rows.nq) + "x" + std::to_string(rows.nk) +
         " differs from the problem shape " + std::to_string(nq) + "x" + std::to_string(nk) +
         " (all instances must share nq and nk)");
  }
  if (rows.offsets.size() != static_cast<size_t>(nq) + 1 || rows.offsets.front() != 0 ||
      rows.offsets.back() != static_cast<int64_t>(rows.intervals.size())) {
    fail(name + ": offsets must have nq + 1 entries from 0 to the number of intervals");
  }
  for (int32_t q = 0; q < nq; ++q) {
    if (rows.offsets[q + 1] < rows.offsets[q]) fail(where(index, part, q) + ": offsets decrease");
    int32_t previous_hi = -1;
    for (const Interval* it = rows.row(q); it != rows.row(q) + rows.row_size(q); ++it) {
      if (it->lo < 0 || it->hi > nk || it->lo >= it->hi) {
        fail(where(index, part, q) + ": interval [" + std::to_string(it->lo) + ", " +
             std::to_string(it->hi) + ") must be non-empty and inside [0, nk)");
      }
      if (it->lo <= previous_hi) {
        fail(where(index, part, q) + ": intervals must be sorted, disjoint and non-adjacent");
      }
      previous_hi = it->hi;
    }
  }
}

}  // namespace

void check_tiling(const Tiling& tiling, int32_t nq, int32_t nk) {
  for (const auto& [name, size, limit] :
       {std::tuple{"m", tiling.m, desc::kMaxTileM}, std::tuple{"n", tiling.n, desc::kMaxTileN}}) {
    if (size < 16 || size > limit || size % 16 != 0) {
      fail(std::string("tile ") + name + " = " + std::to_string(size) +
           " must be a multiple of 16 in [16, " + std::to_string(limit) + "]");
    }
  }
  if (nq < 0 || nk < 0) fail("nq and nk must be >= 0");
  const int64_t q_tiles = (int64_t{nq} + tiling.m - 1) / tiling.m;
  const int64_t k_tiles = (int64_t{nk} + tiling.n - 1) / tiling.n;
  if (q_tiles > desc::kMaxTiles || k_tiles > desc::kMaxTiles) {
    fail("the tiling gives " + std::to_string(q_tiles) + " x " + std::to_string(k_tiles) +
         " tiles; at most " + std::to_string(desc::kMaxTiles) + " per axis are allowed");
  }
}

void check_instance(const InstanceRows& instance, int32_t nq, int32_t nk, size_t index) {
  if (instance.formulas.empty()) {
    check_rows(instance.all, nq, nk, index, "all");
    if (!instance.row_formula.empty()) {
      fail("instance " + std::to_string(index) + ": row_formula must be empty without formulas");
    }
    return;
  }
  if (instance.row_formula.size() != static_cast<size_t>(nq)) {
    fail("instance " + std::to_string(index) + ": row_formula must have nq entries");
  }
  check_rows(instance.residual, nq, nk, index, "residual");
  const auto count = static_cast<int32_t>(instance.formulas.size());
  for (int32_t q = 0; q < nq; ++q) {
    const int32_t f = instance.row_formula[q];
    if (f < -1 || f >= count) {
      fail(where(index, "row_formula", q) + ": formula index " + std::to_string(f) +
           " must be -1 or below " + std::to_string(count));
    }
  }
  for (size_t i = 0; i < instance.formulas.size(); ++i) {
    const std::string problem = grid_formula_problem(instance.formulas[i], nq);
    if (!problem.empty()) {
      fail("instance " + std::to_string(index) + " formula " + std::to_string(i) + ": " + problem);
    }
  }
}

std::string grid_formula_problem(const desc::GridFormula& f, int32_t nq) {
  if (f.frames < 1 || f.rows < 1 || f.cols < 1) return "grid extents must be >= 1";
  // Readers compute token positions on the grids in int32. A grid may reach past nq or nk:
  // its tokens there do not exist and are never visible.
  const int64_t plane = int64_t{f.rows} * f.cols;  // products of two int32 fit int64
  const int64_t extent = plane > INT32_MAX ? plane : plane * f.frames;
  if (extent > INT32_MAX || f.start < 0 || f.start + extent > INT32_MAX || f.center_start < 0 ||
      f.center_start + extent > INT32_MAX) {
    return "the key grid [start, start + frames * rows * cols) and the query grid "
           "[center_start, center_start + frames * rows * cols) must lie in [0, 2^31)";
  }
  if (f.q_lo < 0 || f.q_lo > f.q_hi || f.q_hi > nq) {
    return "the query rows [q_lo, q_hi) must lie in [0, nq]";
  }
  if (f.strip < 1 || f.strip > f.cols) return "strip must be in [1, cols]";
  if (f.shape != desc::kShapeBox && f.shape != desc::kShapeEllipse) {
    return "shape must be box (0) or ellipse (1)";
  }
  const int32_t min_radius = f.shape == desc::kShapeEllipse ? 1 : 0;
  if (f.rt < min_radius || f.ry < min_radius || f.rx < min_radius) {
    return "radii must be >= " + std::to_string(min_radius);
  }
  // Keeps the ellipse test (products of six radii) inside 64-bit integers.
  if (f.rt > desc::kMaxGridRadius || f.ry > desc::kMaxGridRadius || f.rx > desc::kMaxGridRadius) {
    return "radii must be <= " + std::to_string(desc::kMaxGridRadius);
  }
  return "";
}

void check_mask_index(const std::string& where, int32_t b, int32_t h, int32_t batch,
                      int32_t heads) {
  if (b < 0 || b >= batch) {
    throw Error(where + ": b " + std::to_string(b) + " must be in [0, batch " +
                std::to_string(batch) + ")");
  }
  if (h < 0 || h >= heads) {
    throw Error(where + ": h " + std::to_string(h) + " must be in [0, heads " +
                std::to_string(heads) + ")");
  }
}

void check_instance_map(const std::vector<int32_t>& instance_map, int32_t batch, int32_t heads,
                        size_t num_instances) {
  if (batch < 1 || heads < 1) fail("batch and heads must be >= 1");
  if (instance_map.size() != static_cast<size_t>(batch) * static_cast<size_t>(heads)) {
    fail("instance_map must have batch * heads = " + std::to_string(int64_t{batch} * heads) +
         " entries");
  }
  for (size_t i = 0; i < instance_map.size(); ++i) {
    if (instance_map[i] < 0 || static_cast<size_t>(instance_map[i]) >= num_instances) {
      fail("instance_map[" + std::to_string(i) + "] = " + std::to_string(instance_map[i]) +
           " is not an instance index below " + std::to_string(num_instances));
    }
  }
}

}  // namespace cm::descriptor
