// Per-instance tile encoding: classification, pattern choice, deduplication and forward runs
// (see instance_tiles.h).
#include "descriptor/instance_tiles.h"

#include "descriptor/expand_rows.h"
#include "descriptor/formula_bitmaps.h"
#include "descriptor/grid_reach.h"
#include "descriptor/pattern_encode.h"
#include "descriptor/piece_gather.h"
#include "descriptor/tile_classify.h"

#include <algorithm>
#include <memory>

namespace cm::descriptor {
namespace {

// True if query row q lies in the formula's row range with its centre on the grid, i.e. the
// formula contributes keys to q.
bool formula_reaches(const desc::GridFormula& f, int32_t q) {
  const int64_t extent = int64_t{f.frames} * f.rows * f.cols;
  const int64_t rel = int64_t{q} - f.center_start;
  return q >= f.q_lo && q < f.q_hi && rel >= 0 && rel < extent;
}

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
    if (carried != -1 || formula_reaches(formula, q)) return -1;
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
// (for the rows carrying it). Stops at the first row that does not.
bool tile_fully_visible(const InstanceRows& instance, int32_t f, int32_t q0, int32_t q1, int32_t k0,
                        int32_t k1, std::vector<Interval>& scratch) {
  const RowIntervals& listed = instance.listed();
  for (int32_t q = q0; q < q1; ++q) {
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

template <class T>
std::span<const unsigned char> as_bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(T)};
}

// Turns one partial tile's fitted bands into a pattern index.
class TileEncoder {
 public:
  TileEncoder(const InstanceRows& instance, const Tiling& tiling, const TileAxes& axes,
              PatternTable& table)
      : instance_(instance),
        tiling_(tiling),
        axes_(axes),
        table_(table),
        strips_(instance.formulas.size()),
        strip_patterns_(instance.formulas.size()) {}

  // Partial tile i of the gatherer as bands, or as a bitmap when the bands would take more
  // bytes.
  uint32_t plain(const PieceGatherer& gatherer, size_t i, const RowIntervals& rows, int32_t r0,
                 int32_t r1, int32_t n) {
    const std::vector<desc::RowBand>& bands = gatherer.bands(i);
    if (bands.size() * sizeof(desc::RowBand) > bitmap_bytes(tiling_.m, tiling_.n)) {
      gatherer.pieces_of(rows, r0, r1, n, pieces_);
      fill_bitmap(pieces_, tiling_.m, tiling_.n, bitmap_);
      return table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(bitmap_));
    }
    return table_.add(desc::kPatternBands, -1, static_cast<uint16_t>(bands.size()),
                      as_bytes_of(bands));
  }

  // Partial tile i (tile (m, n)), reached by strip-layout formula f, as a bitmap of the
  // formula's keys and the tile's listed pieces (disjoint from them). Strip tiles repeat few
  // bitmaps (FormulaBitmaps), and a kernel reads a bitmap row with a few word operations
  // instead of walking the formula. A tile without listed pieces takes its geometry's pattern.
  uint32_t strip_bitmap(const PieceGatherer& gatherer, size_t i, const RowIntervals& rows,
                        int32_t f, int32_t m, int32_t n) {
    if (strips_[static_cast<size_t>(f)] == nullptr) {
      strips_[static_cast<size_t>(f)] =
          std::make_unique<FormulaBitmaps>(instance_, f, tiling_, axes_);
    }
    FormulaBitmaps& formula = *strips_[static_cast<size_t>(f)];
    const int32_t id = formula.geometry(m, n);
    if (!gatherer.has_pieces(i)) {
      std::vector<int64_t>& patterns = strip_patterns_[static_cast<size_t>(f)];
      if (static_cast<size_t>(id) >= patterns.size())
        patterns.resize(static_cast<size_t>(id) + 1, -1);
      int64_t& pattern = patterns[static_cast<size_t>(id)];
      if (pattern < 0)
        pattern = table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(formula.bitmap(id)));
      return static_cast<uint32_t>(pattern);
    }
    gatherer.pieces_of(rows, axes_.q.start(m), axes_.q.end(m), n, pieces_);
    fill_bitmap(pieces_, tiling_.m, tiling_.n, bitmap_);
    const std::vector<uint32_t>& words = formula.bitmap(id);
    for (size_t w = 0; w < words.size(); ++w) bitmap_[w] |= words[w];
    return table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(bitmap_));
  }

  // A grid formula, alone (sparse kind) or with partial tile i's listed pieces as bands.
  uint32_t grid(const PieceGatherer& gatherer, size_t i, int32_t formula) {
    if (!gatherer.has_pieces(i)) return table_.add(desc::kPatternGridSparse, formula, 0, {});
    const std::vector<desc::RowBand>& bands = gatherer.bands(i);
    return table_.add(desc::kPatternGrid, formula, static_cast<uint16_t>(bands.size()),
                      as_bytes_of(bands));
  }

 private:
  const InstanceRows& instance_;
  const Tiling& tiling_;
  const TileAxes& axes_;
  PatternTable& table_;
  std::vector<RowPiece> pieces_;
  std::vector<uint32_t> bitmap_;
  // Per formula of a strip layout, once reached: its bitmaps by geometry, and the pattern of
  // each geometry (-1 until a tile without listed pieces needs it).
  std::vector<std::unique_ptr<FormulaBitmaps>> strips_;
  std::vector<std::vector<int64_t>> strip_patterns_;
};

}  // namespace

EncodedInstance encode_instance(const InstanceRows& instance, const Tiling& tiling,
                                const TileAxes& axes, PatternTable& table) {
  const RowIntervals& listed = instance.listed();
  const int32_t nk = listed.nk;

  std::vector<int32_t> global_formula(instance.formulas.size(), -1);
  EncodedInstance out;
  TileRowClassifier classifier(axes.k);
  PieceGatherer gatherer(axes.k);
  TileEncoder encoder(instance, tiling, axes, table);
  RunFormBuilder builder(table);
  std::vector<TileSegment> segments;
  std::vector<int32_t> partial;
  std::vector<uint8_t> reached;  // per partial tile: the formula reaches it
  std::vector<Interval> scratch;
  RowIntervals complete;  // complete rows of a fallback tile row, indexed from 0

  for (int32_t m = 0; m < axes.q.count(); ++m) {
    const int32_t q0 = axes.q.start(m), q1 = axes.q.end(m);
    int32_t f = tile_row_formula(instance, q0, q1);
    if (f >= 0 && lists_grid_keys(instance, f, q0, q1)) f = -1;
    // Rows to classify and gather from, as (rows, first, end).
    const RowIntervals* rows = &listed;
    int32_t r0 = q0, r1 = q1;
    if (f < 0 && any_row_formula(instance, q0, q1)) {
      complete.nq = q1 - q0;
      complete.nk = nk;
      complete.offsets.assign(1, 0);
      complete.intervals.clear();
      for (int32_t q = q0; q < q1; ++q) append_complete_row(instance, q, scratch, complete);
      rows = &complete;
      r0 = 0;
      r1 = q1 - q0;
    }
    out.visible_pairs += classifier.add_rows(*rows, r0, r1);
    const desc::GridFormula* formula =
        f >= 0 ? &instance.formulas[static_cast<size_t>(f)] : nullptr;
    if (formula != nullptr) out.visible_pairs += reach_grid(*formula, q0, q1, classifier);
    classifier.finish(q1 - q0, segments);

    builder.begin_row();
    partial.clear();
    reached.clear();
    const int64_t height = q1 - q0;
    auto width = [&](int32_t first, int32_t end) {
      return int64_t{axes.k.start(end)} - axes.k.start(first);
    };
    for (const TileSegment& s : segments) {
      out.computed_pairs += height * width(s.first, s.end);
      if (s.listed_full) {
        builder.add_full(s.first, s.end);
        out.full_tiles += s.end - s.first;
        continue;
      }
      for (int32_t n = s.first; n < s.end; ++n) {
        const int32_t k0 = axes.k.start(n), k1 = axes.k.end(n);
        if (s.formula_touch && formula_may_cover(*formula, k0, k1) &&
            tile_fully_visible(instance, f, q0, q1, k0, k1, scratch)) {
          builder.add_full(n, n + 1);
          ++out.full_tiles;
          continue;
        }
        partial.push_back(n);
        reached.push_back(s.formula_touch);
      }
    }
    gatherer.gather(*rows, r0, r1, partial);
    const bool strips = formula != nullptr && formula->strip < formula->cols;
    if (f >= 0 && !strips && global_formula[f] < 0)
      global_formula[f] = table.add_formula(instance.formulas[f]);
    for (size_t i = 0; i < partial.size(); ++i) {
      uint32_t pattern;
      if (!reached[i]) {
        pattern = encoder.plain(gatherer, i, *rows, r0, r1, partial[i]);
      } else if (strips) {
        pattern = encoder.strip_bitmap(gatherer, i, *rows, f, m, partial[i]);
      } else {
        pattern = encoder.grid(gatherer, i, global_formula[f]);
      }
      builder.add_partial(partial[i], pattern);
      out.partial.push_back({m, partial[i], pattern});
    }
    out.partial_tiles += static_cast<int64_t>(partial.size());
    builder.end_row();
  }
  out.forward = builder.finish();
  return out;
}

}  // namespace cm::descriptor
