// Rasterises a descriptor instance: per-row visible intervals (from full runs and partial-tile
// patterns) are accumulated into a coverage grid, drawn next to the tile classes.
#include "render/mask_image.h"

#include "render/tile_grid.h"

#include <compilemask/descriptor.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace cm::render {
namespace {

constexpr int kMinTilePixelsForBorders = 6;

// How elements map to pixels: a cell is a `stride` x `stride` block of elements, drawn as a
// `zoom` x `zoom` square of pixels. One of stride and zoom is 1.
struct Scale {
  int stride = 1;
  int zoom = 1;
  int rows = 0;  // cells along the query axis
  int cols = 0;  // cells along the key axis
};

Scale choose_scale(int nq, int nk, const MaskImageOptions& options) {
  if (options.max_side < 1 || options.min_side < 1) {
    throw std::invalid_argument("image sides must be at least 1 pixel");
  }
  const int longest = std::max({nq, nk, 1});
  Scale s;
  s.stride = std::max(1, (longest + options.max_side - 1) / options.max_side);
  s.rows = std::max(1, (nq + s.stride - 1) / s.stride);
  s.cols = std::max(1, (nk + s.stride - 1) / s.stride);
  s.zoom = std::max(1, options.min_side / std::max(s.rows, s.cols));
  return s;
}

// Adds the interval [lo, hi) of one row to the coverage of a cell row. Whole cells go through a
// difference array so a long interval costs O(1).
struct CellRowAccumulator {
  int stride;
  std::vector<long long> coverage;  // visible pairs per cell
  std::vector<long long> whole;     // difference array of rows fully covering a cell

  CellRowAccumulator(int cells, int stride_) : stride(stride_), coverage(cells), whole(cells + 1) {}

  void add(int lo, int hi) {
    const int first = lo / stride, last = (hi - 1) / stride;
    if (first == last) {
      coverage[first] += hi - lo;
      return;
    }
    coverage[first] += static_cast<long long>(first + 1) * stride - lo;
    coverage[last] += hi - static_cast<long long>(last) * stride;
    whole[first + 1] += stride;
    whole[last] -= stride;
  }

  // Moves the accumulated coverage into `out` and resets for the next cell row.
  void flush(long long* out) {
    long long running = 0;
    for (size_t c = 0; c < coverage.size(); ++c) {
      running += whole[c];
      out[c] = coverage[c] + running;
    }
    std::fill(coverage.begin(), coverage.end(), 0);
    std::fill(whole.begin(), whole.end(), 0);
  }
};

// Visible pairs per cell, row-major rows x cols.
std::vector<long long> coverage_grid(const void* blob, const desc::Instance& inst, const Scale& s) {
  const desc::Header& hd = desc::header(blob);
  std::vector<long long> grid(static_cast<size_t>(s.rows) * s.cols, 0);
  CellRowAccumulator acc(s.cols, s.stride);
  std::vector<std::pair<int, int>> pieces;  // one partial tile's intervals of one row
  for (int q = 0; q < hd.nq; ++q) {
    const int m = desc::q_tile_of(blob, q);
    const int q0 = desc::q_tile_span(blob, m).begin;
    const desc::TileRow& row = desc::q_tile(blob, inst, m);
    const desc::FullRun* full = desc::full_runs(blob, row);
    for (int i = 0; i < row.full_count; ++i) {
      acc.add(desc::k_tile_span(blob, full[i].first).begin,
              desc::k_tile_span(blob, full[i].first + full[i].count - 1).end);
    }
    const desc::PartialRun* partial = desc::partial_runs(blob, row);
    for (int i = 0; i < row.partial_count; ++i) {
      const desc::Pattern& p = desc::pattern(blob, partial[i].pattern);
      for (int n = partial[i].first; n < partial[i].first + partial[i].count; ++n) {
        const auto [k0, k1] = desc::k_tile_span(blob, n);
        pieces.clear();
        desc::for_each_pattern_interval(blob, p, q0, k0, q - q0,
                                        [&](int lo, int hi) { pieces.emplace_back(lo, hi); });
        // Pattern intervals may overlap: merge them before counting.
        std::sort(pieces.begin(), pieces.end());
        int end = 0;
        for (auto [lo, hi] : pieces) {
          lo = std::max(lo, end);
          hi = std::min(hi, k1 - k0);
          if (lo < hi) acc.add(k0 + lo, k0 + hi);
          end = std::max(end, hi);
        }
      }
    }
    if ((q + 1) % s.stride == 0 || q + 1 == hd.nq) {
      acc.flush(grid.data() + static_cast<size_t>(q / s.stride) * s.cols);
    }
  }
  return grid;
}

Rgb blend(Rgb from, Rgb to, double t) {
  auto mix = [t](uint8_t a, uint8_t b) {
    return static_cast<uint8_t>(static_cast<double>(a) + t * (static_cast<double>(b) - a) + 0.5);
  };
  return {mix(from.r, to.r), mix(from.g, to.g), mix(from.b, to.b)};
}

Rgb tile_colour(TileClass c) {
  switch (c) {
    case TileClass::kFull:
      return kFullTile;
    case TileClass::kPartial:
      return kPartialTile;
    case TileClass::kEmpty:
      break;
  }
  return kEmptyTile;
}

// The merged class of the tiles under each cell.
std::vector<TileClass> cell_tile_classes(const void* blob, const TileGrid& tiles, const Scale& s) {
  const desc::Header& hd = desc::header(blob);
  std::vector<TileClass> out;
  out.reserve(static_cast<size_t>(s.rows) * s.cols);
  for (int y = 0; y < s.rows; ++y) {
    const int m0 = desc::q_tile_of(blob, y * s.stride);
    const int m1 = desc::q_tile_of(blob, std::min(hd.nq, (y + 1) * s.stride) - 1);
    for (int x = 0; x < s.cols; ++x) {
      const int n0 = desc::k_tile_of(blob, x * s.stride);
      const int n1 = desc::k_tile_of(blob, std::min(hd.nk, (x + 1) * s.stride) - 1);
      bool all_full = true, all_empty = true;
      for (int m = m0; m <= m1; ++m) {
        for (int n = n0; n <= n1; ++n) {
          all_full = all_full && tiles.at(m, n) == TileClass::kFull;
          all_empty = all_empty && tiles.at(m, n) == TileClass::kEmpty;
        }
      }
      out.push_back(all_full    ? TileClass::kFull
                    : all_empty ? TileClass::kEmpty
                                : TileClass::kPartial);
    }
  }
  return out;
}

void draw_frame(Image& image, int x0, int y0, int w, int h) {
  for (int x = x0 - 1; x <= x0 + w; ++x) image.at(x, y0 - 1) = image.at(x, y0 + h) = kFrame;
  for (int y = y0 - 1; y <= y0 + h; ++y) image.at(x0 - 1, y) = image.at(x0 + w, y) = kFrame;
}

Rgb darker(Rgb c) {
  return blend(c, Rgb{0, 0, 0}, 0.25);
}

}  // namespace

Image render_mask_image(const void* blob, int b, int h, const MaskImageOptions& options) {
  const desc::Instance& inst = desc::instance(blob, checked_instance(blob, b, h));
  const desc::Header& hd = desc::header(blob);
  const Scale s = choose_scale(hd.nq, hd.nk, options);
  const int panel_w = s.cols * s.zoom, panel_h = s.rows * s.zoom;
  Image image(3 * kImageMargin + 2 * panel_w, 2 * kImageMargin + panel_h, kBackground);

  const std::vector<long long> coverage = coverage_grid(blob, inst, s);
  const TileGrid tiles = classify_tiles(blob, b, h);
  const std::vector<TileClass> classes =
      tiles.rows > 0 && tiles.cols > 0 ? cell_tile_classes(blob, tiles, s)
                                       : std::vector<TileClass>(coverage.size(), TileClass::kEmpty);
  const bool borders =
      std::min(hd.tile_m, hd.tile_n) * s.zoom / s.stride >= kMinTilePixelsForBorders;
  const int left = kImageMargin, right = 2 * kImageMargin + panel_w;

  // The first element row/column a pixel row/column shows; a tile border sits where the tile of
  // that element changes.
  auto element = [&s](int p) { return p / s.zoom * s.stride; };
  for (int py = 0; py < panel_h; ++py) {
    const int y = py / s.zoom;
    const long long cell_rows = std::min(s.stride, hd.nq - y * s.stride);
    const bool row_border =
        borders && py > 0 &&
        desc::q_tile_of(blob, element(py)) != desc::q_tile_of(blob, element(py - 1));
    for (int px = 0; px < panel_w; ++px) {
      const int x = px / s.zoom;
      const size_t cell = static_cast<size_t>(y) * s.cols + x;
      const long long cell_cols = std::min(s.stride, hd.nk - x * s.stride);
      const double area = static_cast<double>(std::max(1LL, cell_rows * cell_cols));
      image.at(left + px, kImageMargin + py) =
          blend(kBackground, kVisible, static_cast<double>(coverage[cell]) / area);
      const bool col_border =
          borders && px > 0 &&
          desc::k_tile_of(blob, element(px)) != desc::k_tile_of(blob, element(px - 1));
      const Rgb tile = tile_colour(classes[cell]);
      image.at(right + px, kImageMargin + py) = row_border || col_border ? darker(tile) : tile;
    }
  }
  draw_frame(image, left, kImageMargin, panel_w, panel_h);
  draw_frame(image, right, kImageMargin, panel_w, panel_h);
  return image;
}

}  // namespace cm::render
