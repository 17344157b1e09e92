// Tile maps and mask images drawn from real descriptors agree with a brute-force evaluation of
// the visibility predicate the descriptor was built from.
#include "descriptor/build.h"
#include "render/mask_image.h"
#include "render/tile_grid.h"
#include "render/tile_map.h"

#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace cm::render {
namespace {

using Predicate = std::function<bool(int q, int k)>;

struct Case {
  std::string name;
  int nq, nk;
  Tiling tiling;
  Predicate visible;
};

std::vector<Case> cases() {
  return {
      {"causal", 300, 300, {64, 32}, [](int q, int k) { return k <= q; }},
      {"window", 257, 257, {32, 64}, [](int q, int k) { return k <= q && k > q - 50; }},
      // Every 7th row sees nothing; the others see two short runs.
      {"sparse",
       200,
       230,
       {16, 16},
       [](int q, int k) {
         return q % 7 != 0 && ((k >= q / 2 && k < q / 2 + 10) || (k >= 200 && k < 210));
       }},
      {"cross", 100, 257, {64, 128}, [](int q, int k) { return k < 2 * q + 60; }},
  };
}

RowIntervals rows_of(const Case& c) {
  RowIntervals rows;
  rows.nq = c.nq;
  rows.nk = c.nk;
  rows.offsets.push_back(0);
  for (int q = 0; q < c.nq; ++q) {
    for (int k = 0; k < c.nk; ++k) {
      if (!c.visible(q, k)) continue;
      if (k > 0 && c.visible(q, k - 1)) {
        rows.intervals.back().hi = k + 1;
      } else {
        rows.intervals.push_back({k, k + 1});
      }
    }
    rows.offsets.push_back(static_cast<int64_t>(rows.intervals.size()));
  }
  return rows;
}

std::vector<uint64_t> blob_of(const Case& c) {
  InstanceRows instance;
  instance.all = rows_of(c);
  PlanStats stats;
  return build_descriptor({instance}, {0}, 1, 1, c.tiling, stats);
}

// Brute-force class of the block of elements [q0, q1) x [k0, k1).
TileClass block_class(const Case& c, int q0, int q1, int k0, int k1) {
  int visible = 0;
  for (int q = q0; q < std::min(q1, c.nq); ++q) {
    for (int k = k0; k < std::min(k1, c.nk); ++k) visible += c.visible(q, k) ? 1 : 0;
  }
  const int area = (std::min(q1, c.nq) - q0) * (std::min(k1, c.nk) - k0);
  return visible == 0      ? TileClass::kEmpty
         : visible == area ? TileClass::kFull
                           : TileClass::kPartial;
}

// Class of merged cell (r, col) covering factor x factor tiles.
TileClass expected_cell(const Case& c, int factor, int r, int col) {
  const int tm = c.tiling.m, tn = c.tiling.n;
  return block_class(c, r * factor * tm, (r + 1) * factor * tm, col * factor * tn,
                     (col + 1) * factor * tn);
}

// The cells of the framed map: one row per line between the frame lines.
std::vector<std::vector<TileClass>> parse_map(const std::string& map) {
  std::vector<std::vector<TileClass>> rows;
  std::istringstream lines(map);
  std::string line;
  const std::string bar = "│", full = "██", partial = "░░";
  while (std::getline(lines, line)) {
    if (line.rfind(bar, 0) != 0) continue;
    std::vector<TileClass> row;
    size_t at = bar.size();
    while (line.compare(at, bar.size(), bar) != 0) {
      if (line.compare(at, full.size(), full) == 0) {
        row.push_back(TileClass::kFull);
        at += full.size();
      } else if (line.compare(at, partial.size(), partial) == 0) {
        row.push_back(TileClass::kPartial);
        at += partial.size();
      } else {
        EXPECT_EQ(line.substr(at, 2), "  ") << "unexpected glyph in: " << line;
        row.push_back(TileClass::kEmpty);
        at += 2;
      }
    }
    rows.push_back(row);
  }
  return rows;
}

TEST(TileGrid, ClassesMatchBruteForce) {
  for (const Case& c : cases()) {
    const std::vector<uint64_t> blob = blob_of(c);
    const TileGrid grid = classify_tiles(blob.data(), 0, 0);
    ASSERT_EQ(grid.rows, (c.nq + c.tiling.m - 1) / c.tiling.m) << c.name;
    ASSERT_EQ(grid.cols, (c.nk + c.tiling.n - 1) / c.tiling.n) << c.name;
    for (int m = 0; m < grid.rows; ++m) {
      for (int n = 0; n < grid.cols; ++n) {
        EXPECT_EQ(grid.at(m, n), expected_cell(c, 1, m, n)) << c.name << " tile " << m << "," << n;
      }
    }
  }
}

TEST(TileGrid, MergeFollowsAllFullAllEmptyRule) {
  using enum TileClass;
  TileGrid grid{3,
                3,
                1,
                {kFull, kFull, kEmpty,  //
                 kFull, kFull, kEmpty,  //
                 kEmpty, kPartial, kEmpty}};
  const TileGrid merged = merge_cells(grid, 2);
  EXPECT_EQ(merged.rows, 2);
  EXPECT_EQ(merged.cols, 2);
  EXPECT_EQ(merged.tiles_per_cell, 2);
  EXPECT_EQ(merged.cells, (std::vector<TileClass>{kFull, kEmpty, kPartial, kEmpty}));
  EXPECT_THROW(merge_cells(grid, 0), std::invalid_argument);
}

TEST(TileMap, CharactersMatchBruteForce) {
  for (const Case& c : cases()) {
    const std::vector<uint64_t> blob = blob_of(c);
    const std::string map = format_tile_map(blob.data(), 0, 0, 1000);
    const auto cells = parse_map(map);
    ASSERT_EQ(static_cast<int>(cells.size()), (c.nq + c.tiling.m - 1) / c.tiling.m) << map;
    for (int r = 0; r < static_cast<int>(cells.size()); ++r) {
      ASSERT_EQ(static_cast<int>(cells[r].size()), (c.nk + c.tiling.n - 1) / c.tiling.n) << map;
      for (int col = 0; col < static_cast<int>(cells[r].size()); ++col) {
        EXPECT_EQ(cells[r][col], expected_cell(c, 1, r, col)) << c.name << "\n" << map;
      }
    }
    EXPECT_NE(map.find("full"), std::string::npos);
    EXPECT_NE(map.find("nq=" + std::to_string(c.nq)), std::string::npos) << map;
  }
}

TEST(TileMap, NarrowWidthMergesSquareBlocks) {
  const Case c = cases()[0];  // 300x300 with 64x32 tiles: 5 x 10 tiles
  const std::vector<uint64_t> blob = blob_of(c);
  const std::string map = format_tile_map(blob.data(), 0, 0, 2 + 2 * 4);  // room for 4 cells
  EXPECT_NE(map.find("one cell = 3x3 tiles"), std::string::npos) << map;
  const auto cells = parse_map(map);
  ASSERT_EQ(cells.size(), 2u) << map;
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cells[r].size(), 4u) << map;
    for (int col = 0; col < 4; ++col) EXPECT_EQ(cells[r][col], expected_cell(c, 3, r, col)) << map;
  }
}

TEST(TileMap, RejectsOutOfRangeInstanceAndForeignBlobs) {
  const std::vector<uint64_t> blob = blob_of(cases()[0]);
  EXPECT_THROW(format_tile_map(blob.data(), 1, 0, 80), std::invalid_argument);
  EXPECT_THROW(format_tile_map(blob.data(), 0, -1, 80), std::invalid_argument);
  std::vector<uint64_t> foreign(16, 0);
  EXPECT_THROW(format_tile_map(foreign.data(), 0, 0, 80), std::invalid_argument);
}

struct Panels {
  const Image& image;
  int width, height;
  Rgb left(int x, int y) const { return image.at(kImageMargin + x, kImageMargin + y); }
  Rgb right(int x, int y) const { return image.at(2 * kImageMargin + width + x, kImageMargin + y); }
};

Panels panels_of(const Image& image) {
  return {image, (image.width - 3 * kImageMargin) / 2, image.height - 2 * kImageMargin};
}

Rgb tile_colour(TileClass t) {
  return t == TileClass::kFull ? kFullTile : t == TileClass::kPartial ? kPartialTile : kEmptyTile;
}

TEST(MaskImage, FullResolutionShowsEveryElementAndTile) {
  for (const Case& c : cases()) {
    const std::vector<uint64_t> blob = blob_of(c);
    const Image image = render_mask_image(blob.data(), 0, 0, {.max_side = 1024, .min_side = 1});
    const Panels p = panels_of(image);
    ASSERT_EQ(p.width, c.nk);
    ASSERT_EQ(p.height, c.nq);
    const int q_tiles = (c.nq + c.tiling.m - 1) / c.tiling.m;
    const int k_tiles = (c.nk + c.tiling.n - 1) / c.tiling.n;
    std::vector<TileClass> tiles;
    for (int m = 0; m < q_tiles; ++m) {
      for (int n = 0; n < k_tiles; ++n) tiles.push_back(expected_cell(c, 1, m, n));
    }
    for (int q = 0; q < c.nq; ++q) {
      for (int k = 0; k < c.nk; ++k) {
        ASSERT_EQ(p.left(k, q), c.visible(q, k) ? kVisible : kBackground)
            << c.name << " " << q << "," << k;
        // Tile borders are drawn on the first pixel row/column of each tile.
        if (q % c.tiling.m == 0 || k % c.tiling.n == 0) continue;
        ASSERT_EQ(p.right(k, q), tile_colour(tiles[q / c.tiling.m * k_tiles + k / c.tiling.n]))
            << c.name << " " << q << "," << k;
      }
    }
  }
}

TEST(MaskImage, DownsampledPixelsSummariseTheirBlocks) {
  const int stride = 3;
  for (const Case& c : cases()) {
    const std::vector<uint64_t> blob = blob_of(c);
    const int longest = std::max(c.nq, c.nk);
    const Image image = render_mask_image(
        blob.data(), 0, 0, {.max_side = (longest + stride - 1) / stride, .min_side = 1});
    const Panels p = panels_of(image);
    ASSERT_EQ(p.width, (c.nk + stride - 1) / stride) << c.name;
    for (int y = 0; y < p.height; ++y) {
      for (int x = 0; x < p.width; ++x) {
        const TileClass block =
            block_class(c, y * stride, (y + 1) * stride, x * stride, (x + 1) * stride);
        const Rgb pixel = p.left(x, y);
        if (block == TileClass::kEmpty) {
          ASSERT_EQ(pixel, kBackground) << c.name << " " << x << "," << y;
        } else if (block == TileClass::kFull) {
          ASSERT_EQ(pixel, kVisible) << c.name << " " << x << "," << y;
        } else {
          ASSERT_NE(pixel, kBackground) << c.name << " " << x << "," << y;
          ASSERT_NE(pixel, kVisible) << c.name << " " << x << "," << y;
        }
      }
    }
  }
}

TEST(MaskImage, SmallMasksAreMagnified) {
  const Case c{"tiny", 10, 10, {16, 16}, [](int q, int k) { return k <= q; }};
  const std::vector<uint64_t> blob = blob_of(c);
  const Image image = render_mask_image(blob.data(), 0, 0, {.max_side = 1024, .min_side = 100});
  const Panels p = panels_of(image);
  ASSERT_EQ(p.width, 100);
  ASSERT_EQ(p.height, 100);
  for (int y = 0; y < 100; ++y) {
    for (int x = 0; x < 100; ++x) {
      ASSERT_EQ(p.left(x, y), c.visible(y / 10, x / 10) ? kVisible : kBackground) << x << "," << y;
    }
  }
}

}  // namespace
}  // namespace cm::render
