// Element masking of partial tiles. A consumer thread holds, for each of its accumulator rows,
// 32 of the 128 key columns of a tile: column 8j + 2*quad + e for j < 16, e < 2, where quad is
// lane % 4 (the wgmma accumulator layout). Visibility is computed once per row and tile as a
// 32-bit set over those columns (bit 2j + e), from the descriptor's pattern intervals; each
// element then costs one bit test and a select.
#pragma once

#include <compilemask/descriptor.h>

#include <cute/config.hpp>

#include <stdint.h>

namespace cm::sm90 {

inline constexpr int kMaskTileN = 128;  // the key-tile width this column mapping assumes

class ThreadColumns {
 public:
  __device__ explicit ThreadColumns(int lane) : first_(2 * (lane % 4)) {}

  // The set bits of the thread's columns inside [lo, hi) (tile-relative, any integers).
  __device__ uint32_t range(int lo, int hi) const {
    const int a = count_below(lo), b = count_below(hi);
    return b > a ? static_cast<uint32_t>((uint64_t{1} << b) - (uint64_t{1} << a)) : 0u;
  }

 private:
  // How many of the thread's columns are < x.
  __device__ int count_below(int x) const {
    const int y = x - first_;
    if (y <= 0) return 0;
    const int count = 2 * (y >> 3) + min(y & 7, 2);
    return min(count, 2 * kMaskTileN / 8);
  }

  int first_;
};

// Half-width of the grid neighbourhood at frame offset dt and row offset dy, or -1 when that
// slice is empty: the same value as desc::grid_half_width, with the square root taken in float
// and corrected exactly in integers (no 64-bit division).
__device__ inline int grid_half_width_fast(const desc::GridFormula& f, int dt, int dy) {
  if (f.shape == desc::kShapeBox) {
    return (abs(dt) <= f.rt && abs(dy) <= f.ry) ? f.rx : -1;
  }
  const long long rt2 = f.rt * f.rt, ry2 = f.ry * f.ry, rx2 = f.rx * f.rx;
  const long long budget = rt2 * ry2 * rx2 - dt * dt * ry2 * rx2 - dy * dy * rt2 * rx2;
  if (budget <= 0) return -1;
  // Largest w with w² · rt² · ry² <= budget - 1.
  const long long a = rt2 * ry2, limit = budget - 1;
  int w = static_cast<int>(sqrtf(static_cast<float>(limit) / static_cast<float>(a)));
  while (w > 0 && static_cast<long long>(w) * w * a > limit) --w;
  while (static_cast<long long>(w + 1) * (w + 1) * a <= limit) ++w;
  return w;
}

// A query row's position on a grid: frame t, row y, column x; `on` is false when the row is
// outside the formula's query range or off the grid.
struct GridPoint {
  bool on;
  int t, y, x;
};

__device__ inline GridPoint grid_point(const desc::GridFormula& f, int q) {
  const int plane = f.rows * f.cols;
  const int rel = q - f.center_start;
  if (q < f.q_lo || q >= f.q_hi || rel < 0 || rel >= plane * f.frames) return {false, 0, 0, 0};
  const int t = rel / plane;
  const int in_plane = rel - t * plane;
  const int y = in_plane / f.cols;
  return {true, t, y, in_plane - y * f.cols};
}

// Visibility bits, among the thread's columns, of its two query rows q and q + 8 for a grid
// formula over the key tile starting at k0: the intervals of desc::for_each_grid_interval,
// in 32-bit arithmetic, walking the tile's grid lines once for both rows.
__device__ inline void grid_rows_bits(const desc::GridFormula& f, int q, int k0,
                                      const ThreadColumns& cols, uint32_t (&bits)[2]) {
  const GridPoint pts[2] = {grid_point(f, q), grid_point(f, q + 8)};
  if (!pts[0].on && !pts[1].on) return;
  const int extent = f.rows * f.cols * f.frames;
  const int first = max(k0 - f.start, 0);
  const int last = min(k0 + kMaskTileN - 1 - f.start, extent - 1);
  if (first > last) return;
  for (int line = first / f.cols; line <= last / f.cols; ++line) {
    const int kt = line / f.rows;
    const int ky = line - kt * f.rows;
    const int base = f.start + line * f.cols - k0;  // tile-relative start of the grid line
    CUTE_UNROLL
    for (int i = 0; i < 2; ++i) {
      if (!pts[i].on) continue;
      const int w = grid_half_width_fast(f, kt - pts[i].t, ky - pts[i].y);
      if (w < 0) continue;
      bits[i] |= cols.range(base + max(pts[i].x - w, 0), base + min(pts[i].x + w + 1, f.cols));
    }
  }
}

// Visibility bits of tile-relative rows r and r + 8 (a thread's two accumulator rows) of the
// partial tile at (q0, k0) masked by pattern `pattern` (an index into the pattern table),
// restricted to key columns below `key_limit` (tile-relative; nk - k0 on the last key tile,
// else >= kMaskTileN). pattern -1 (a full tile) applies only the key limit.
__device__ inline void rows_visibility(const void* blob, int pattern, int q0, int k0, int r,
                                       int key_limit, const ThreadColumns& cols,
                                       uint32_t (&visible)[2]) {
  visible[0] = visible[1] = ~0u;
  if (pattern >= 0) {
    visible[0] = visible[1] = 0;
    const desc::Pattern& p = desc::pattern(blob, static_cast<uint32_t>(pattern));
    if (p.kind == desc::kPatternBitmap) {
      CUTE_UNROLL
      for (int i = 0; i < 2; ++i) {
        desc::for_each_pattern_interval(blob, p, q0, k0, r + 8 * i,
                                        [&](int lo, int hi) { visible[i] |= cols.range(lo, hi); });
      }
    } else {
      const desc::RowBand* bands = desc::at<desc::RowBand>(blob, p.data_offset);
      for (int b = 0; b < p.count; ++b) {
        const desc::RowBand band = bands[b];
        CUTE_UNROLL
        for (int i = 0; i < 2; ++i) {
          const int row = r + 8 * i;
          if (row < band.row_first || row > band.row_last) continue;
          const int d = row - band.row_first;
          visible[i] |= cols.range(band.lo0 + band.lo_slope * d, band.hi0 + band.hi_slope * d);
        }
      }
      if (desc::is_grid_kind(p.kind)) {
        const desc::GridFormula f = desc::grid_formula(blob, p.formula);
        grid_rows_bits(f, q0 + r, k0, cols, visible);
      }
    }
  }
  if (key_limit < kMaskTileN) {
    const uint32_t limit = cols.range(0, key_limit);
    visible[0] &= limit;
    visible[1] &= limit;
  }
}

}  // namespace cm::sm90
