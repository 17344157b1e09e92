// Grid-formula paths of the descriptor: closed-form classification of formula tile rows, sparse
// grid runs (kPatternGridSparse) that span empty tiles, full tiles reached only through a
// formula, the exactness of grid_tile_touched, and complete_rows. Every expectation is
// computed from a dense brute-force mask built with formula_sees.
#include <compilemask/compilemask.h>

#include "descriptor/build.h"
#include "descriptor/decode.h"
#include "descriptor/expand_rows.h"
#include "grid_layout.h"
#include "mask_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace cm {
namespace {

using testing::Dense;
using testing::dense_tile_counts;
using testing::formula_sees;

// `text` tokens that see and are seen by everything, then a rows x cols grid whose tokens see
// their neighbourhood under `f` (f's extents and radii set by the caller).
struct GridMask {
  InstanceRows rows;  // listed rows only: `all` stays empty
  Dense expected;
};

GridMask text_and_grid(int32_t text, desc::GridFormula f) {
  const int32_t n = text + f.frames * f.rows * f.cols;
  f.q_lo = f.start = f.center_start = text;
  f.q_hi = n;
  GridMask out{InstanceRows{}, Dense(n, n)};
  Dense listed(n, n);
  out.rows.formulas = {f};
  out.rows.row_formula.assign(static_cast<size_t>(n), -1);
  for (int32_t q = 0; q < n; ++q) {
    if (q >= text) out.rows.row_formula[static_cast<size_t>(q)] = 0;
    for (int32_t k = 0; k < n; ++k) {
      const bool plain = q < text || k < text;
      listed.at(q, k) = plain;
      out.expected.at(q, k) = plain || formula_sees(f, q, k);
    }
  }
  out.rows.residual = testing::rows_from_dense(listed);
  return out;
}

// Builds, verifies, and checks both forms and the stats against the dense mask.
std::vector<uint64_t> build_and_check(const GridMask& mask, const Tiling& tiling) {
  PlanStats stats;
  std::vector<uint64_t> blob = build_descriptor({mask.rows}, {0}, 1, 1, tiling, stats);
  EXPECT_NO_THROW(verify_descriptor(blob.data(), blob.size() * 8));
  for (DescriptorForm form : {DescriptorForm::kForward, DescriptorForm::kTransposed}) {
    EXPECT_EQ(decode_dense(blob.data(), 0, 0, form), mask.expected.cells)
        << (form == DescriptorForm::kForward ? "forward" : "transposed");
  }
  const TileCounts want = dense_tile_counts(mask.expected, blob.data());
  EXPECT_EQ(static_cast<const TileCounts&>(stats), want);
  EXPECT_EQ(count_tiles({mask.rows}, tiling), want);
  return blob;
}

// Partial runs of pattern kind `kind` in the forward form, and how many of their members are
// empty.
struct RunCensus {
  int runs = 0;
  int empty_members = 0;
};

RunCensus census(const std::vector<uint64_t>& blob, desc::PatternKind kind) {
  const void* b = blob.data();
  const desc::Header& hd = desc::header(b);
  const desc::Instance& inst = desc::instance(b, 0);
  RunCensus out;
  for (int32_t m = 0; m < hd.num_q_tiles; ++m) {
    const desc::TileRow& row = desc::q_tile(b, inst, m);
    for (int i = 0; i < row.partial_count; ++i) {
      const desc::PartialRun& run = desc::partial_runs(b, row)[i];
      const desc::Pattern& p = desc::pattern(b, run.pattern);
      if (p.kind != kind) continue;
      ++out.runs;
      for (int32_t n = run.first; n < run.first + run.count; ++n) {
        out.empty_members += !desc::partial_tile_nonempty(b, p, m, n);
      }
    }
  }
  return out;
}

// A formula's grid extent, shape and radii; text_and_grid places it.
desc::GridFormula neighbourhood(int32_t frames, int32_t rows, int32_t cols, desc::GridShape shape,
                                int32_t rt, int32_t ry, int32_t rx) {
  desc::GridFormula f{};
  f.frames = frames;
  f.rows = rows;
  f.cols = cols;
  f.strip = cols;
  f.shape = shape;
  f.rt = rt;
  f.ry = ry;
  f.rx = rx;
  return f;
}

desc::GridFormula disk(int32_t side, int32_t radius) {
  return neighbourhood(1, side, side, desc::kShapeEllipse, 1, radius, radius);
}

TEST(DescriptorGrid, ClearLikeDiskUsesSparseRunsAcrossEmptyTiles) {
  // 60 columns against 16-wide tiles: each grid line of the disk meets separate key tiles.
  const GridMask mask = text_and_grid(32, disk(60, 4));
  const auto blob = build_and_check(mask, {16, 16});
  const RunCensus sparse = census(blob, desc::kPatternGridSparse);
  EXPECT_GT(sparse.runs, 0);
  EXPECT_GT(sparse.empty_members, 0);                   // runs bridge the gaps between grid lines
  EXPECT_EQ(census(blob, desc::kPatternGrid).runs, 0);  // no listed keys on the grid
}

TEST(DescriptorGrid, UnalignedTextGivesGridPatternsWithBands) {
  // Text ends inside a key tile, so that tile mixes listed keys and formula keys.
  const GridMask mask = text_and_grid(40, disk(30, 3));
  const auto blob = build_and_check(mask, {32, 32});
  EXPECT_GT(census(blob, desc::kPatternGrid).runs, 0);
  build_and_check(mask, {48, 16});
  build_and_check(mask, {128, 128});
}

TEST(DescriptorGrid, BoxCoveringWholeLinesGivesFullTilesThroughTheFormula) {
  // Every row sees whole grid lines y-2 .. y+2.
  const GridMask mask = text_and_grid(16, neighbourhood(1, 12, 16, desc::kShapeBox, 0, 2, 16));
  const auto blob = build_and_check(mask, {16, 16});
  const TileCounts c = dense_tile_counts(mask.expected, blob.data());
  EXPECT_GT(c.full_tiles, 16 + 12);  // beyond the text row and column
}

TEST(DescriptorGrid, HalfWidthTableHoldsTheFormulaAndIsVerified) {
  // ry = 7 reaches beyond the grid's 5 rows: the table stops at rows - 1.
  const desc::GridFormula video = neighbourhood(3, 5, 9, desc::kShapeEllipse, 2, 7, 3);
  const desc::GridFormula box = neighbourhood(3, 5, 9, desc::kShapeBox, 0, 7, 3);
  for (const desc::GridFormula& f : {video, box}) {
    std::vector<uint64_t> blob = build_and_check(text_and_grid(8, f), {16, 16});
    const desc::GridFormula& placed = desc::grid_formula(blob.data(), 0);
    int visible_slices = 0;
    for (int dt = 1 - f.frames; dt < f.frames; ++dt) {
      for (int dy = 1 - f.rows; dy < f.rows; ++dy) {
        const long long want = desc::grid_half_width(placed, dt, dy);
        EXPECT_EQ(desc::grid_half_width_table(blob.data(), placed, dt, dy), want)
            << dt << " " << dy;
        visible_slices += want >= 0;
      }
    }
    EXPECT_GT(visible_slices, 1);
    auto* entry = reinterpret_cast<int16_t*>(reinterpret_cast<unsigned char*>(blob.data()) +
                                             placed.half_widths_offset);
    *entry = static_cast<int16_t>(*entry + 1);
    try {
      verify_descriptor(blob.data(), blob.size() * 8);
      ADD_FAILURE() << "a wrong half-width entry was not detected";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("half-width table entry"), std::string::npos)
          << e.what();
    }
  }
}

// grid_cell, grid_offset, strip_start and for_each_grid_segment against the layout oracle, on
// every token of grids with one or more frames and every strip width (strip == cols, the
// row-major layout, takes its own division-free branches).
TEST(DescriptorGrid, GridGeometryFollowsTheLayout) {
  for (int32_t frames = 1; frames <= 3; ++frames) {
    for (int32_t rows = 1; rows <= 5; ++rows) {
      for (int32_t cols = 1; cols <= 7; ++cols) {
        for (int32_t strip = 1; strip <= cols; ++strip) {
          desc::GridFormula f{};
          f.frames = frames;
          f.rows = rows;
          f.cols = cols;
          f.strip = strip;
          const int32_t extent = desc::grid_extent(f);
          ASSERT_EQ(extent, frames * rows * cols);
          const desc::Divisor by_strip = desc::divisor(strip);
          std::vector<int32_t> covered;
          for (int32_t rel = 0; rel < extent; ++rel) {
            const testing::GridPosition want = testing::walk_grid_cell(rows, cols, strip, rel);
            const desc::GridCell c = desc::grid_cell(f, rel);
            ASSERT_EQ(c.t, want.t) << frames << "x" << rows << "x" << cols << " strip " << strip;
            ASSERT_EQ(c.y, want.y) << frames << "x" << rows << "x" << cols << " strip " << strip;
            ASSERT_EQ(c.x, want.x) << frames << "x" << rows << "x" << cols << " strip " << strip;
            const desc::GridCell fast = desc::grid_cell(f, rel, by_strip);  // the kernels' form
            ASSERT_TRUE(fast.t == c.t && fast.y == c.y && fast.x == c.x)
                << frames << "x" << rows << "x" << cols << " strip " << strip << " rel " << rel;
            ASSERT_EQ(desc::grid_offset(f, c), rel);
            ASSERT_EQ(desc::strip_start(f, c.x), c.x - c.x % strip);
          }
          // Segments of [a, b): in token order, cut to [a, b), each on one row of one strip.
          for (int32_t a = 0; a < extent; a += 3) {
            const int32_t b = std::min(extent, a + 2 * cols + 1);
            int32_t next = a;
            desc::for_each_grid_segment(f, a, b, [&](const desc::GridSegment& seg) {
              EXPECT_EQ(seg.first, next);
              const desc::GridCell c = desc::grid_cell(f, seg.first);
              EXPECT_EQ(c.t, seg.t);
              EXPECT_EQ(c.y, seg.y);
              EXPECT_EQ(c.x, seg.x0);
              EXPECT_EQ(desc::strip_start(f, seg.x1 - 1), desc::strip_start(f, seg.x0));
              next += seg.x1 - seg.x0;
              return true;
            });
            EXPECT_EQ(next, b) << "segments of [" << a << ", " << b << ")";
          }
        }
      }
    }
  }
}

TEST(DescriptorGrid, GridTileTouchedIsExact) {
  std::mt19937 rng(4242);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  for (int iteration = 0; iteration < 300; ++iteration) {
    desc::GridFormula f{};
    f.frames = uniform(1, 3);
    f.rows = uniform(1, 9);
    f.cols = uniform(1, 9);
    f.strip = uniform(1, f.cols);
    f.shape = uniform(0, 1) ? desc::kShapeEllipse : desc::kShapeBox;
    const int32_t min_radius = f.shape == desc::kShapeEllipse ? 1 : 0;
    f.rt = f.frames == 1 && f.shape == desc::kShapeEllipse ? 1 : uniform(min_radius, 2);
    f.ry = uniform(min_radius, 3);
    f.rx = uniform(min_radius, 3);
    const int32_t extent = f.frames * f.rows * f.cols;
    const int32_t n = extent + uniform(0, 20);
    f.start = uniform(0, n - extent);
    f.center_start = uniform(0, n - extent);
    f.q_lo = uniform(0, n);
    f.q_hi = uniform(f.q_lo, n);
    for (int rect = 0; rect < 20; ++rect) {
      const int32_t q0 = uniform(0, n - 1), q1 = uniform(q0 + 1, n);
      const int32_t k0 = uniform(0, n - 1), k1 = uniform(k0 + 1, n);
      bool want = false;
      for (int32_t q = q0; q < q1 && !want; ++q) {
        for (int32_t k = k0; k < k1 && !want; ++k) want = formula_sees(f, q, k);
      }
      const bool touched = desc::grid_tile_touched(f, q0, q1, k0, k1, [&](int dt, int dy) {
        return static_cast<int>(desc::grid_half_width(f, dt, dy));
      });
      ASSERT_EQ(touched, want) << "iteration " << iteration << " q [" << q0 << ", " << q1 << ") k ["
                               << k0 << ", " << k1 << ")";
    }
  }
}

TEST(DescriptorGrid, CompleteRowsMatchTheDenseMask) {
  std::mt19937 rng(99);
  for (int iteration = 0; iteration < 60; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 120)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 120)(rng);
    const testing::RandomInstance inst = testing::random_instance(rng, nq, nk, iteration % 2 == 1);
    EXPECT_EQ(complete_rows(inst.rows), testing::rows_from_dense(inst.expected));
  }
  const GridMask mask = text_and_grid(8, disk(11, 3));
  EXPECT_EQ(complete_rows(mask.rows), testing::rows_from_dense(mask.expected));
}

}  // namespace
}  // namespace cm
