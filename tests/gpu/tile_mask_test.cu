// The kernels' element masking (kernels/sm90/tile_mask.cuh), run on the host. For every tile
// that either form of a descriptor lists at the kernels' 128 x 128 tiling, the bits that
// tile_mask and row_visibility give each row must equal a dense mask made without the
// descriptor, column by column: under the forward's QuadColumns (column 8j + 2q + e is bit
// 2j + e of quad word q) and under each of the backward's four WindowColumns words (column
// 32w + i is bit i of word w), with the columns past nk of the last key tile clear. The dense
// masks are random instances drawn densely (tests/descriptor/mask_fixtures.h: bands, bitmaps,
// grids in row-major and strip layouts, empty rows) and the bundled examples evaluated by the
// brute-force oracle (tests/support/brute_force.h).
#include "kernel_cases.h"
#include "tile_mask.cuh"

#include <compilemask/descriptor.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cm::sm90 {
namespace {

using kernel_test::KernelCase;
using kernel_test::kTile;
static_assert(kTile == kMaskTileN, "the kernels mask 128-column tiles");
constexpr int kWords = kTile / 32;

// Column c of a tile as the forward's quad word and bit (see quad_count_below).
int quad_of(int c) {
  return (c % 8) / 2;
}
int quad_bit(int c) {
  return 2 * (c / 8) + c % 2;
}

// Checks the masking of every tile of mask (b, h) of one case.
class MaskingChecker {
 public:
  MaskingChecker(const KernelCase& c, int32_t b, int32_t h)
      : c_(c), blob_(c.descriptor()), b_(b), h_(h) {}

  // Every row of tile (m, n) masked by pattern `index` (negative: a full tile), as both kernels
  // compute it. Returns false, after one failure message, at the first wrong bit.
  bool tile(int32_t m, int32_t n, int index) {
    // The backward's form, and the forward's with the strip divisor.
    for (TileMask p : {tile_mask(blob_, index), tile_mask_for_rows(blob_, index)}) {
      if (!rows_of(p, m, n, index)) return false;
    }
    return true;
  }

  // Every row of tile (m, n) under mask p, as both kernels' column forms compute it.
  bool rows_of(TileMask& p, int32_t m, int32_t n, int index) {
    const desc::TileSpan rows = desc::q_tile_span(blob_, m), keys = desc::k_tile_span(blob_, n);
    const int q0 = rows.begin, k0 = keys.begin;
    const int key_limit = keys.size();
    const QuadColumns quad_columns(host_quad_bits_below());
    for (int r = 0; r < rows.size(); ++r) {
      p.at_keys(k0, quad_columns);
      const QuadBits quads = row_visibility(blob_, p, q0, r, key_limit, quad_columns);
      uint32_t words[kWords];
      for (int w = 0; w < kWords; ++w) {
        p.at_keys(k0, WindowColumns(w));
        words[w] = row_visibility(blob_, p, q0, r, key_limit, WindowColumns(w));
      }
      for (int c = 0; c < kTile; ++c) {
        const bool want = c < key_limit && c_.visible(b_, h_, q0 + r, k0 + c);
        const bool quad = (quads.quad[quad_of(c)] >> quad_bit(c)) & 1u;
        const bool window = (words[c / 32] >> (c % 32)) & 1u;
        if (quad != want || window != want) {
          ADD_FAILURE() << c_.name << " (b, h) = (" << b_ << ", " << h_ << "): tile (" << m << ", "
                        << n << ") pattern " << index
                        << (p.by_strip.d != 0 ? " (strip divisor)" : "") << " row " << r
                        << " column " << c << ": visible " << want << ", QuadColumns " << quad
                        << ", WindowColumns " << window;
          return false;
        }
      }
      ++rows_checked_;
    }
    return true;
  }

  // Both forms: the forward lists key tiles per query tile, the transposed form (which the
  // backward walks) query tiles per key tile. Empty members of sparse runs are skipped, as the
  // kernels skip them.
  void all_tiles() {
    const desc::Instance& inst = desc::mask_of(blob_, b_, h_);
    const desc::Header& hd = desc::header(blob_);
    for (const bool forward : {true, false}) {
      const int32_t majors = forward ? hd.num_q_tiles : hd.num_k_tiles;
      for (int32_t t = 0; t < majors; ++t) {
        const desc::TileRow& row =
            forward ? desc::q_tile(blob_, inst, t) : desc::k_tile(blob_, inst, t);
        auto check = [&](int32_t other, int index) {
          return forward ? tile(t, other, index) : tile(other, t, index);
        };
        const desc::FullRun* full = desc::full_runs(blob_, row);
        for (int i = 0; i < row.full_count; ++i) {
          for (int32_t o = full[i].first; o < full[i].first + full[i].count; ++o) {
            if (!check(o, -1)) return;
          }
        }
        const desc::PartialRun* partial = desc::partial_runs(blob_, row);
        for (int i = 0; i < row.partial_count; ++i) {
          const desc::Pattern& p = desc::pattern(blob_, partial[i].pattern);
          for (int32_t o = partial[i].first; o < partial[i].first + partial[i].count; ++o) {
            const int32_t m = forward ? t : o, n = forward ? o : t;
            if (!desc::partial_tile_nonempty(blob_, p, m, n)) continue;
            if (!check(o, static_cast<int>(partial[i].pattern))) return;
          }
        }
      }
    }
  }

  int64_t rows_checked() const { return rows_checked_; }

 private:
  const KernelCase& c_;
  const void* blob_;
  int32_t b_, h_;
  int64_t rows_checked_ = 0;
};

// Every column range, including empty, reversed and out-of-tile bounds, as quad words and as
// window words, against the columns one by one.
TEST(KernelMasking, ColumnRangesMatchTheirColumns) {
  const QuadColumns quad_columns(host_quad_bits_below());
  for (int lo = -9; lo <= kTile + 9; ++lo) {
    for (int hi = -9; hi <= kTile + 9; ++hi) {
      const QuadBits quads = quad_columns.range(lo, hi);
      for (int c = 0; c < kTile; ++c) {
        const bool want = lo <= c && c < hi;
        const bool quad = (quads.quad[quad_of(c)] >> quad_bit(c)) & 1u;
        const bool window = (WindowColumns(c / 32).range(lo, hi) >> (c % 32)) & 1u;
        ASSERT_EQ(quad, want) << "QuadColumns range [" << lo << ", " << hi << ") column " << c;
        ASSERT_EQ(window, want) << "WindowColumns range [" << lo << ", " << hi << ") column " << c;
      }
    }
  }
}

TEST(KernelMasking, RandomInstancesMatchTheirDenseMasks) {
  std::mt19937 rng(90);
  std::array<int, desc::kPatternRowTable + 1> patterns_of_kind{};
  int64_t rows = 0;
  for (int iteration = 0; iteration < 120; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 700)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 700)(rng);
    const KernelCase c = kernel_test::random_case(rng, nq, nk, iteration % 2 == 1,
                                                  "iteration " + std::to_string(iteration));
    const desc::Header& hd = desc::header(c.descriptor());
    for (int32_t i = 0; i < hd.num_patterns; ++i) {
      ++patterns_of_kind[desc::pattern(c.descriptor(), static_cast<uint32_t>(i)).kind];
    }
    MaskingChecker checker(c, 0, 0);
    checker.all_tiles();
    rows += checker.rows_checked();
  }
  // The draws must reach every pattern kind and the rows of many tiles.
  EXPECT_GT(patterns_of_kind[desc::kPatternBands], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternBitmap], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternGrid], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternGridSparse], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternRowRanges], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternRowTable], 0);
  EXPECT_GT(rows, 100000);
}

TEST(KernelMasking, BundledExamplesMatchTheBruteForceOracle) {
  kernel_test::for_each_example([](const KernelCase& c) {
    for (int32_t b = 0; b < c.batch; ++b) {
      for (int32_t h = 0; h < c.heads; ++h) MaskingChecker(c, b, h).all_tiles();
    }
  });
}

}  // namespace
}  // namespace cm::sm90
