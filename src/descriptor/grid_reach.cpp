// Closed-form grid reach and pair counts (see grid_reach.h).
#include "descriptor/grid_reach.h"

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

int64_t reach_grid(const desc::GridFormula& f, int32_t q0, int32_t q1,
                   TileRowClassifier& classifier) {
  const int64_t qa = std::max<int64_t>(std::max(q0, f.q_lo) - int64_t{f.center_start}, 0);
  const int64_t qb =
      std::min<int64_t>(std::min(q1, f.q_hi) - int64_t{f.center_start}, desc::grid_extent(f));
  int64_t pairs = 0;
  if (qa >= qb) return pairs;
  desc::for_each_grid_segment(
      f, static_cast<int>(qa), static_cast<int>(qb), [&](const desc::GridSegment& centres) {
        const int t = centres.t, y = centres.y, xa = centres.x0, xb = centres.x1;
        for (int kt = std::max(t - f.rt, 0); kt <= std::min(t + f.rt, f.frames - 1); ++kt) {
          for (int ky = std::max(y - f.ry, 0); ky <= std::min(y + f.ry, f.rows - 1); ++ky) {
            const int64_t w = desc::grid_half_width(f, kt - t, ky - y);
            if (w < 0) continue;
            // Centres [xa, xb) see columns [xa - w, xb + w) of this key row, clipped to it; each
            // strip holds one run of them.
            const int lo = static_cast<int>(std::max<int64_t>(xa - w, 0));
            const int hi = static_cast<int>(std::min<int64_t>(xb + w, f.cols));
            for (int x0 = desc::strip_start(f, lo); x0 < hi; x0 += f.strip) {
              const int a = std::max(lo, x0), b = std::min(hi, x0 + f.strip);
              const int64_t first = f.start + int64_t{desc::grid_offset(f, {kt, ky, a})};
              classifier.add_formula_touch(first, first + (b - a));
            }
            pairs += sum_clipped_widths(xa, xb, w, f.cols);
          }
        }
        return true;
      });
  return pairs;
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
