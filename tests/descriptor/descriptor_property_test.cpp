// Randomized round trips: random rows -> build -> verify -> dense decode of both forms must
// equal the input exactly, and the stats must match counts taken from the dense input.
#include <compilemask/compilemask.h>

#include "descriptor/build.h"
#include "descriptor/decode.h"
#include "descriptor/plan_stats.h"
#include "mask_fixtures.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

namespace cm {
namespace {

using testing::Dense;
using testing::dense_tile_counts;
using testing::RandomInstance;

constexpr std::array<Tiling, 6> kTilings = {Tiling{16, 16}, Tiling{64, 128},  Tiling{128, 64},
                                            Tiling{32, 48}, Tiling{128, 128}, Tiling{48, 16}};

// Both forms decode to `expected`, whole and in a window of rows that cuts tiles.
void expect_decodes_to(const std::vector<uint64_t>& blob, int32_t b, int32_t h,
                       const Dense& expected, const std::string& context) {
  const RowWindow whole{0, expected.nq}, middle{expected.nq / 3, 2 * expected.nq / 3 + 1};
  for (DescriptorForm form : {DescriptorForm::kForward, DescriptorForm::kTransposed}) {
    for (const RowWindow rows : {whole, middle}) {
      const std::vector<uint8_t> dense = decode_dense(blob.data(), b, h, form, rows);
      ASSERT_EQ(dense.size(), static_cast<size_t>(rows.end - rows.begin) * expected.nk) << context;
      for (int32_t q = rows.begin; q < rows.end; ++q) {
        for (int32_t k = 0; k < expected.nk; ++k) {
          ASSERT_EQ(dense[static_cast<size_t>(q - rows.begin) * expected.nk + k], expected.at(q, k))
              << context << " form "
              << (form == DescriptorForm::kForward ? "forward" : "transposed") << " rows ["
              << rows.begin << ", " << rows.end << ") at (q, k) = (" << q << ", " << k << ")";
        }
      }
    }
  }
}

TEST(DescriptorProperty, RandomRowsRoundTripExactly) {
  std::mt19937 rng(12345);
  std::array<int, desc::kPatternRowTable + 1>
      patterns_of_kind{};  // the inputs must exercise every pattern kind
  for (int iteration = 0; iteration < 300; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 300)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 300)(rng);
    const Tiling tiling = kTilings[static_cast<size_t>(iteration) % kTilings.size()];
    const bool with_formulas = iteration % 2 == 1;
    const RandomInstance inst = testing::random_instance(rng, nq, nk, with_formulas);
    const std::string context = "iteration " + std::to_string(iteration) +
                                " nq=" + std::to_string(nq) + " nk=" + std::to_string(nk) +
                                " tile " + std::to_string(tiling.m) + "x" +
                                std::to_string(tiling.n);

    PlanStats stats;
    const std::vector<uint64_t> blob = build_descriptor({inst.rows}, {0}, 1, 1, tiling, stats);
    ASSERT_NO_THROW(verify_descriptor(blob.data(), blob.size() * 8)) << context;
    expect_decodes_to(blob, 0, 0, inst.expected, context);

    const TileCounts want = dense_tile_counts(inst.expected, blob.data());
    EXPECT_EQ(static_cast<const TileCounts&>(stats), want) << context;
    EXPECT_EQ(count_tiles({inst.rows}, tiling), want) << context;  // without building
    EXPECT_EQ(descriptor::read_plan_stats(blob.data()).to_json(), stats.to_json()) << context;
    EXPECT_EQ(stats.bytes, static_cast<int64_t>(blob.size() * 8));
    EXPECT_EQ(desc::instance(blob.data(), 0).visible_pairs,
              static_cast<uint64_t>(want.visible_pairs));
    for (int32_t i = 0; i < stats.patterns; ++i) {
      ++patterns_of_kind[desc::pattern(blob.data(), static_cast<uint32_t>(i)).kind];
    }
  }
  EXPECT_GT(patterns_of_kind[desc::kPatternBands], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternBitmap], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternGrid], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternGridSparse], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternRowRanges], 0);
  EXPECT_GT(patterns_of_kind[desc::kPatternRowTable], 0);
}

// Pattern::empty_halves is exact for bands and bitmaps: a half of a partial tile is marked
// empty if and only if none of its rows sees a key of the tile (grid kinds claim nothing).
TEST(DescriptorProperty, EmptyHalvesAreExact) {
  std::mt19937 rng(4242);
  int marked = 0;
  for (int iteration = 0; iteration < 150; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 300)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 300)(rng);
    const Tiling tiling = kTilings[static_cast<size_t>(iteration) % kTilings.size()];
    const RandomInstance inst = testing::random_instance(rng, nq, nk, iteration % 2 == 1);
    PlanStats stats;
    const std::vector<uint64_t> blob = build_descriptor({inst.rows}, {0}, 1, 1, tiling, stats);
    const desc::Instance& di = desc::instance(blob.data(), 0);
    const int32_t half_rows = tiling.m / 2;
    for (int32_t m = 0; m < desc::header(blob.data()).num_q_tiles; ++m) {
      const auto [m0, m1] = desc::q_tile_span(blob.data(), m);
      const desc::TileRow& row = desc::q_tile(blob.data(), di, m);
      const desc::PartialRun* runs = desc::partial_runs(blob.data(), row);
      for (int i = 0; i < row.partial_count; ++i) {
        const desc::Pattern& p = desc::pattern(blob.data(), runs[i].pattern);
        for (int32_t n = runs[i].first; n < runs[i].first + runs[i].count; ++n) {
          for (int half = 0; half < 2; ++half) {
            const int32_t q0 = m0 + half * half_rows;
            const int32_t q1 = std::min(m1, half == 0 ? q0 + half_rows : m0 + tiling.m);
            if (q0 >= q1) continue;  // the half lies past the tile's end
            const auto [k0, k1] = desc::k_tile_span(blob.data(), n);
            bool empty = true;
            for (int32_t q = q0; q < q1; ++q) {
              for (int32_t k = k0; k < k1; ++k) {
                empty = empty && inst.expected.at(q, k) == 0;
              }
            }
            const bool want = empty && !desc::is_grid_kind(p.kind);
            ASSERT_EQ(desc::half_is_empty(p, half), want)
                << "iteration " << iteration << " tile (" << m << ", " << n << ") half " << half;
            marked += want;
          }
        }
      }
    }
  }
  EXPECT_GT(marked, 0) << "no draw had an empty half";
}

// Rows made of a few intervals whose ends move affinely over long row ranges, with slopes
// around the int8 band limit and ends landing on tile boundaries: the builder skips such
// stretches of rows in bulk, and must still decode to exactly the input.
TEST(DescriptorProperty, AffineRowStretchesRoundTripExactly) {
  std::mt19937 rng(777);
  constexpr std::array<int32_t, 11> kSteps = {0, 0, 1, -1, 2, -3, 16, 127, -128, 128, 200};
  auto pick_step = [&] {
    return kSteps[std::uniform_int_distribution<size_t>(0, kSteps.size() - 1)(rng)];
  };
  for (int iteration = 0; iteration < 120; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 300)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 600)(rng);
    const Tiling tiling = kTilings[static_cast<size_t>(iteration) % kTilings.size()];
    Dense expected(nq, nk);
    const int terms = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int t = 0; t < terms; ++t) {
      // lo and width follow one affine piece per segment of rows; pieces change at random rows.
      int64_t lo = std::uniform_int_distribution<int32_t>(-nk, nk)(rng);
      int64_t width = std::uniform_int_distribution<int32_t>(0, nk)(rng);
      int32_t lo_step = pick_step(), width_step = pick_step() / 4;
      for (int32_t q = 0; q < nq; ++q) {
        if (std::uniform_int_distribution<int>(0, 60)(rng) == 0) {
          lo_step = pick_step();
          width_step = pick_step() / 4;
        }
        for (int64_t k = std::max<int64_t>(lo, 0); k < std::min<int64_t>(lo + width, nk); ++k) {
          expected.at(q, static_cast<int32_t>(k)) = 1;
        }
        lo += lo_step;
        width = std::max<int64_t>(width + width_step, 0);
      }
    }
    InstanceRows rows;
    rows.all = testing::rows_from_dense(expected);
    const std::string context = "iteration " + std::to_string(iteration) +
                                " nq=" + std::to_string(nq) + " nk=" + std::to_string(nk) +
                                " tile " + std::to_string(tiling.m) + "x" +
                                std::to_string(tiling.n);

    PlanStats stats;
    const std::vector<uint64_t> blob = build_descriptor({rows}, {0}, 1, 1, tiling, stats);
    ASSERT_NO_THROW(verify_descriptor(blob.data(), blob.size() * 8)) << context;
    expect_decodes_to(blob, 0, 0, expected, context);
    const TileCounts want = dense_tile_counts(expected, blob.data());
    EXPECT_EQ(static_cast<const TileCounts&>(stats), want) << context;
    EXPECT_EQ(count_tiles({rows}, tiling), want) << context;
  }
}

TEST(DescriptorProperty, InstanceMapsStoreEqualInstancesOnce) {
  std::mt19937 rng(777);
  for (int iteration = 0; iteration < 40; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 200)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 200)(rng);
    const int32_t batch = std::uniform_int_distribution<int32_t>(1, 3)(rng);
    const int32_t heads = std::uniform_int_distribution<int32_t>(1, 4)(rng);
    const Tiling tiling = kTilings[static_cast<size_t>(iteration) % kTilings.size()];

    // A few distinct random instances, then copies of them.
    const int originals = std::uniform_int_distribution<int>(1, 3)(rng);
    std::vector<RandomInstance> made;
    for (int i = 0; i < originals; ++i)
      made.push_back(testing::random_instance(rng, nq, nk, i % 2 == 1));
    std::vector<InstanceRows> instances;
    std::vector<size_t> source;  // which original each input instance copies
    for (int i = 0; i < originals * 2; ++i) {
      const size_t from = static_cast<size_t>(i % originals);
      instances.push_back(made[from].rows);
      source.push_back(from);
    }
    std::vector<int32_t> map(static_cast<size_t>(batch * heads));
    for (int32_t& entry : map) {
      entry = std::uniform_int_distribution<int32_t>(
          0, static_cast<int32_t>(instances.size()) - 1)(rng);
    }
    PlanStats stats;
    const auto blob = build_descriptor(instances, map, batch, heads, tiling, stats);
    ASSERT_NO_THROW(verify_descriptor(blob.data(), blob.size() * 8));
    // Originals that happen to be equal (e.g. two empty masks) count once.
    int distinct = 0;
    TileCounts expected_totals;
    for (int i = 0; i < originals; ++i) {
      bool repeat = false;
      for (int j = 0; j < i; ++j) {
        const InstanceRows &a = made[static_cast<size_t>(i)].rows,
                           &b = made[static_cast<size_t>(j)].rows;
        repeat |= a.all == b.all && a.residual == b.residual && a.row_formula == b.row_formula &&
                  a.formulas.size() == b.formulas.size() &&
                  std::memcmp(a.formulas.data(), b.formulas.data(),
                              a.formulas.size() * sizeof(desc::GridFormula)) == 0;
      }
      if (repeat) continue;
      ++distinct;
      const TileCounts c = dense_tile_counts(made[static_cast<size_t>(i)].expected, blob.data());
      expected_totals.visible_pairs += c.visible_pairs;
      expected_totals.full_tiles += c.full_tiles;
      expected_totals.partial_tiles += c.partial_tiles;
      expected_totals.empty_tiles += c.empty_tiles;
      expected_totals.computed_pairs += c.computed_pairs;
    }
    expected_totals.instances = distinct;

    EXPECT_EQ(desc::header(blob.data()).num_instances, distinct);
    EXPECT_EQ(static_cast<const TileCounts&>(stats), expected_totals);
    EXPECT_EQ(count_tiles(instances, tiling), expected_totals);
    for (int32_t b = 0; b < batch; ++b) {
      for (int32_t h = 0; h < heads; ++h) {
        const size_t from = source[static_cast<size_t>(map[static_cast<size_t>(b * heads + h)])];
        expect_decodes_to(blob, b, h, made[from].expected,
                          "iteration " + std::to_string(iteration) + " (b, h) = (" +
                              std::to_string(b) + ", " + std::to_string(h) + ")");
      }
    }
  }
}

}  // namespace
}  // namespace cm
