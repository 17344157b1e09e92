// Closed-form grid reach and pair counts (see grid_reach.h).
#include "descriptor/grid_reach.h"

#include "descriptor/half_widths.h"

#include <algorithm>

namespace cm::descriptor {
namespace {

// Sum of x over [lo, hi).
int64_t sum_range(int64_t lo, int64_t hi) {
  return hi > lo ? (lo + hi - 1) * (hi - lo) / 2 : 0;
}

// Sum over centres x in [xa, xb) of the clipped line width min(cols, x+w+1) - max(0, x-w).
int64_t sum_clipped_widths(int64_t xa, int64_t xb, int64_t w, int64_t cols) {
  // min(cols, x+w+1) is x+w+1 up to x = cols-w-1, then cols.
  const int64_t split = std::clamp(cols - w, xa, xb);
  const int64_t right = sum_range(xa, split) + (w + 1) * (split - xa) + cols * (xb - split);
  // max(0, x-w) is 0 up to x = w, then x-w.
  const int64_t from = std::clamp(w + 1, xa, xb);
  const int64_t left = sum_range(from, xb) - w * (xb - from);
  return right - left;
}

}  // namespace

GridReach::GridReach(const desc::GridFormula& f) : f_(f), half_widths_(half_width_table(f)) {}

int64_t GridReach::reach(int32_t q0, int32_t q1, TileRowClassifier& classifier) {
  const desc::GridFormula& f = f_;
  const int64_t qa = std::max<int64_t>(std::max(q0, f.q_lo) - int64_t{f.center_start}, 0);
  const int64_t qb =
      std::min<int64_t>(std::min(q1, f.q_hi) - int64_t{f.center_start}, desc::grid_extent(f));
  if (qa >= qb) return 0;
  segments_.clear();
  desc::for_each_grid_segment(f, static_cast<int>(qa), static_cast<int>(qb),
                              [&](const desc::GridSegment& centres) {
                                segments_.push_back(centres);
                                return true;
                              });
  // The box of key lines any centre reaches: frames [t_lo, t_hi] x rows [y_lo, y_hi].
  int t_lo = f.frames, t_hi = -1, y_lo = f.rows, y_hi = -1;
  for (const desc::GridSegment& s : segments_) {
    t_lo = std::min(t_lo, s.t);
    t_hi = std::max(t_hi, s.t);
    y_lo = std::min(y_lo, s.y);
    y_hi = std::max(y_hi, s.y);
  }
  t_lo = std::max(t_lo - f.rt, 0);
  t_hi = std::min(t_hi + f.rt, f.frames - 1);
  y_lo = std::max(y_lo - f.ry, 0);
  y_hi = std::min(y_hi + f.ry, f.rows - 1);
  const int box_rows = y_hi - y_lo + 1;
  const int64_t box = int64_t{t_hi - t_lo + 1} * box_rows;
  // A tile row that wraps from one frame's last rows to the next frame's first spans every row
  // of the box's frames; where the box dwarfs the lines actually reached, runs are given to the
  // classifier as found instead of merged.
  int64_t reached_lines = 0;
  for (const desc::GridSegment& s : segments_) {
    reached_lines += int64_t{std::min(s.t + f.rt, f.frames - 1) - std::max(s.t - f.rt, 0) + 1} *
                     (std::min(s.y + f.ry, f.rows - 1) - std::max(s.y - f.ry, 0) + 1);
  }
  const bool merge = box <= 2 * reached_lines;
  lines_.assign(merge ? static_cast<size_t>(box) : 0, Columns{});

  int64_t pairs = 0;
  for (const desc::GridSegment& s : segments_) {
    for (int kt = std::max(s.t - f.rt, 0); kt <= std::min(s.t + f.rt, f.frames - 1); ++kt) {
      for (int ky = std::max(s.y - f.ry, 0); ky <= std::min(s.y + f.ry, f.rows - 1); ++ky) {
        // In the table (index >= 0): |kt - t| and |ky - y| stay within the radii and the grid.
        const int w =
            half_widths_[static_cast<size_t>(desc::grid_half_width_index(f, kt - s.t, ky - s.y))];
        if (w < 0) continue;
        pairs += sum_clipped_widths(s.x0, s.x1, w, f.cols);
        // Centres [x0, x1) see columns [x0 - w, x1 + w) of this key line, clipped to it.
        const Columns seen{std::max(s.x0 - w, 0), std::min(s.x1 + w, f.cols)};
        if (!merge) {
          touch(kt, ky, seen, classifier);
          continue;
        }
        Columns& line = lines_[static_cast<size_t>((kt - t_lo) * box_rows + (ky - y_lo))];
        if (line.lo >= line.hi) {
          line = seen;
        } else if (seen.lo <= line.hi && seen.hi >= line.lo) {
          line = {std::min(line.lo, seen.lo), std::max(line.hi, seen.hi)};
        } else {  // disjoint: the earlier run is final as it stands
          touch(kt, ky, line, classifier);
          line = seen;
        }
      }
    }
  }
  for (int kt = t_lo; merge && kt <= t_hi; ++kt) {
    for (int ky = y_lo; ky <= y_hi; ++ky) {
      const Columns& line = lines_[static_cast<size_t>((kt - t_lo) * box_rows + (ky - y_lo))];
      if (line.lo < line.hi) touch(kt, ky, line, classifier);
    }
  }
  return pairs;
}

// Each strip holds one run of a key line's columns.
void GridReach::touch(int t, int y, const Columns& columns, TileRowClassifier& classifier) const {
  for (int x0 = desc::strip_start(f_, columns.lo); x0 < columns.hi; x0 += f_.strip) {
    const int a = std::max(columns.lo, x0), b = std::min(columns.hi, x0 + f_.strip);
    const int64_t first = f_.start + int64_t{desc::grid_offset(f_, {t, y, a})};
    classifier.add_formula_touch(first, first + (b - a));
  }
}

bool formula_may_cover(const desc::GridFormula& f, int32_t k0, int32_t k1) {
  // The widest part of [k0, k1) on one grid segment.
  int widest = 0;
  desc::for_each_grid_segment(f, k0 - f.start, k1 - f.start, [&](const desc::GridSegment& s) {
    widest = std::max(widest, s.x1 - s.x0);
    return true;
  });
  return widest > 0 && widest <= 2 * int64_t{f.rx} + 1;
}

}  // namespace cm::descriptor
