// Bitmaps of formula-reached tiles by geometry (see formula_bitmaps.h).
#include "descriptor/formula_bitmaps.h"

#include "descriptor/half_widths.h"
#include "descriptor/pattern_encode.h"

#include <algorithm>
#include <climits>

namespace cm::descriptor {

FormulaBitmaps::FormulaBitmaps(const InstanceRows& instance, int32_t f, const Tiling& tiling,
                               const TileAxes& axes)
    : instance_(instance),
      f_(f),
      tiling_(tiling),
      axes_(axes),
      half_widths_(half_width_table(instance.formulas[static_cast<size_t>(f)])),
      rows_(static_cast<size_t>(axes.q.count())),
      keys_(static_cast<size_t>(axes.k.count())) {}

int32_t FormulaBitmaps::shape_id(std::unordered_map<std::vector<int32_t>, int32_t, IntsHash>& ids,
                                 const std::vector<int32_t>& shape) {
  return ids.try_emplace(shape, static_cast<int32_t>(ids.size())).first->second;
}

// Per row: its centre cell relative to the first row's, or INT32_MIN for a row the formula
// adds nothing to.
const FormulaBitmaps::Side& FormulaBitmaps::rows_of(int32_t m) {
  Side& side = rows_[static_cast<size_t>(m)];
  if (side.shape >= 0) return side;
  const desc::GridFormula& f = instance_.formulas[static_cast<size_t>(f_)];
  const int32_t q0 = axes_.q.start(m), q1 = axes_.q.end(m);
  scratch_.clear();
  bool first = true;
  for (int32_t q = q0; q < q1; ++q) {
    desc::GridCell c;
    if (instance_.row_formula[static_cast<size_t>(q)] != f_ || !desc::grid_center(f, q, c)) {
      scratch_.insert(scratch_.end(), {INT32_MIN, 0, 0});
      continue;
    }
    if (first) side.anchor = {c.t, c.y, c.x};
    first = false;
    scratch_.insert(scratch_.end(),
                    {c.t - side.anchor[0], c.y - side.anchor[1], c.x - side.anchor[2]});
  }
  side.shape = shape_id(row_shapes_, scratch_);
  return side;
}

// Per grid segment of the key tile: its cell relative to the first segment's, its width and
// its first column in the tile.
const FormulaBitmaps::Side& FormulaBitmaps::keys_of(int32_t n) {
  Side& side = keys_[static_cast<size_t>(n)];
  if (side.shape >= 0) return side;
  const desc::GridFormula& f = instance_.formulas[static_cast<size_t>(f_)];
  const int32_t k0 = axes_.k.start(n), k1 = axes_.k.end(n);
  scratch_.clear();
  bool first = true;
  desc::for_each_grid_segment(f, k0 - f.start, k1 - f.start, [&](const desc::GridSegment& s) {
    if (first) side.anchor = {s.t, s.y, s.x0};
    first = false;
    scratch_.insert(scratch_.end(), {s.t - side.anchor[0], s.y - side.anchor[1],
                                     s.x0 - side.anchor[2], s.x1 - s.x0, f.start + s.first - k0});
    return true;
  });
  side.shape = shape_id(key_shapes_, scratch_);
  return side;
}

int32_t FormulaBitmaps::geometry(int32_t m, int32_t n) {
  const Side& rows = rows_of(m);
  const Side& keys = keys_of(n);
  const std::array<int32_t, 5> key = {rows.shape, keys.shape, keys.anchor[0] - rows.anchor[0],
                                      keys.anchor[1] - rows.anchor[1],
                                      keys.anchor[2] - rows.anchor[2]};
  const auto [it, added] = geometries_.try_emplace(key, static_cast<int32_t>(bitmaps_.size()));
  if (added) bitmaps_.push_back(compute(m, n));
  return it->second;
}

// The bitmap of tile (m, n) itself. Rows on one query grid segment share their frame and grid
// row, so each (query segment, key segment) pair reads one half-width; a centre x then sees
// columns [x - w, x + w] of the key segment, a run that slides with x.
std::vector<uint32_t> FormulaBitmaps::compute(int32_t m, int32_t n) {
  const desc::GridFormula& f = instance_.formulas[static_cast<size_t>(f_)];
  const int32_t q0 = std::max(axes_.q.start(m), f.q_lo), q1 = std::min(axes_.q.end(m), f.q_hi);
  const int32_t k0 = axes_.k.start(n), k1 = axes_.k.end(n);
  key_segments_.clear();
  desc::for_each_grid_segment(f, k0 - f.start, k1 - f.start, [&](const desc::GridSegment& s) {
    key_segments_.push_back(s);
    return true;
  });
  const int32_t per_row = bitmap_words_per_row(tiling_.n);
  std::vector<uint32_t> words(static_cast<size_t>(tiling_.m) * static_cast<size_t>(per_row), 0u);
  const int row_base = f.center_start - axes_.q.start(m);  // tile row of the first centre
  desc::for_each_grid_segment(
      f, q0 - f.center_start, q1 - f.center_start, [&](const desc::GridSegment& centres) {
        for (const desc::GridSegment& keys : key_segments_) {
          const int w = half_width_from(f, half_widths_, keys.t - centres.t, keys.y - centres.y);
          if (w < 0) continue;
          // Centres that see some column of [keys.x0, keys.x1).
          const int x_lo = std::max(centres.x0, keys.x0 - w);
          const int x_hi = std::min(centres.x1, keys.x1 + w);
          const int column = f.start - k0 + keys.first - keys.x0;  // tile column of grid column 0
          for (int x = x_lo; x < x_hi; ++x) {
            const int q = f.center_start + centres.first + (x - centres.x0);
            if (instance_.row_formula[static_cast<size_t>(q)] != f_) continue;
            uint32_t* row =
                words.data() + static_cast<size_t>(row_base + centres.first + (x - centres.x0)) *
                                   static_cast<size_t>(per_row);
            set_bits(row, column + std::max(x - w, keys.x0), column + std::min(x + w + 1, keys.x1));
          }
        }
        return true;
      });
  return words;
}

}  // namespace cm::descriptor
