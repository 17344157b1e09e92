// The work rules of launches that leave SMs idle (kernels/sm90/work_splits.h): the parts of a
// row; for the forward (fwd_splits.h, fwd_packing.h) the automatic split count, the workspace's
// layout and which GQA groups share tiles. (The backward's head splits: bwd_head_splits_test.cu.)
#include "fwd_packing.h"
#include "fwd_splits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace cm::sm90 {
namespace {

// The parts cover [0, tiles) once, in order, and their sizes differ by at most one.
TEST(FwdSplits, PartsCoverTheRowInBalancedOrder) {
  for (int tiles = 0; tiles <= 40; ++tiles) {
    for (int splits = 1; splits <= 9; ++splits) {
      SCOPED_TRACE(std::to_string(tiles) + " tiles in " + std::to_string(splits) + " parts");
      int next = 0, fewest = tiles, most = 0;
      for (int s = 0; s < splits; ++s) {
        const TileRange part = split_range(tiles, s, splits);
        EXPECT_EQ(part.begin, next);
        EXPECT_GE(part.count, 0);
        next = part.begin + part.count;
        fewest = std::min(fewest, part.count);
        most = std::max(most, part.count);
      }
      EXPECT_EQ(next, tiles);
      EXPECT_LE(most - fewest, 1);
    }
  }
}

// Examples worked by hand from the rule: the estimate t(s) = waves(s) (10 ceil(longest / s) +
// 14) in tenths of a tile, waves(s) = ceil(items s / sms), minimised over 1 to min(256,
// longest / 2), the fewest parts among equals.
TEST(FwdSplits, AutomaticCount) {
  EXPECT_EQ(auto_num_splits(132, 132, 256), 1);  // the items fill the SMs
  EXPECT_EQ(auto_num_splits(500, 132, 256), 1);
  EXPECT_EQ(auto_num_splits(16, 132, 3), 1);  // parts of two tiles or more: at most one
  EXPECT_EQ(auto_num_splits(0, 132, 256), 1);
  // One decoding row of 8 KV heads: t(15) = 1 wave of 18 tiles = 194, t(16) = 16 tiles = 174,
  // t(32) = 2 waves of 8 = 188, t(33) = 2 waves of 8 (7.76) = 188.
  EXPECT_EQ(auto_num_splits(8, 132, 256), 16);
  // 16 items: t(8) = 1 wave of 32 = 334; t(16) = 2 waves of 16 = 348; t(33) = 4 waves of 8.
  EXPECT_EQ(auto_num_splits(16, 132, 256), 8);
  // Up to 8 tiles per row allows 4 parts: t(4) = 1 wave of 2 = 34.
  EXPECT_EQ(auto_num_splits(16, 132, 8), 4);
  // One item: 128 parts of 2 tiles, one wave (34); 116 parts would take 3 tiles each (44).
  EXPECT_EQ(auto_num_splits(1, 132, 256), 128);
  // 100 items: t(1) = 2574; t(5) = 4 waves of 52 = 2136; t(9) = 7 waves of 29 = 2128; t(13) =
  // 10 waves of 20 = 2140; t(33) = 25 waves of 8 = 2350.
  EXPECT_EQ(auto_num_splits(100, 132, 256), 9);
  // Two rows' worth of 64 items (B = 8 decoding): t(2) = 1 wave of 128 = 1294, t(4) = 2 waves
  // of 64 = 1308.
  EXPECT_EQ(auto_num_splits(64, 132, 256), 2);
}

TEST(FwdSplits, WorkspaceLayout) {
  const FwdWorkspace direct = fwd_workspace(0, 1000, 128);
  EXPECT_EQ(direct.total, 256u);  // the work counter alone
  // 3 parts of 10 rows: 120 bytes of LSE rounded to 256, then 3 * 10 * 64 floats of O.
  const FwdWorkspace parts = fwd_workspace(3, 10, 64);
  EXPECT_EQ(parts.lse_offset, 256u);
  EXPECT_EQ(parts.out_offset, 512u);
  EXPECT_EQ(parts.total, 512u + 3u * 10u * 64u * 4u);
}

// A GQA group shares tiles when it divides the tile's 128 rows, one mask serves every head and
// each head's rows fit its share of the tile.
TEST(FwdPacking, HeadsPerItem) {
  EXPECT_EQ(heads_per_item(32, 8, 1, 1), 4);   // decoding, 4 heads per KV head
  EXPECT_EQ(heads_per_item(32, 8, 1, 32), 4);  // 32 rows of 4 heads fill the tile
  EXPECT_EQ(heads_per_item(32, 8, 1, 33), 1);  // no longer
  EXPECT_EQ(heads_per_item(64, 1, 1, 2), 64);  // MQA
  EXPECT_EQ(heads_per_item(32, 8, 32, 1), 1);  // a mask per head
  EXPECT_EQ(heads_per_item(12, 4, 1, 1), 1);   // a group of 3 does not divide 128
  EXPECT_EQ(heads_per_item(16, 16, 1, 1), 1);  // no group
  EXPECT_EQ(heads_per_item(256, 1, 1, 1), 1);  // more heads than tile rows
}

}  // namespace
}  // namespace cm::sm90
