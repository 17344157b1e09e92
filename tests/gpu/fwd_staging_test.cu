// The forward epilogue's staging layout (kernels/sm90/fwd_staging.h), on the host: fwd_staged
// places each (row, column) of a 128-row O tile at its own element of the Q buffer, every row
// within its own Q row's lines; and the identities that let fwd_consumer.cuh's store() address
// all of a thread's staging stores and copy-out reads from one base each hold for every
// consumer thread, without bank conflicts.
#include "fwd_staging.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace cm::sm90 {
namespace {

constexpr int kBlockM = 128;  // rows of a query tile (FwdConfig::kBlockM)
constexpr int kBanks = 32;    // 4-byte shared-memory banks

template <int kHeadDim>
void check_layout() {
  SCOPED_TRACE("head dim " + std::to_string(kHeadDim));
  std::set<int> offsets;
  for (int row = 0; row < kBlockM; ++row) {
    for (int col = 0; col < kHeadDim; ++col) {
      const int at = fwd_staged<kBlockM>(row, col);
      ASSERT_GE(at, 0);
      ASSERT_LT(at, kBlockM * kHeadDim);
      ASSERT_TRUE(offsets.insert(at).second) << "row " << row << " column " << col << " again";
      // The 128-byte line (64 elements) of row `row` in column block col / 64 of the Q tile.
      EXPECT_EQ(at / 64, (col / 64) * kBlockM + row) << "row " << row << " column " << col;
    }
  }
}

// The staging stores: consumer thread t writes, for h in {0, 1} and j < kHeadDim / 8, the pair
// (row first + 8h, columns 8j + 2 quad and the next) with one 32-bit store from
// base(j % 8) + 8h * 64 + (j / 8) * kBlockM * 64.
template <int kHeadDim>
void check_staging_stores() {
  SCOPED_TRACE("head dim " + std::to_string(kHeadDim));
  for (int warp = 0; warp < 8; ++warp) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < kHeadDim / 8; ++j) {
        std::set<int> banks;
        for (int lane = 0; lane < 32; ++lane) {
          const int t = 32 * warp + lane;
          const int quad = t % 4;
          const int row = fwd_first_row(t) + 8 * h;
          const int col = 8 * j + 2 * quad;
          const int at = fwd_staged<kBlockM>(row, col);
          ASSERT_EQ(fwd_staged<kBlockM>(row, col + 1), at + 1) << "a pair is one 32-bit word";
          ASSERT_EQ(at % 2, 0) << "a pair is 4-byte aligned";
          const int base = fwd_staged<kBlockM>(fwd_first_row(t), 8 * (j % 8) + 2 * quad);
          ASSERT_EQ(at, base + 8 * h * 64 + (j / 8) * (kBlockM * 64))
              << "thread " << t << " h " << h << " j " << j;
          banks.insert(at / 2 % kBanks);
        }
        EXPECT_EQ(banks.size(), 32u) << "warp " << warp << " h " << h << " j " << j;
      }
    }
  }
}

// The copy out: thread t of warpgroup wg reads the 16-byte chunks chunk + kThreadChunks c of
// rows first + kRows k (first = 64 wg + t / kThreadChunks, chunk = t % kThreadChunks, at most
// 16 chunk columns per pass) from base + k * kRows * 64 + c * 2 * kBlockM * 64; together the
// warpgroup's threads read each chunk of its 64 rows once, and each 8 consecutive lanes (one
// phase of a 128-bit access) read 8 different 16-byte bank groups.
template <int kHeadDim>
void check_copy_out() {
  SCOPED_TRACE("head dim " + std::to_string(kHeadDim));
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kThreadChunks = kChunks < 16 ? kChunks : 16;
  constexpr int kRows = 128 / kThreadChunks;
  for (int wg = 0; wg < 2; ++wg) {
    std::set<std::pair<int, int>> read;
    for (int k = 0; k < 64 / kRows; ++k) {
      for (int c = 0; c < kChunks / kThreadChunks; ++c) {
        for (int phase = 0; phase < 128 / 8; ++phase) {
          std::set<int> groups;
          for (int lane = 0; lane < 8; ++lane) {
            const int t = 8 * phase + lane;
            const int first = 64 * wg + t / kThreadChunks;
            const int chunk = t % kThreadChunks + kThreadChunks * c;
            const int row = first + kRows * k;
            const int at = fwd_staged<kBlockM>(row, 8 * chunk);
            for (int e = 0; e < 8; ++e) {
              ASSERT_EQ(fwd_staged<kBlockM>(row, 8 * chunk + e), at + e) << "a chunk is contiguous";
            }
            ASSERT_EQ(at, fwd_staged<kBlockM>(first, 8 * (t % kThreadChunks)) + k * kRows * 64 +
                              c * 2 * kBlockM * 64)
                << "thread " << t << " k " << k << " c " << c;
            ASSERT_TRUE(read.insert({row, chunk}).second) << "row " << row << " chunk " << chunk;
            EXPECT_GE(row, 64 * wg);
            EXPECT_LT(row, 64 * wg + 64);
            groups.insert(at / 8 % 8);
          }
          EXPECT_EQ(groups.size(), 8u) << "warpgroup " << wg << " k " << k << " phase " << phase;
        }
      }
    }
    EXPECT_EQ(read.size(), static_cast<size_t>(64 * kChunks)) << "warpgroup " << wg;
  }
}

TEST(FwdStaging, EveryElementHasItsOwnPlaceInItsQRow) {
  check_layout<64>();
  check_layout<128>();
  check_layout<256>();
}

TEST(FwdStaging, StagingStoresFromEightBases) {
  check_staging_stores<64>();
  check_staging_stores<128>();
  check_staging_stores<256>();
}

TEST(FwdStaging, CopyOutFromOneBase) {
  check_copy_out<64>();
  check_copy_out<128>();
  check_copy_out<256>();
}

}  // namespace
}  // namespace cm::sm90
