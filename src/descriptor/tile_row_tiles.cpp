// Tile classification of query tile rows (see tile_row_tiles.h).
#include "descriptor/tile_row_tiles.h"

#include "descriptor/expand_rows.h"

#include <algorithm>

namespace cm::descriptor {
namespace {

// The formula a kernel may evaluate for every row of [q0, q1), or -1. Valid when some row
// carries formula f, every row the formula reaches carries f, and every other row carries -1
// (so the formula adds nothing to it).
int32_t tile_row_formula(const InstanceRows& instance, int32_t q0, int32_t q1) {
  if (instance.formulas.empty()) return -1;
  const auto first =
      std::find_if(instance.row_formula.begin() + q0, instance.row_formula.begin() + q1,
                   [](int32_t f) { return f >= 0; });
  if (first == instance.row_formula.begin() + q1) return -1;
  const int32_t f = *first;
  const desc::GridFormula& formula = instance.formulas[static_cast<size_t>(f)];
  for (int32_t q = q0; q < q1; ++q) {
    const int32_t carried = instance.row_formula[q];
    if (carried == f) continue;
    if (carried != -1 || desc::grid_has_center(formula, q)) return -1;
  }
  return f;
}

bool any_row_formula(const InstanceRows& instance, int32_t q0, int32_t q1) {
  return !instance.formulas.empty() &&
         std::any_of(instance.row_formula.begin() + q0, instance.row_formula.begin() + q1,
                     [](int32_t f) { return f >= 0; });
}

// True if a row of [q0, q1) carrying formula f lists a key on f's grid. The closed-form path
// needs listed and formula keys disjoint, so that pair counts add up and coverage splits.
bool lists_grid_keys(const InstanceRows& instance, int32_t f, int32_t q0, int32_t q1) {
  const desc::GridFormula& formula = instance.formulas[static_cast<size_t>(f)];
  const int64_t start = formula.start;
  const int64_t end = start + int64_t{formula.frames} * formula.rows * formula.cols;
  const RowIntervals& listed = instance.listed();
  for (int32_t q = q0; q < q1; ++q) {
    if (instance.row_formula[q] != f) continue;
    for (const Interval* it = listed.row(q); it != listed.row(q + 1); ++it) {
      if (it->lo < end && it->hi > start) return true;
    }
  }
  return false;
}

// True if every row of [q0, q1) sees all of [k0, k1) through its listed keys and formula f
// (for the rows carrying it). Stops at the first row that does not, trying the last row second:
// where neighbourhoods fall short of a tile, the rows farthest from it, at either end, do.
bool tile_fully_visible(const InstanceRows& instance, int32_t f, int32_t q0, int32_t q1, int32_t k0,
                        int32_t k1, std::vector<Interval>& scratch) {
  const RowIntervals& listed = instance.listed();
  for (int32_t i = 0; i < q1 - q0; ++i) {
    const int32_t q = i == 0 ? q0 : i == 1 ? q1 - 1 : q0 + i - 1;  // q0, q1 - 1, q0 + 1, ...
    scratch.clear();
    for (const Interval* it = listed.row(q); it != listed.row(q + 1); ++it) {
      if (it->lo < k1 && it->hi > k0) scratch.push_back(*it);
    }
    if (instance.row_formula[q] == f) {
      desc::for_each_grid_interval(instance.formulas[static_cast<size_t>(f)], q, k0, k1,
                                   [&](int lo, int hi) {
                                     scratch.push_back({lo, hi});
                                   });
    }
    std::sort(scratch.begin(), scratch.end(),
              [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
    int32_t reached = k0;
    for (const Interval& iv : scratch) {
      if (iv.lo > reached) break;
      reached = std::max(reached, iv.hi);
    }
    if (reached < k1) return false;
  }
  return true;
}

}  // namespace

TileRowTileFinder::TileRowTileFinder(const InstanceRows& instance, const TileAxes& axes)
    : instance_(instance),
      axes_(axes),
      classifier_(axes.k),
      reaches_(instance.formulas.size()),
      complete_rows_(instance) {}

const TileRowTiles& TileRowTileFinder::find(int32_t m) {
  const RowIntervals& listed = instance_.listed();
  const int32_t q0 = axes_.q.start(m), q1 = axes_.q.end(m);
  TileRowTiles& out = tiles_;
  int32_t f = tile_row_formula(instance_, q0, q1);
  if (f >= 0 && lists_grid_keys(instance_, f, q0, q1)) f = -1;
  out.formula = f;
  out.rows = &listed;
  out.r0 = q0;
  out.r1 = q1;
  if (f < 0 && any_row_formula(instance_, q0, q1)) {
    complete_rows_.write_rows(q0, q1, complete_);
    out.rows = &complete_;
    out.r0 = 0;
    out.r1 = q1 - q0;
  }
  out.visible_pairs = classifier_.add_rows(*out.rows, out.r0, out.r1);
  const desc::GridFormula* formula = f >= 0 ? &instance_.formulas[static_cast<size_t>(f)] : nullptr;
  if (formula != nullptr) {
    std::unique_ptr<GridReach>& reach = reaches_[static_cast<size_t>(f)];
    if (reach == nullptr) reach = std::make_unique<GridReach>(*formula);
    out.visible_pairs += reach->reach(q0, q1, classifier_);
  }
  classifier_.finish(q1 - q0, segments_);

  out.full.clear();
  out.partial.clear();
  out.reached.clear();
  out.computed_pairs = 0;
  const auto add_full = [&](int32_t first, int32_t end) {
    if (!out.full.empty() && out.full.back().end == first) {
      out.full.back().end = end;
    } else {
      out.full.push_back({first, end});
    }
  };
  const int64_t height = q1 - q0;
  for (const TileSegment& s : segments_) {
    out.computed_pairs += height * (int64_t{axes_.k.start(s.end)} - axes_.k.start(s.first));
    if (s.listed_full) {
      add_full(s.first, s.end);
      continue;
    }
    for (int32_t n = s.first; n < s.end; ++n) {
      const int32_t k0 = axes_.k.start(n), k1 = axes_.k.end(n);
      if (s.formula_touch && formula_may_cover(*formula, k0, k1) &&
          tile_fully_visible(instance_, f, q0, q1, k0, k1, scratch_)) {
        add_full(n, n + 1);
        continue;
      }
      out.partial.push_back(n);
      out.reached.push_back(s.formula_touch);
    }
  }
  return out;
}

}  // namespace cm::descriptor
