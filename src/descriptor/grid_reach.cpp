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
  const int64_t cols = f.cols, rows = f.rows, extent = rows * cols * f.frames;
  const int64_t qa = std::max<int64_t>(std::max(q0, f.q_lo) - int64_t{f.center_start}, 0);
  const int64_t qb = std::min<int64_t>(std::min(q1, f.q_hi) - int64_t{f.center_start}, extent);
  int64_t pairs = 0;
  for (int64_t ql = qa < qb ? qa / cols : 0; qa < qb && ql <= (qb - 1) / cols; ++ql) {
    const int64_t xa = std::max(qa, ql * cols) - ql * cols;
    const int64_t xb = std::min(qb, (ql + 1) * cols) - ql * cols;
    const int64_t t = ql / rows, y = ql % rows;
    for (int64_t kt = std::max<int64_t>(t - f.rt, 0);
         kt <= std::min<int64_t>(t + f.rt, f.frames - 1); ++kt) {
      for (int64_t ky = std::max<int64_t>(y - f.ry, 0); ky <= std::min(y + f.ry, rows - 1); ++ky) {
        const int64_t w = desc::grid_half_width(f, kt - t, ky - y);
        if (w < 0) continue;
        // Centres [xa, xb) see [xa - w, xb + w) on this key line, clipped to it.
        const int64_t base = f.start + (kt * rows + ky) * cols;
        const int64_t lo = base + std::max<int64_t>(xa - w, 0);
        const int64_t hi = base + std::min(xb + w, cols);
        classifier.add_formula_touch(lo, hi);
        pairs += sum_clipped_widths(xa, xb, w, cols);
      }
    }
  }
  return pairs;
}

bool formula_may_cover(const desc::GridFormula& f, int32_t k0, int32_t k1) {
  const int64_t cols = f.cols;
  const int64_t a = std::max<int64_t>(k0 - int64_t{f.start}, 0);
  const int64_t b = std::min<int64_t>(k1 - int64_t{f.start}, cols * f.rows * f.frames);
  if (a >= b) return false;
  // The widest part of [a, b) on one grid line.
  const int64_t first_line_end = std::min(b, (a / cols + 1) * cols);
  int64_t widest = first_line_end - a;
  if (first_line_end < b) widest = std::max(widest, std::min(cols, b - first_line_end));
  const int64_t neighbourhood_width = 2 * int64_t{f.rx} + 1;
  return widest <= neighbourhood_width;
}

}  // namespace cm::descriptor
