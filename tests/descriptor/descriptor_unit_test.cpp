// Unit tests of the descriptor builder and readers: a hand-checked causal layout, pattern kinds,
// input validation, corruption detection and the JSON dump.
#include <compilemask/compilemask.h>

#include "descriptor/build.h"
#include "descriptor/decode.h"
#include "mask_fixtures.h"

#include <gtest/gtest.h>

#include <array>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <vector>

namespace cm {
namespace {

using testing::Dense;

Dense dense_of(int32_t nq, int32_t nk, const std::function<bool(int32_t, int32_t)>& visible) {
  Dense d(nq, nk);
  for (int32_t q = 0; q < nq; ++q) {
    for (int32_t k = 0; k < nk; ++k) d.at(q, k) = visible(q, k) ? 1 : 0;
  }
  return d;
}

std::vector<uint64_t> build_one(const Dense& d, const Tiling& tiling, PlanStats& stats) {
  InstanceRows rows;
  rows.all = testing::rows_from_dense(d);
  return build_descriptor({rows}, {0}, 1, 1, tiling, stats);
}

void expect_equal_dense(const std::vector<uint64_t>& blob, const Dense& expected) {
  for (DescriptorForm form : {DescriptorForm::kForward, DescriptorForm::kTransposed}) {
    EXPECT_EQ(decode_dense(blob.data(), 0, 0, form), expected.cells);
  }
}

TEST(DescriptorUnit, CausalAt512HasTheExpectedRunsCostsAndOrder) {
  const Dense causal = dense_of(512, 512, [](int32_t q, int32_t k) { return k <= q; });
  PlanStats stats;
  const auto blob = build_one(causal, {128, 128}, stats);
  verify_descriptor(blob.data(), blob.size() * 8);
  expect_equal_dense(blob, causal);

  EXPECT_EQ(stats.full_tiles, 6);     // below the diagonal
  EXPECT_EQ(stats.partial_tiles, 4);  // the diagonal, all one triangle pattern
  EXPECT_EQ(stats.empty_tiles, 6);
  EXPECT_EQ(stats.patterns, 1);
  EXPECT_EQ(stats.visible_pairs, 512 * 513 / 2);

  const void* b = blob.data();
  const desc::Instance& inst = desc::instance(b, 0);
  for (int m = 0; m < 4; ++m) {
    const desc::TileRow& row = desc::q_tile(b, inst, m);
    ASSERT_EQ(row.full_count, m == 0 ? 0 : 1);
    if (m > 0) {
      EXPECT_EQ(desc::full_runs(b, row)[0].first, 0);
      EXPECT_EQ(desc::full_runs(b, row)[0].count, m);
    }
    ASSERT_EQ(row.partial_count, 1);
    EXPECT_EQ(desc::partial_runs(b, row)[0].first, m);
    EXPECT_EQ(desc::partial_runs(b, row)[0].count, 1);
    EXPECT_FLOAT_EQ(row.cost, static_cast<float>(m) + 1.25f);
    // Key tile n is partial on query tile n and full on the 3 - n tiles below it.
    const desc::TileRow& col = desc::k_tile(b, inst, m);
    EXPECT_EQ(col.full_count, m == 3 ? 0 : 1);
    EXPECT_FLOAT_EQ(col.cost, static_cast<float>(3 - m) + 1.25f);
  }
  const uint16_t* order = desc::at<uint16_t>(b, inst.fwd_order_offset);
  EXPECT_EQ((std::vector<uint16_t>(order, order + 4)), (std::vector<uint16_t>{3, 2, 1, 0}));
  const uint16_t* bwd = desc::at<uint16_t>(b, inst.bwd_order_offset);
  EXPECT_EQ((std::vector<uint16_t>(bwd, bwd + 4)), (std::vector<uint16_t>{0, 1, 2, 3}));

  // The triangle: row r sees [0, r + 1), one band of slope (0, 1).
  const desc::Pattern& p = desc::pattern(b, 0);
  ASSERT_EQ(p.kind, desc::kPatternBands);
  ASSERT_EQ(p.count, 1);
  const desc::RowBand& band = *desc::at<desc::RowBand>(b, p.data_offset);
  EXPECT_EQ(band.row_first, 0);
  EXPECT_EQ(band.row_last, 127);
  EXPECT_EQ(band.lo0, 0);
  EXPECT_EQ(band.lo_slope, 0);
  EXPECT_EQ(band.hi0, 1);
  EXPECT_EQ(band.hi_slope, 1);
}

TEST(DescriptorUnit, CheckerboardTileUsesABitmap) {
  const Dense board = dense_of(16, 16, [](int32_t q, int32_t k) { return (q + k) % 2 == 0; });
  PlanStats stats;
  const auto blob = build_one(board, {16, 16}, stats);
  verify_descriptor(blob.data(), blob.size() * 8);
  ASSERT_EQ(stats.patterns, 1);
  EXPECT_EQ(desc::pattern(blob.data(), 0).kind, desc::kPatternBitmap);
  expect_equal_dense(blob, board);
}

// Row q sees its own w(q) most recent keys, w drawn per row: each row starts its own band, so a
// 128 x 128 tile needs far more than four bands, and the builder stores each row's range.
Dense per_row_windows(int32_t n, int32_t max_window, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> window(static_cast<size_t>(n));
  for (int32_t& w : window) w = std::uniform_int_distribution<int32_t>(1, max_window)(rng);
  return dense_of(
      n, n, [&](int32_t q, int32_t k) { return k <= q && k > q - window[static_cast<size_t>(q)]; });
}

// The blob of `rows` with 128 x 128 tiles, checked to decode to them.
std::vector<uint64_t> build_checked(const Dense& rows) {
  PlanStats stats;
  auto blob = build_one(rows, {128, 128}, stats);
  verify_descriptor(blob.data(), blob.size() * 8);
  expect_equal_dense(blob, rows);
  return blob;
}

TEST(DescriptorUnit, PerRowWindowsShareTheirQueryTilesRowTable) {
  const Dense windows = per_row_windows(384, 300, 7);
  const auto blob = build_checked(windows);
  // Per query tile: its row table's offset, and its row-table tiles.
  std::map<int32_t, uint32_t> table_of_tile_row;
  int row_table_tiles = 0;
  const desc::Instance& inst = desc::instance(blob.data(), 0);
  for (int32_t m = 0; m < desc::header(blob.data()).num_q_tiles; ++m) {
    const desc::TileRow& row = desc::q_tile(blob.data(), inst, m);
    const desc::PartialRun* runs = desc::partial_runs(blob.data(), row);
    for (int i = 0; i < row.partial_count; ++i) {
      const desc::Pattern& p = desc::pattern(blob.data(), runs[i].pattern);
      ASSERT_NE(p.kind, desc::kPatternBitmap) << "tile row " << m;
      ASSERT_NE(p.kind, desc::kPatternRowRanges) << "tile row " << m;
      if (p.kind == desc::kPatternBands) {
        EXPECT_LE(p.count, 4) << "tile row " << m;
        continue;
      }
      ASSERT_EQ(p.kind, desc::kPatternRowTable) << "tile row " << m;
      EXPECT_EQ(p.count, 1) << "tile row " << m;  // one window per row
      const auto it = table_of_tile_row.emplace(m, p.data_offset).first;
      EXPECT_EQ(it->second, p.data_offset) << "tile row " << m << " has two tables";
      // The table holds row q's window in key columns.
      const desc::KeyInterval* table = desc::at<desc::KeyInterval>(blob.data(), p.data_offset);
      const int32_t q = desc::q_tile_span(blob.data(), m).begin + 17;
      EXPECT_EQ(table[17].hi, q + 1) << "tile row " << m;
      EXPECT_EQ(windows.at(q, table[17].lo), 1);
      EXPECT_TRUE(table[17].lo == 0 || windows.at(q, table[17].lo - 1) == 0);
      row_table_tiles += runs[i].count;
    }
  }
  EXPECT_EQ(table_of_tile_row.size(), 3u);  // every query tile has tiles of more than 4 bands
  EXPECT_GT(row_table_tiles, 3);            // so some table serves two key tiles or more
}

// Rows of 128 x 256 keys with `windows(q)` windows of 5 keys in each 128-key half, starting
// at random columns: past four intervals per row, so tiles keep their own row ranges.
Dense windows_in_both_halves(uint32_t seed, const std::function<int(int32_t)>& windows,
                             std::vector<std::array<int32_t, 3>>& starts) {
  std::mt19937 rng(seed);
  starts.assign(128, {});
  for (auto& row : starts) {
    for (int32_t& s : row) s = std::uniform_int_distribution<int32_t>(0, 120)(rng);
  }
  return dense_of(128, 256, [&](int32_t q, int32_t k) {
    const auto& s = starts[static_cast<size_t>(q)];
    for (int i = 0; i < windows(q); ++i) {
      const int32_t c = k % 128;
      if (c >= s[static_cast<size_t>(i)] && c < s[static_cast<size_t>(i)] + 5) return true;
    }
    return false;
  });
}

TEST(DescriptorUnit, RowRangesHoldEveryPieceOfTheRichestRow) {
  // Rows with 1, 2 or 3 windows per tile (2 to 6 in the row), so the bands are many, a row
  // holds up to 3 pieces in a tile, and the rows of 6 are too many for a row table.
  std::vector<std::array<int32_t, 3>> starts;
  const Dense rows = windows_in_both_halves(
      11, [](int32_t q) { return 1 + q % 3; }, starts);
  const auto blob = build_checked(rows);
  ASSERT_EQ(desc::header(blob.data()).num_patterns, 1);  // both tiles have the same pieces
  const desc::Pattern& p = desc::pattern(blob.data(), 0);
  EXPECT_EQ(p.kind, desc::kPatternRowRanges);
  EXPECT_EQ(p.count, 3);
  // The JSON dump lists each row's ranges; row 0 has one window.
  const std::string row0 = "\"kind\": \"row_ranges\", \"row_ranges\": [[[" +
                           std::to_string(starts[0][0]) + ", " + std::to_string(starts[0][0] + 5) +
                           "]], [";
  const std::string json = descriptor_to_json(blob.data());
  EXPECT_NE(json.find(row0), std::string::npos) << row0 << "\n" << json;
}

TEST(DescriptorUnit, RowTableHoldsEveryIntervalOfTheRichestRow) {
  // Rows with 1 or 2 windows per tile (2 or 4 in the row): one table, 4 intervals per row.
  std::vector<std::array<int32_t, 3>> starts;
  const Dense rows = windows_in_both_halves(
      11, [](int32_t q) { return 1 + q % 2; }, starts);
  const auto blob = build_checked(rows);
  ASSERT_EQ(desc::header(blob.data()).num_patterns,
            1);  // both tiles: one table, neither half empty
  const desc::Pattern& p = desc::pattern(blob.data(), 0);
  EXPECT_EQ(p.kind, desc::kPatternRowTable);
  EXPECT_EQ(p.count, 4);
  EXPECT_EQ(p.empty_halves, 0);
  // The JSON dump lists each row's intervals in key columns; row 0 has one window per tile
  // (two when they touch across the tiles' boundary, which these starts keep apart).
  const int32_t s = starts[0][0];
  const std::string row0 = "\"kind\": \"row_table\", \"row_table\": [[[" + std::to_string(s) +
                           ", " + std::to_string(s + 5) + "], [" + std::to_string(128 + s) + ", " +
                           std::to_string(128 + s + 5) + "]], [";
  const std::string json = descriptor_to_json(blob.data());
  EXPECT_NE(json.find(row0), std::string::npos) << row0 << "\n" << json;
}

// CLEAR-like: `text` tokens see and are seen by everything; an s x s image in strips of
// `strip` columns sees a disk of radius 3 around each token. Builds the descriptor with
// 16 x 16 tiles, checks it against the brute-force formula everywhere, and returns it.
std::vector<uint64_t> build_text_and_disk(int32_t text, int32_t s, int32_t strip,
                                          PlanStats& stats) {
  const int32_t n = text + s * s;
  desc::GridFormula disk{};
  disk.q_lo = text;
  disk.q_hi = n;
  disk.start = disk.center_start = text;
  disk.frames = 1;
  disk.rows = disk.cols = s;
  disk.strip = strip;
  disk.shape = desc::kShapeEllipse;
  disk.rt = 1;
  disk.ry = disk.rx = 3;
  const Dense all = dense_of(n, n, [&](int32_t q, int32_t k) {
    return q < text || k < text || testing::formula_sees(disk, q, k);
  });
  const Dense residual = dense_of(n, n, [&](int32_t q, int32_t k) { return q < text || k < text; });
  InstanceRows rows;  // `all` stays empty: formula rows are not listed
  rows.formulas = {disk};
  rows.row_formula.assign(static_cast<size_t>(n), -1);
  for (int32_t q = text; q < n; ++q) rows.row_formula[static_cast<size_t>(q)] = 0;
  rows.residual = testing::rows_from_dense(residual);
  auto blob = build_descriptor({rows}, {0}, 1, 1, {16, 16}, stats);
  verify_descriptor(blob.data(), blob.size() * 8);
  expect_equal_dense(blob, all);
  return blob;
}

// How many of the descriptor's patterns have a kind that `is_kind` accepts.
int count_patterns(const std::vector<uint64_t>& blob, const PlanStats& stats,
                   const std::function<bool(uint8_t)>& is_kind) {
  int count = 0;
  for (int32_t i = 0; i < stats.patterns; ++i) {
    count += is_kind(desc::pattern(blob.data(), static_cast<uint32_t>(i)).kind);
  }
  return count;
}

TEST(DescriptorUnit, GridRowsUseGridPatternsAndDecodeExactly) {
  PlanStats stats;
  const auto blob = build_text_and_disk(16, 12, 12, stats);  // row-major
  EXPECT_EQ(stats.grid_formulas, 1);
  EXPECT_GE(count_patterns(blob, stats, desc::is_grid_kind), 1);
}

TEST(DescriptorUnit, StripGridTilesShareBitmapsAndDecodeExactly) {
  // A 40 x 40 image in 8-column strips: 16 x 16 tiles cover two grid rows of a strip, and the
  // interior tiles repeat a few geometries, so far fewer bitmaps than partial tiles.
  PlanStats stats;
  const auto blob = build_text_and_disk(16, 40, 8, stats);
  EXPECT_EQ(count_patterns(blob, stats, desc::is_grid_kind), 0);
  const int bitmaps =
      count_patterns(blob, stats, [](uint8_t kind) { return kind == desc::kPatternBitmap; });
  EXPECT_GE(bitmaps, 1);
  EXPECT_LT(4 * int64_t{bitmaps}, stats.partial_tiles) << bitmaps << " bitmaps";
}

TEST(DescriptorUnit, RejectsGridFormulasOutsideTheirRange) {
  // A 6 x 6 image after 4 text tokens, seeing a box around each token.
  const int32_t n = 40;
  desc::GridFormula box{};
  box.q_lo = 4;
  box.q_hi = n;
  box.start = box.center_start = 4;
  box.frames = 1;
  box.rows = box.cols = box.strip = 6;
  box.shape = desc::kShapeBox;
  box.rt = 0;
  box.ry = box.rx = 1;
  auto build = [&](const desc::GridFormula& f) {
    InstanceRows rows;
    rows.formulas = {f};
    rows.row_formula.assign(static_cast<size_t>(n), -1);
    for (int32_t q = 4; q < n; ++q) rows.row_formula[static_cast<size_t>(q)] = 0;
    rows.residual =
        testing::rows_from_dense(dense_of(n, n, [](int32_t, int32_t) { return false; }));
    PlanStats stats;
    return build_descriptor({rows}, {0}, 1, 1, {16, 16}, stats);
  };
  auto expect_rejected = [&](desc::GridFormula f, const std::string& rule) {
    try {
      build(f);
      ADD_FAILURE() << "formula accepted: " << rule;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  const std::string positions = "must lie in [0, 2^31)";
  desc::GridFormula f = box;
  f.start = INT32_MAX - 10;
  expect_rejected(f, positions);
  f = box;
  f.center_start = -1;
  expect_rejected(f, positions);
  f = box;
  f.rows = f.cols = f.strip = 65536;  // 2^32 tokens
  expect_rejected(f, positions);
  f = box;
  f.q_hi = n + 1;
  expect_rejected(f, "query rows [q_lo, q_hi) must lie in [0, nq]");

  // The same rules hold for a blob from elsewhere: verify rejects a formula grown past int32.
  std::vector<uint64_t> blob = build(box);
  verify_descriptor(blob.data(), blob.size() * 8);
  auto* formula =
      reinterpret_cast<desc::GridFormula*>(reinterpret_cast<unsigned char*>(blob.data()) +
                                           desc::header(blob.data()).grid_formulas_offset);
  formula->rows = formula->cols = 1 << 20;
  try {
    verify_descriptor(blob.data(), blob.size() * 8);
    ADD_FAILURE() << "verify accepted a grid of 2^40 tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(positions), std::string::npos) << e.what();
  }
}

TEST(DescriptorUnit, RejectsBadTilings) {
  InstanceRows rows;
  rows.all = testing::rows_from_dense(Dense(4, 4));
  PlanStats stats;
  for (const Tiling& bad : {Tiling{20, 128}, Tiling{128, 0}, Tiling{272, 128}, Tiling{128, 8}}) {
    try {
      build_descriptor({rows}, {0}, 1, 1, bad, stats);
      ADD_FAILURE() << "tiling " << bad.m << "x" << bad.n << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("must be a multiple of 16 in [16, 256]"),
                std::string::npos)
          << e.what();
    }
  }
  InstanceRows tall;
  tall.all.nq = 16 * 65536;
  tall.all.nk = 16;
  EXPECT_THROW(build_descriptor({tall}, {0}, 1, 1, {16, 16}, stats), Error);
}

TEST(DescriptorUnit, RejectsMalformedRowsAndMaps) {
  InstanceRows rows;
  rows.all = testing::rows_from_dense(Dense(2, 8));
  rows.all.intervals = {{4, 6}, {1, 3}};
  rows.all.offsets = {0, 2, 2};
  PlanStats stats;
  try {
    build_descriptor({rows}, {0}, 1, 1, {16, 16}, stats);
    ADD_FAILURE() << "unsorted intervals were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 0: intervals must be sorted"), std::string::npos)
        << e.what();
  }
  rows.all.intervals = {{1, 3}, {4, 9}};
  EXPECT_THROW(build_descriptor({rows}, {0}, 1, 1, {16, 16}, stats), Error);
  rows.all.intervals = {{1, 3}, {4, 6}};
  EXPECT_THROW(build_descriptor({rows}, {1}, 1, 1, {16, 16}, stats), Error);
  EXPECT_THROW(build_descriptor({rows}, {0, 0}, 1, 1, {16, 16}, stats), Error);
  EXPECT_NO_THROW(build_descriptor({rows}, {0, 0}, 1, 2, {16, 16}, stats));
}

TEST(DescriptorUnit, DecodeNamesAMaskOrRowsOutsideTheDescriptor) {
  PlanStats stats;
  const auto blob =
      build_one(dense_of(32, 32, [](int32_t q, int32_t k) { return k <= q; }), {16, 16}, stats);
  const auto expect_error = [&](int32_t b, int32_t h, RowWindow rows, const std::string& rule) {
    try {
      decode_dense(blob.data(), b, h, DescriptorForm::kForward, rows);
      ADD_FAILURE() << "no error for (" << b << ", " << h << ") rows [" << rows.begin << ", "
                    << rows.end << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  };
  expect_error(1, 0, {}, "descriptor: b 1 must be in [0, batch 1)");
  expect_error(-1, 0, {}, "descriptor: b -1 must be in [0, batch 1)");
  expect_error(0, 1, {}, "descriptor: h 1 must be in [0, heads 1)");
  expect_error(0, 0, {4, 33}, "rows [4, 33) are not a range inside [0, 32)");
  expect_error(0, 0, {5, 4}, "rows [5, 4) are not a range inside [0, 32)");
  EXPECT_EQ(decode_dense(blob.data(), 0, 0, DescriptorForm::kForward, {31, 32}).size(), 32u);
}

// Expects verification of a damaged `blob` to fail naming `rule`.
void expect_verify_error(const std::vector<uint64_t>& blob, const std::string& rule) {
  try {
    verify_descriptor(blob.data(), blob.size() * 8);
    ADD_FAILURE() << "corruption not detected: " << rule;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
  }
}

// Builds causal 512 / 128x128, lets `corrupt` damage a copy, and expects verification to fail
// naming `rule`.
void expect_verify_failure(const std::function<void(std::vector<uint64_t>&)>& corrupt,
                           const std::string& rule) {
  PlanStats stats;
  auto blob =
      build_one(dense_of(512, 512, [](int32_t q, int32_t k) { return k <= q; }), {128, 128}, stats);
  corrupt(blob);
  expect_verify_error(blob, rule);
}

template <class T>
T* mutable_at(std::vector<uint64_t>& blob, uint32_t offset) {
  return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(blob.data()) + offset);
}

TEST(DescriptorUnit, VerifyNamesTheBrokenRule) {
  expect_verify_failure([](auto& b) { mutable_at<desc::Header>(b, 0)->magic = 0; }, "bad magic");
  expect_verify_failure([](auto& b) { mutable_at<desc::Header>(b, 0)->version = 9; }, "version 9");
  expect_verify_failure(
      [](auto& b) {
        b.pop_back();
        b.pop_back();
      },
      "total_bytes");
  expect_verify_failure([](auto& b) { mutable_at<desc::Header>(b, 0)->patterns_offset = 1u << 30; },
                        "runs past the end");
  auto first_row = [](std::vector<uint64_t>& b) {
    const desc::Instance& inst = desc::instance(b.data(), 0);
    return mutable_at<desc::TileRow>(b, inst.q_tiles_offset + 3 * sizeof(desc::TileRow));
  };
  expect_verify_failure(
      [&](auto& b) { mutable_at<desc::FullRun>(b, first_row(b)->full_offset)->count = 9; },
      "out of range");
  expect_verify_failure(
      [&](auto& b) { mutable_at<desc::FullRun>(b, first_row(b)->full_offset)->count = 0; },
      "is empty or out of range");
  expect_verify_failure(
      [&](auto& b) { mutable_at<desc::PartialRun>(b, first_row(b)->partial_offset)->pattern = 7; },
      "pattern 7 is out of range");
  expect_verify_failure(
      [&](auto& b) { mutable_at<desc::PartialRun>(b, first_row(b)->partial_offset)->first = 2; },
      "runs overlap");
  expect_verify_failure(
      [&](auto& b) { mutable_at<desc::FullRun>(b, first_row(b)->full_offset)->count = 2; },
      "forward and transposed forms list different tiles");
  expect_verify_failure([&](auto& b) { first_row(b)->cost = 0.5f; }, "descending cost");
  expect_verify_failure(
      [](auto& b) {
        const uint32_t p = desc::header(b.data()).patterns_offset;
        mutable_at<desc::Pattern>(b, p)->kind = 7;
      },
      "unknown kind 7");
  // Causal's one pattern, the diagonal band, sees keys in both halves.
  expect_verify_failure(
      [](auto& b) {
        mutable_at<desc::Pattern>(b, desc::header(b.data()).patterns_offset)->empty_halves = 1;
      },
      "marks half 0 empty, but row 0 sees keys");
  expect_verify_failure(
      [](auto& b) {
        mutable_at<desc::Pattern>(b, desc::header(b.data()).patterns_offset)->empty_halves = 4;
      },
      "bits other than 0 and 1");
}

TEST(DescriptorUnit, VerifyRejectsRowRangesPastTheTile) {
  std::vector<std::array<int32_t, 3>> starts;
  PlanStats stats;
  auto blob = build_one(windows_in_both_halves(
                            3, [](int32_t q) { return 1 + q % 3; }, starts),
                        {128, 128}, stats);
  const uint32_t patterns = desc::header(blob.data()).patterns_offset;
  desc::Pattern& p = *mutable_at<desc::Pattern>(blob, patterns);
  ASSERT_EQ(p.kind, desc::kPatternRowRanges);
  mutable_at<desc::RowRange>(blob, p.data_offset)[5 * p.count] = {3, 128};  // columns [3, 129)
  expect_verify_error(blob, "row 5 range 0: columns [3, 129) reach past tile_n 128");
}

// The first row-table pattern of per-row windows, for the verifier tests to break.
desc::Pattern& first_row_table(std::vector<uint64_t>& blob, int32_t patterns) {
  const uint32_t offset = desc::header(blob.data()).patterns_offset;
  for (int32_t i = 0; i < patterns; ++i) {
    desc::Pattern& p = *mutable_at<desc::Pattern>(blob, offset + i * sizeof(desc::Pattern));
    if (p.kind == desc::kPatternRowTable) return p;
  }
  throw Error("no row-table pattern");
}

TEST(DescriptorUnit, VerifyRejectsRowTableHalvesMarkedEmptyThatSeeKeys) {
  PlanStats stats;
  auto blob = build_one(per_row_windows(256, 200, 3), {128, 128}, stats);
  desc::Pattern& p = first_row_table(blob, stats.patterns);
  ASSERT_EQ(p.empty_halves, 0);  // every row sees its own key, in its query tile's last tile
  p.empty_halves = 2;
  expect_verify_error(blob, "empty_halves marks half 1 empty, but row 64 sees keys");
}

TEST(DescriptorUnit, VerifyRejectsRowTableBoundsPastTheKeys) {
  PlanStats stats;
  auto blob = build_one(per_row_windows(256, 200, 3), {128, 128}, stats);
  const desc::Pattern& p = first_row_table(blob, stats.patterns);
  mutable_at<desc::KeyInterval>(blob, p.data_offset)[3 * p.count] = {-5, 10};
  expect_verify_error(blob, "row 3 interval 0: [-5, 10) must lie in [0, nk = 256]");
}

TEST(DescriptorUnit, VerifyRejectsRowTablePastTheBlob) {
  PlanStats stats;
  auto blob = build_one(per_row_windows(256, 200, 3), {128, 128}, stats);
  desc::Pattern& p = first_row_table(blob, stats.patterns);
  p.data_offset = static_cast<uint32_t>(blob.size() * 8 - 512);  // 128 rows need 1024 bytes
  expect_verify_error(blob, "row table [");
}

TEST(DescriptorUnit, PatternsMarkTheirEmptyHalves) {
  // Rows 0-7 of a 16-row tile see a band, rows 8-15 nothing; then the reverse; then both.
  const struct {
    std::function<bool(int32_t, int32_t)> visible;
    uint8_t empty_halves;
  } cases[] = {{[](int32_t q, int32_t k) { return q < 8 && k <= q; }, 2},
               {[](int32_t q, int32_t k) { return q >= 8 && k <= q; }, 1},
               {[](int32_t q, int32_t k) { return k <= q; }, 0},
               {[](int32_t q, int32_t k) { return q < 8 && (q + k) % 2 == 0; }, 2}};  // bitmap
  for (const auto& c : cases) {
    const Dense dense = dense_of(16, 16, c.visible);
    PlanStats stats;
    const auto blob = build_one(dense, {16, 16}, stats);
    verify_descriptor(blob.data(), blob.size() * 8);
    ASSERT_EQ(stats.patterns, 1);
    EXPECT_EQ(desc::pattern(blob.data(), 0).empty_halves, c.empty_halves);
    expect_equal_dense(blob, dense);
  }
}

TEST(DescriptorUnit, JsonDumpShowsHeaderPatternsAndRuns) {
  PlanStats stats;
  const auto blob =
      build_one(dense_of(512, 512, [](int32_t q, int32_t k) { return k <= q; }), {128, 128}, stats);
  const std::string json = descriptor_to_json(blob.data());
  for (const char* needle :
       {"\"nq\": 512", "\"num_patterns\": 1", "\"kind\": \"bands\"",
        "\"lo0\": 0, \"lo_slope\": 0, \"hi0\": 1, \"hi_slope\": 1", "\"visible_pairs\": 131328",
        "\"full\": [[0, 3]], \"partial\": [[3, 1, 0]]"}) {
    EXPECT_NE(json.find(needle), std::string::npos) << needle << "\n" << json;
  }
}

TEST(DescriptorUnit, StatsRenderTheirFields) {
  PlanStats stats;
  stats.bytes = 2048;
  stats.full_tiles = 6;
  stats.partial_tiles = 4;
  stats.empty_tiles = 6;
  stats.visible_pairs = 131328;
  EXPECT_NE(stats.format().find("6 full (37.5%)"), std::string::npos) << stats.format();
  EXPECT_NE(stats.to_json().find("\"visible_pairs\": 131328"), std::string::npos);
  EXPECT_NE(stats.to_json().find("\"bytes\": 2048"), std::string::npos);
}

// desc::divide (the kernels' grid walks and TileAxis::tile_of) against integer division: every
// divisor up to 2^12 and powers of two and their neighbours up to 2^31 - 1, each on dividends
// at the quotients' edges, small values and the largest int32 values, and the tile sizes up to
// 256 on 2000 random dividends each.
TEST(DescriptorUnit, DivisorMatchesIntegerDivision) {
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int64_t p = 8192; p <= (int64_t{1} << 31); p *= 2) {
    for (int64_t d : {p - 1, p, p + 1}) {
      if (d <= INT32_MAX) divisors.push_back(d);
    }
  }
  std::mt19937 rng(7);
  for (const int64_t d64 : divisors) {
    const int d = static_cast<int>(d64);
    const desc::Divisor v = desc::divisor(d);
    std::vector<int64_t> dividends = {0,       1,         d64 - 1,       d64,
                                      d64 + 1, INT32_MAX, INT32_MAX - 1, INT32_MAX - d64 + 1};
    for (int i = 0; i < 16; ++i) {
      const int64_t q = std::uniform_int_distribution<int64_t>(0, INT32_MAX / d64)(rng);
      for (int64_t r : {int64_t{0}, d64 - 1}) dividends.push_back(q * d64 + r);
    }
    for (const int64_t n : dividends) {
      if (n < 0 || n > INT32_MAX) continue;
      ASSERT_EQ(desc::divide(static_cast<int>(n), v), n / d64) << n << " / " << d;
    }
  }
  std::mt19937 random_dividends(99);
  for (int d = 1; d <= 256; ++d) {
    const desc::Divisor v = desc::divisor(d);
    for (int i = 0; i < 2000; ++i) {
      const int n = std::uniform_int_distribution<int>(0, INT32_MAX)(random_dividends);
      ASSERT_EQ(desc::divide(n, v), n / d) << n << " / " << d;
    }
  }
}

}  // namespace
}  // namespace cm
