// The public compile/specialize API: pass dumps, parameter and shape errors with their messages,
// evaluation errors with source positions, instance deduplication across heads, attention
// slices, and the kernel time estimates from tile counts.
#include <compilemask/compilemask.h>
#include <compilemask/context_parallel.h>
#include <compilemask/estimate.h>
#include <compilemask/token_order.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace cm {

// gtest's output for a failed comparison of slices.
void PrintTo(const AttnSlice& s, std::ostream* os) {
  *os << "{q [" << s.q_begin << ", " << s.q_end << "), k [" << s.k_begin << ", " << s.k_end
      << "), shape " << static_cast<int>(s.shape) << "}";
}

namespace {

Mask must_compile(const std::string& source) {
  CompileResult r = compile(source, "test.mask");
  EXPECT_TRUE(r) << (r.diagnostics.empty() ? "" : r.diagnostics[0].format());
  return *r.mask;
}

// The message of the cm::Error that `call` throws, or "" when it throws none.
template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string specialize_error(const Mask& m, const Params& p, const Dims& d, const Tiling& t = {}) {
  try {
    m.specialize(p, d, t);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Api, EveryPassCanBeDumped) {
  const std::string src = "mask m(W: int) {\n  q in all: k in [q - W + 1 + 0, q] | none\n}\n";
  for (const std::string& pass : pass_names()) {
    std::string dump;
    CompileResult r = compile(src, "m.mask", {pass}, &dump);
    ASSERT_TRUE(r) << pass;
    EXPECT_FALSE(dump.empty()) << pass;
  }
  std::string normalized;
  compile(src, "m.mask", {"normalize"}, &normalized);
  EXPECT_NE(normalized.find("k term [((q - W) + 1), (q + 1))"), std::string::npos) << normalized;
}

TEST(Api, ParameterErrorsNameTheParameterAndRule) {
  const Mask m = must_compile(
      "mask m(docs: segments, W: int, A: int[], p: segment) {\n"
      "  for d in docs { q in d: k in [d.start, q] | p }\n}\n");
  const Segments one = Segments::from_lengths({4});
  const Params good{{"docs", Segments::from_lengths({3, 5})},
                    {"W", int64_t{2}},
                    {"A", std::vector<int64_t>{1}},
                    {"p", one}};
  const Dims dims{8, 8, 1, 1};
  EXPECT_NO_THROW(m.specialize(good, dims));
  Params missing = good;
  missing.erase("W");
  EXPECT_NE(specialize_error(m, missing, dims).find("missing parameter 'W' (int)"),
            std::string::npos);
  Params extra = good;
  extra["X"] = int64_t{1};
  EXPECT_NE(specialize_error(m, extra, dims).find("unknown parameter 'X'"), std::string::npos);
  Params wrong = good;
  wrong["W"] = std::vector<int64_t>{1};
  EXPECT_NE(specialize_error(m, wrong, dims)
                .find("parameter 'W' must be an integer, got an integer array"),
            std::string::npos);
  Params overlap = good;
  overlap["docs"] = Segments{{0, 3}, {4, 6}};
  EXPECT_NE(specialize_error(m, overlap, dims).find("must be sorted and must not overlap"),
            std::string::npos);
  Params reversed = good;
  reversed["docs"] = Segments{{5}, {2}};
  EXPECT_NE(specialize_error(m, reversed, dims).find("ends before it starts"), std::string::npos);
  Params two = good;
  two["p"] = Segments::from_lengths({1, 1});
  EXPECT_NE(specialize_error(m, two, dims).find("takes exactly one segment, got 2"),
            std::string::npos);
  EXPECT_NE(specialize_error(m, good, Dims{-1, 8, 1, 1}).find("nq must be in [0, 2^31-1], got -1"),
            std::string::npos);
  EXPECT_NE(specialize_error(m, good, Dims{8, 8, 0, 1}).find("batch must be >= 1"),
            std::string::npos);
  EXPECT_NE(specialize_error(m, good, dims, Tiling{100, 128}), "no error");
  // Shapes the descriptor cannot hold fail before any row is evaluated: 2^31 - 1 rows would
  // otherwise cost minutes and tens of GiB first.
  const int64_t most_rows = std::numeric_limits<int32_t>::max();
  const Dims untileable{most_rows, most_rows, 1, 1};
  EXPECT_NE(specialize_error(m, good, untileable).find("at most 65535 per axis are allowed"),
            std::string::npos);
  EXPECT_THROW(m.count_tiles(good, untileable), Error);
  EXPECT_NE(specialize_error(m, good, Dims{8, 8, 1 << 12, 1 << 13})
                .find("batch * heads must be at most 16777216, got 4096 * 8192"),
            std::string::npos);
  EXPECT_EQ(m.specialize(good, Dims{8, 8, 1 << 12, 1 << 12}).dims().heads, 1 << 12);
  EXPECT_THROW(Segments::from_boundaries({0, 5, 3}), Error);
  EXPECT_THROW(Segments::from_lengths({2, -1}), Error);
}

TEST(Api, ParameterBoundsAreChecked) {
  const Mask m =
      must_compile("mask m(W: int >= 1, A: int[] >= -2) {\n  q in all: k in (diag - W, diag]\n}\n");
  const Dims dims{8, 8, 1, 1};
  const auto params = [](int64_t w, std::vector<int64_t> a) {
    return Params{{"W", w}, {"A", std::move(a)}};
  };
  EXPECT_NO_THROW(m.specialize(params(1, {-2, 5}), dims));
  // A is never read, yet its bound holds: bounds are checked when parameters are bound.
  EXPECT_EQ(specialize_error(m, params(0, {}), dims),
            "parameter 'W' must be >= 1, got 0 (declared 'W: int >= 1')");
  EXPECT_EQ(specialize_error(m, params(3, {4, -3}), dims),
            "parameter 'A' element 1 must be >= -2, got -3 (declared 'A: int[] >= -2')");
  EXPECT_THROW(m.count_tiles(params(0, {}), dims), Error);
  EXPECT_EQ(m.params()[0].declaration, "W: int >= 1");
  EXPECT_EQ(m.params()[1].type, "int[]");
}

TEST(Api, RequirementsAreCheckedForEveryLoopBindingAndHead) {
  const Mask m = must_compile(
      "mask m(D: segments, W: int[]) {\n"
      "  require W[h] <= Nk  # a window per head\n"
      "  for d in D {\n"
      "    if d.len > 1 {\n"
      "      require d.end <= Nq; q in d: k in [d.start, q]\n"
      "    }\n"
      "  }\n"
      "}\n");
  const Dims dims{8, 8, 1, 2};
  const auto params = [](std::vector<int64_t> boundaries, std::vector<int64_t> w) {
    return Params{{"D", Segments::from_boundaries(boundaries)}, {"W", std::move(w)}};
  };
  EXPECT_NO_THROW(m.specialize(params({0, 4, 8}, {8, 1}), dims));
  // Segment 1 ends past Nq.
  EXPECT_EQ(specialize_error(m, params({0, 4, 9}, {8, 1}), dims),
            "test.mask:5:7: requirement not met: 'require d.end <= Nq' (at h=0 d=1: [4, 9))");
  // The enclosing if guards it: a one-token segment past Nq is not checked.
  EXPECT_NO_THROW(m.specialize(params({0, 4, 8, 9}, {8, 1}), dims));
  // Head 1's value breaks the rule; the error names the head.
  EXPECT_EQ(specialize_error(m, params({0, 4, 8}, {8, 9}), dims),
            "test.mask:2:3: requirement not met: 'require W[h] <= Nk' (at h=1)");
  EXPECT_THROW(m.count_tiles(params({0, 4, 9}, {8, 1}), dims), Error);
  // Heads of this many rows are evaluated on parallel workers (where the machine has more than
  // one core); the error is still the first failing head's.
  std::vector<int64_t> windows(16, 8);
  windows[5] = windows[6] = windows[11] = 40000;
  EXPECT_EQ(specialize_error(m, params({0, 4, 8}, windows), Dims{32768, 32768, 1, 16}),
            "test.mask:2:3: requirement not met: 'require W[h] <= Nk' (at h=5)");
}

TEST(Api, RequirementsInAnUntakenBranchRaiseNoEvaluationError) {
  const Mask m = must_compile(
      "mask m(D: segments) {\n"
      "  for d in D {\n"
      "    if d.len > 0 { require 8 / d.len >= 1 }\n"
      "  }\n"
      "  q in all: k in all\n"
      "}\n");
  const Dims dims{16, 16, 1, 1};
  // Segment 1 is empty: its division by zero sits in the branch its if does not take.
  EXPECT_NO_THROW(m.specialize({{"D", Segments::from_boundaries({0, 4, 4, 12})}}, dims));
  EXPECT_EQ(specialize_error(m, {{"D", Segments::from_boundaries({0, 4, 4, 13})}}, dims),
            "test.mask:3:20: requirement not met: 'require 8 / d.len >= 1' (at d=2: [4, 13))");
}

TEST(Api, RequirementsSpanningLinesAreQuotedWhole) {
  const Mask m = must_compile(
      "mask m(W: int) {\n"
      "  require W >= 1 &&  # a comment inside\n"
      "    (W <= Nq ||\n"
      "     W <= Nk); q in all: k in [q - W, q]\n"
      "}\n");
  EXPECT_NO_THROW(m.specialize({{"W", int64_t{4}}}, Dims{8, 8, 1, 1}));
  EXPECT_EQ(specialize_error(m, {{"W", int64_t{9}}}, Dims{8, 8, 1, 1}),
            "test.mask:2:3: requirement not met: 'require W >= 1 && (W <= Nq || W <= Nk)'");
}

TEST(Api, EvaluationErrorsCarryTheSourcePosition) {
  const Mask m = must_compile("mask m(z: int, A: int[]) {\n  q in all: k in [0, q / z]\n}\n");
  const std::string div =
      specialize_error(m, {{"z", int64_t{0}}, {"A", std::vector<int64_t>{}}}, Dims{4, 4, 1, 1});
  EXPECT_NE(div.find("test.mask:2:"), std::string::npos) << div;
  EXPECT_NE(div.find("division by zero"), std::string::npos) << div;
  const Mask a = must_compile("mask m(A: int[]) {\n  q in all: k in [0, A[q]]\n}\n");
  const std::string oob =
      specialize_error(a, {{"A", std::vector<int64_t>{1, 2}}}, Dims{4, 4, 1, 1});
  EXPECT_NE(oob.find("index out of range for parameter 'A' (2 elements)"), std::string::npos)
      << oob;
  // A strip below 1 is reported where the grid is used, as a formula or as intervals.
  const Mask strips = must_compile(
      "mask m(w: int) {\n  let g = strip_grid(2, 4, 5, w)\n  q in g: k in g.disk(q, 2)\n}\n");
  const Mask strips_cut = must_compile(
      "mask m(w: int) {\n  let g = strip_grid(2, 4, 5, w)\n  q in g: k in g.disk(q, 2) & [0, "
      "q]\n}\n");
  for (const Mask* mask : {&strips, &strips_cut}) {
    for (int64_t w : {0, -3}) {
      const std::string bad = specialize_error(*mask, {{"w", w}}, Dims{22, 22, 1, 1});
      EXPECT_NE(bad.find("test.mask:3:18"), std::string::npos) << bad;
      EXPECT_NE(bad.find("division by zero"), std::string::npos) << bad;
    }
    EXPECT_NO_THROW(mask->specialize({{"w", int64_t{2}}}, Dims{22, 22, 1, 1}));
  }
  // So is a grid extent below 1, when the grid holds tokens (rows * cols > 0); one that holds
  // none is never used, and its mask is empty.
  const Mask sized = must_compile(
      "mask m(r: int, c: int) {\n  let g = grid(2, r, c)\n  q in g: k in g.box(q, 1, 1)\n}\n");
  const std::string bad =
      specialize_error(sized, {{"r", int64_t{-2}}, {"c", int64_t{-2}}}, Dims{22, 22, 1, 1});
  EXPECT_NE(bad.find("test.mask:3:18"), std::string::npos) << bad;
  EXPECT_NE(bad.find("division by zero"), std::string::npos) << bad;
  for (const auto& [r, c] : {std::pair<int64_t, int64_t>{0, 4}, {4, -1}}) {
    EXPECT_EQ(sized.specialize({{"r", r}, {"c", c}}, Dims{22, 22, 1, 1}).stats().visible_pairs, 0);
  }
  EXPECT_GT(sized.specialize({{"r", int64_t{4}}, {"c", int64_t{5}}}, Dims{22, 22, 1, 1})
                .stats()
                .visible_pairs,
            0);
  // The unused branch of a conditional is never an error.
  const Mask guarded =
      must_compile("mask m(z: int) {\n  q in all: k in [0, if z == 0 then q else q / z]\n}\n");
  EXPECT_NO_THROW(guarded.specialize({{"z", int64_t{0}}}, Dims{4, 4, 1, 1}));
}

// docs/language.md: an ellipse with a radius of 0 or less is empty, whatever the other radii
// (its width squares the radii, so a negative one once acted as its absolute value).
TEST(Api, EllipsesWithARadiusBelowOneAreEmpty) {
  const Mask m = must_compile(
      "mask m(ry: int, rx: int) {\n  let g = grid(0, 6, 6)\n  q in g: k in g.ellipse(q, ry, "
      "rx)\n}\n");
  for (const auto& [ry, rx] : {std::pair<int64_t, int64_t>{2, -3}, {-3, 2}, {0, 2}, {2, 0}}) {
    const Plan plan = m.specialize({{"ry", ry}, {"rx", rx}}, Dims{36, 36, 1, 1}, {16, 16});
    EXPECT_EQ(plan.stats().visible_pairs, 0) << "ry " << ry << " rx " << rx;
  }
  EXPECT_GT(m.specialize({{"ry", int64_t{2}}, {"rx", int64_t{3}}}, Dims{36, 36, 1, 1}, {16, 16})
                .stats()
                .visible_pairs,
            0);
}

TEST(Api, DenseDecodesAWindowOfRows) {
  const Mask m = must_compile("mask m() { q in all: k in [0, q] }");
  const Plan plan = m.specialize({}, Dims{300, 300, 1, 1}, {64, 64});
  const std::vector<uint8_t> all = plan.dense();
  const std::vector<uint8_t> window = plan.dense(0, 0, 100, 201);
  ASSERT_EQ(window.size(), 101u * 300u);
  EXPECT_TRUE(std::equal(window.begin(), window.end(), all.begin() + 100 * 300));
  EXPECT_TRUE(plan.dense(0, 0, 300, 300).empty());
  for (const auto& [begin, end] : {std::pair{5, 2}, std::pair{0, 301}, std::pair{-1, 5}}) {
    EXPECT_THROW(
        {
          try {
            plan.dense(0, 0, begin, end);
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("not a range inside [0, 300)"), std::string::npos)
                << e.what();
            throw;
          }
        },
        Error);
  }
  // Too large to decode whole (10^8 cells), but not a window of it.
  const Plan large = m.specialize({}, Dims{10000, 10000, 1, 1});
  EXPECT_THROW(large.dense(), Error);
  const std::vector<uint8_t> rows = large.dense(0, 0, 9000, 9002);
  ASSERT_EQ(rows.size(), 20000u);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), uint8_t{1}), 9001 + 9002);
}

TEST(Api, StripOrderLaysTheGridOutStripByStrip) {
  // Rows of 5 from token 2; strips of columns {0, 1}, {2, 3}, {4}; token 17 stays.
  EXPECT_EQ(strip_order({.start = 2, .rows = 3, .cols = 5, .strip = 2}, 18),
            (std::vector<int64_t>{0, 1, 2, 3, 7, 8, 12, 13, 4, 5, 9, 10, 14, 15, 6, 11, 16, 17}));
  // Two frames of 2 x 3, each in strips of 2 columns.
  EXPECT_EQ(strip_order({.frames = 2, .rows = 2, .cols = 3, .strip = 2}, 12),
            (std::vector<int64_t>{0, 1, 3, 4, 2, 5, 6, 7, 9, 10, 8, 11}));
  // A strip as wide as the grid, or wider, is row-major.
  std::vector<int64_t> identity(20);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_EQ(strip_order({.start = 1, .rows = 3, .cols = 6, .strip = 9}, 20), identity);

  auto rule_of = [](const StripGrid& grid, int64_t total) -> std::string {
    try {
      strip_order(grid, total);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(rule_of({.rows = 4, .cols = 4, .strip = 0}, 16),
            "strip_order: strip must be >= 1, got 0");
  EXPECT_EQ(rule_of({.start = -1, .rows = 4, .cols = 4, .strip = 2}, 16),
            "strip_order: start must be >= 0, got -1");
  EXPECT_EQ(rule_of({.start = 2, .rows = 3, .cols = 3, .strip = 2}, 10),
            "strip_order: the grid of 1 x 3 x 3 tokens from token 2 does not fit in 10 tokens");
  EXPECT_NE(rule_of({.rows = int64_t{1} << 40, .cols = int64_t{1} << 40, .strip = 2}, 10)
                .find("does not fit in 10 tokens"),
            std::string::npos);
  EXPECT_EQ(rule_of({.rows = 4, .cols = 4, .strip = 2}, int64_t{1} << 31),
            "strip_order: total must be below 2^31 tokens, got 2147483648");
}

TEST(Api, PlansComeBackFromTheirDescriptorBytes) {
  const Mask m = must_compile(
      "mask m(docs: segments) {\n  for d in docs {\n    q in d: k in [d.start, q]\n  }\n}\n");
  const Plan plan = m.specialize({{"docs", Segments::from_boundaries({0, 100, 250, 300})}},
                                 Dims{300, 300, 2, 3}, {64, 32});
  const Plan loaded = Plan::from_descriptor(plan.blob(), plan.size_bytes());
  EXPECT_EQ(loaded.dims().nq, 300);
  EXPECT_EQ(loaded.dims().heads, 3);
  EXPECT_EQ(loaded.tiling().n, 32);
  EXPECT_EQ(loaded.dense(1, 2), plan.dense(1, 2));
  EXPECT_EQ(static_cast<const TileCounts&>(loaded.stats()),
            static_cast<const TileCounts&>(plan.stats()));
  EXPECT_EQ(loaded.stats().build_seconds, 0.0);

  // A row-major grid at tile 16: its sparse grid runs span empty tiles (1,220 listed, 1,144 of
  // them partial), which the stats read back must not count.
  const Mask disks = must_compile(
      "mask d(s: int, r: int) {\n  let g = grid(0, s, s)\n  q in g: k in g.disk(q, r)\n}\n");
  const Plan grid =
      disks.specialize({{"s", int64_t{40}}, {"r", int64_t{3}}}, Dims{1600, 1600}, {16, 16});
  EXPECT_EQ(
      static_cast<const TileCounts&>(Plan::from_descriptor(grid.blob(), grid.size_bytes()).stats()),
      static_cast<const TileCounts&>(grid.stats()));

  auto rule_of = [](const void* data, size_t size) -> std::string {
    try {
      Plan::from_descriptor(data, size);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(rule_of(nullptr, 0),
            "descriptor verification: the blob is smaller than its 96-byte header");
  EXPECT_NE(rule_of(plan.blob(), plan.size_bytes() - 8).find("differs from the blob size"),
            std::string::npos);
  std::vector<unsigned char> corrupt(
      static_cast<const unsigned char*>(plan.blob()),
      static_cast<const unsigned char*>(plan.blob()) + plan.size_bytes());
  corrupt[0] ^= 0xFF;
  EXPECT_NE(rule_of(corrupt.data(), corrupt.size()).find("bad magic"), std::string::npos);
}

// The slices of masks whose shapes follow from their definitions (compilemask.h, SliceShape);
// every example's slices are checked pair by pair against the oracle in agreement.cpp.
TEST(Api, SlicesTakeTheShapesOfTheirRows) {
  using S = SliceShape;
  const Mask causal = must_compile("mask causal() {\n  q in all: k in [0, diag]\n}\n");
  EXPECT_EQ(causal.slices({}, {1000, 1000}),
            (std::vector<AttnSlice>{{0, 1000, 0, 1000, S::kCausal}}));
  // Nq < Nk, aligned at the bottom right: row q sees [0, q + 400].
  EXPECT_EQ(causal.slices({}, {600, 1000}),
            (std::vector<AttnSlice>{{0, 600, 0, 1000, S::kCausal}}));

  // Rows [0, 64) see [0, q] (causal); from row 64 on, (q - 64, q] (both ends move by one).
  const Mask sliding = must_compile("mask w(W: int) {\n  q in all: k in (diag - W, diag]\n}\n");
  EXPECT_EQ(sliding.slices({{"W", int64_t{64}}}, {300, 300}),
            (std::vector<AttnSlice>{{0, 64, 0, 64, S::kCausal}, {64, 300, 1, 300, S::kBiCausal}}));

  // A prompt seen in full by its responses, each causal in itself; rows past the last response
  // see nothing and have no slice. The first response's rows see [0, q] (the prompt's keys and
  // their own run together), so it continues the prompt's causal slice.
  const Mask prefix = must_compile(
      "mask p(prompt: segment, responses: segments) {\n"
      "  q in prompt: k in [prompt.start, q]\n"
      "  for r in responses {\n    q in r: k in prompt | [r.start, q]\n  }\n"
      "}\n");
  const Params params{{"prompt", Segments::from_boundaries({0, 100})},
                      {"responses", Segments::from_boundaries({100, 250, 400})}};
  EXPECT_EQ(prefix.slices(params, {450, 450}),
            (std::vector<AttnSlice>{{0, 250, 0, 250, S::kCausal},
                                    {250, 400, 0, 100, S::kFull},
                                    {250, 400, 250, 400, S::kCausal}}));
}

TEST(Api, SlicesNameAnIndexOutsideThePlan) {
  const Mask heads = must_compile("mask m(W: int[]) {\n  q in all: k in (q - W[h], q]\n}\n");
  const Params params{{"W", std::vector<int64_t>{4, 8}}};
  const Dims dims{64, 64, 1, 2};
  EXPECT_EQ(heads.slices(params, dims, 0, 1).back(),
            (AttnSlice{8, 64, 1, 64, SliceShape::kBiCausal}));
  for (const auto& [b, h] : {std::pair{1, 0}, std::pair{0, 2}, std::pair{-1, 0}}) {
    try {
      heads.slices(params, dims, b, h);
      ADD_FAILURE() << "no error for b " << b << " h " << h;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b != 0 ? "slices: b " : "slices: h "), std::string::npos)
          << e.what();
    }
  }
}

TEST(Api, BlockGridsCutTheEdgeBlocksAsFlexPadsThem) {
  const Mask causal = must_compile("mask causal() {\n  q in all: k in [0, diag]\n}\n");
  // 300 rows on blocks of 128: the third block row holds 44 rows, so its blocks are partial
  // even where every row sees every key (block (2, 0) and (2, 1)).
  const BlockGrid grid = causal.block_grid({}, {300, 300}, {128, 128});
  constexpr int32_t E = BlockGrid::kEmpty, F = BlockGrid::kFull;
  EXPECT_EQ(grid.q_blocks, 3);
  EXPECT_EQ(grid.words_per_row, 4);
  EXPECT_EQ(grid.instance_of, std::vector<int32_t>{0});
  ASSERT_EQ(grid.codes.size(), 9u);
  for (size_t j : {1u, 2u, 5u}) EXPECT_EQ(grid.codes[j], E) << j;
  EXPECT_EQ(grid.codes[3], F);
  for (size_t j : {0u, 4u, 6u, 7u, 8u}) EXPECT_GE(grid.codes[j], 2) << j;
  // Diagonal block (0, 0): row y sees keys [0, y], one bit more per row.
  const auto diagonal = static_cast<size_t>(grid.codes[0]) * 128 * 4;
  EXPECT_EQ(grid.bits[diagonal], 1u);
  EXPECT_EQ(grid.bits[diagonal + 4 * 31], ~0u);
  EXPECT_EQ(grid.bits[diagonal + 4 * 31 + 1], 0u);
  EXPECT_EQ(grid.bits[diagonal + 4 * 32 + 1], 1u);

  // One distinct mask per distinct window; (b, h) b-major.
  const Mask heads = must_compile("mask m(W: int[]) {\n  q in all: k in (q - W[h], q]\n}\n");
  const BlockGrid per_head =
      heads.block_grid({{"W", std::vector<int64_t>{4, 8, 4}}}, {64, 64, 2, 3}, {32, 32});
  EXPECT_EQ(per_head.instance_of, (std::vector<int32_t>{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(per_head.codes.size(), 2u * 2 * 2);
}

// The per-block view of one mask of a grid: its class, and for a partial block its bitmap.
std::vector<std::vector<uint32_t>> grid_blocks(const BlockGrid& grid, int32_t instance) {
  const size_t blocks = static_cast<size_t>(grid.q_blocks) * grid.k_blocks;
  const size_t words = static_cast<size_t>(grid.block_q) * grid.words_per_row;
  std::vector<std::vector<uint32_t>> out;
  for (size_t j = 0; j < blocks; ++j) {
    const int32_t code = grid.codes[static_cast<size_t>(instance) * blocks + j];
    if (code < 2) {
      out.push_back({static_cast<uint32_t>(code)});
    } else {
      const auto first = grid.bits.begin() + static_cast<ptrdiff_t>(code * words);
      out.emplace_back(first, first + static_cast<ptrdiff_t>(words));
    }
  }
  return out;
}

TEST(Api, BlockGridsOfManyMasksEqualEachMaskAlone) {
  // Enough rows that the distinct masks are classified and filled on several workers, each
  // numbering its own bitmaps; the windows are intervals, the disks grid formulas expanded
  // between the two passes.
  const Mask windows = must_compile("mask m(W: int[]) {\n  q in all: k in (q - W[h], q]\n}\n");
  const Mask disks = must_compile(
      "mask m(r: int[]) {\n  let image = grid(0, 100, 160)\n  q in image: k in image.disk(q, "
      "r[h])\n}\n");
  const std::vector<int64_t> widths{100, 3000, 700, 128, 5000, 1};
  const std::vector<int64_t> radii{3, 9, 1, 17, 5, 30};
  for (const auto& [mask, name, values] :
       {std::tuple{&windows, "W", widths}, std::tuple{&disks, "r", radii}}) {
    const auto heads = static_cast<int32_t>(values.size());
    const BlockGrid all = mask->block_grid({{name, values}}, {16000, 16000, 1, heads}, {128, 64});
    ASSERT_EQ(all.instance_of.size(), values.size());
    for (int32_t h = 0; h < heads; ++h) {
      const BlockGrid alone =
          mask->block_grid({{name, std::vector<int64_t>{values[static_cast<size_t>(h)]}}},
                           {16000, 16000}, {128, 64});
      EXPECT_EQ(grid_blocks(all, all.instance_of[static_cast<size_t>(h)]), grid_blocks(alone, 0))
          << name << " head " << h;
    }
  }
}

TEST(Api, BlockGridsInBandsEqualTheGridsOfTheirRows) {
  // A grid is built in bands of about 2048 rows on several workers, rows given as grid
  // formulas expanded band by band. The grid of 1024 consecutive rows (query_positions; one
  // band, its formulas expanded by select_rows) must equal the whole grid's block rows there.
  const Mask windows = must_compile("mask m(W: int) {\n  q in all: k in (q - W, q]\n}\n");
  const Mask disks = must_compile(
      "mask m(r: int) {\n  let image = grid(37, 120, 130)\n  q in image: k in image.disk(q, "
      "r)\n}\n");
  constexpr int32_t kRows = 15963;  // the last block row is cut
  constexpr int32_t kChunk = 1024;
  const Tiling tiling{128, 64};
  for (const auto& [mask, name, value] :
       {std::tuple{&windows, "W", int64_t{3000}}, std::tuple{&disks, "r", int64_t{11}}}) {
    const Params params{{name, value}};
    const BlockGrid whole = mask->block_grid(params, {kRows, kRows}, tiling);
    std::vector<std::vector<uint32_t>> stacked;
    for (int32_t q0 = 0; q0 < kRows; q0 += kChunk) {
      std::vector<int32_t> positions(static_cast<size_t>(std::min(kChunk, kRows - q0)));
      std::iota(positions.begin(), positions.end(), q0);
      const std::vector<std::vector<uint32_t>> rows =
          grid_blocks(mask->block_grid(params, {kRows, kRows}, tiling, positions), 0);
      stacked.insert(stacked.end(), rows.begin(), rows.end());
    }
    EXPECT_EQ(grid_blocks(whole, 0), stacked) << name;
  }
}

TEST(Api, ContextParallelShardsPartitionTheRows) {
  constexpr int64_t kRows = 96;
  for (const bool balanced : {true, false}) {
    std::vector<int32_t> all;
    std::vector<int64_t> causal_pairs;  // row q sees q + 1 keys
    for (int64_t rank = 0; rank < 3; ++rank) {
      const std::vector<int32_t> rows = context_parallel_positions({kRows, 3, rank, balanced});
      EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
      EXPECT_EQ(rows.size(), 32u);
      all.insert(all.end(), rows.begin(), rows.end());
      causal_pairs.push_back(
          std::accumulate(rows.begin(), rows.end(), static_cast<int64_t>(rows.size())));
    }
    std::sort(all.begin(), all.end());
    std::vector<int32_t> every(kRows);
    std::iota(every.begin(), every.end(), 0);
    EXPECT_EQ(all, every) << "balanced " << balanced;
    // Head-tail chunks give every rank the same causal work; contiguous ones do not.
    EXPECT_EQ(causal_pairs[0] == causal_pairs[2], balanced);
  }
  EXPECT_EQ(context_parallel_positions({8, 2, 1}), (std::vector<int32_t>{2, 3, 4, 5}));
  const std::pair<ContextParallelShard, std::string> bad[] = {
      {{96, 0, 0}, "need world_size >= 1 and 0 <= rank < world_size, got world_size=0, rank=0"},
      {{96, 3, 3}, "got world_size=3, rank=3"},
      {{100, 3, 0}, "n = 100 must be a positive multiple of 6 (2 * world_size) below 2^31"},
      {{int64_t{1} << 31, 1, 0, false}, "must be a positive multiple of 1 (world_size) below 2^31"},
  };
  for (const auto& [shard, message] : bad) {
    EXPECT_NE(error_of([&] { context_parallel_positions(shard); }).find(message), std::string::npos)
        << message;
  }
}

TEST(Api, QueryPositionsKeepThoseRowsOfTheWholeMask) {
  const Mask doc = must_compile(
      "mask m(docs: segments) {\n  for d in docs {\n    q in d: k in [d.start, q]\n  }\n}\n");
  const Params params{{"docs", Segments::from_boundaries({0, 100, 230, 300})}};
  const Dims dims{300, 300};
  const Plan whole = doc.specialize(params, dims, {32, 32});
  const std::vector<int32_t> positions{0, 99, 100, 101, 229, 250, 299};
  const Plan rank = doc.specialize(params, dims, {32, 32}, positions);
  EXPECT_EQ(rank.dims().nq, 7);
  EXPECT_EQ(rank.dims().nk, 300);
  const std::vector<uint8_t> all = whole.dense(), mine = rank.dense();
  for (size_t i = 0; i < positions.size(); ++i) {
    const auto row = all.begin() + static_cast<ptrdiff_t>(positions[i]) * 300;
    EXPECT_TRUE(std::equal(row, row + 300, mine.begin() + static_cast<ptrdiff_t>(i) * 300)) << i;
  }
  EXPECT_EQ(doc.count_tiles(params, dims, {32, 32}, positions).visible_pairs,
            rank.stats().visible_pairs);
  EXPECT_EQ(doc.block_grid(params, dims, {32, 32}, positions).q_blocks, 1);
  for (const auto& [bad, rule] :
       {std::pair{std::vector<int32_t>{4, 4}, "query_positions[1] = 4 does not follow 4"},
        std::pair{std::vector<int32_t>{300}, "query_positions[0] = 300 is outside [0, nq)"},
        std::pair{std::vector<int32_t>{-2}, "query_positions[0] = -2 is outside [0, nq)"}}) {
    try {
      doc.specialize(params, dims, {32, 32}, bad);
      ADD_FAILURE() << "no error for " << rule;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
    }
  }
}

TEST(Api, MasksSharedAcrossHeadsAreStoredOnce) {
  const Mask m =
      must_compile("mask m(windows: int[]) {\n  q in all: k in (q - windows[h], q]\n}\n");
  const Dims dims{64, 64, 2, 4};
  const Plan same = m.specialize({{"windows", std::vector<int64_t>{5, 5, 5, 5}}}, dims, {16, 16});
  EXPECT_EQ(same.stats().instances, 1);
  const Plan two = m.specialize({{"windows", std::vector<int64_t>{5, 9, 5, 9}}}, dims, {16, 16});
  EXPECT_EQ(two.stats().instances, 2);
  EXPECT_EQ(two.dense(1, 2), two.dense(0, 0));
  EXPECT_NE(two.dense(1, 1), two.dense(0, 0));
  const Mask plain = must_compile("mask m() { q in all: k in [0, q] }");
  EXPECT_EQ(plain.specialize({}, dims, {16, 16}).stats().instances, 1);
}

TEST(Api, PathologicalProgramsGetDiagnostics) {
  std::string deep = "mask m() { q in all: k in [0, q";
  for (int i = 0; i < 3000; ++i) deep += " + 1";
  deep += "] }";
  CompileResult r = compile(deep, "deep.mask");
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.diagnostics.empty());
  CompileResult sub = compile(
      "mask m() {\n  let v = grid(0, 2, 3, 4)\n  q in all: k in all - v.ball(q, 1)\n}\n", "s.mask");
  ASSERT_FALSE(sub);
  EXPECT_EQ(sub.diagnostics[0].line, 3);
  EXPECT_NE(sub.diagnostics[0].message.find("cannot subtract"), std::string::npos);
}

TEST(Api, EstimatesScaleWithTheWorkTheyCount) {
  const Mask causal = must_compile("mask m() { q in all: k in [0, q] }");
  const Dims one{4096, 4096, 1, 1}, many{4096, 4096, 2, 8};
  const Tiling tile{128, 128};
  const TileCounts counts = causal.count_tiles({}, one, tile);
  const double forward = estimated_forward_seconds(counts, tile, 1);
  EXPECT_GT(forward, 0);
  // One distinct mask stands for all 16 (b, h).
  EXPECT_EQ(causal.count_tiles({}, many, tile).instances, 1);
  EXPECT_DOUBLE_EQ(estimated_forward_seconds(causal.count_tiles({}, many, tile), tile, 16),
                   16 * forward);
  // Partial tiles cost more than full ones; twice the length, about four times the tiles.
  TileCounts all_partial = counts;
  all_partial.partial_tiles += all_partial.full_tiles;
  all_partial.full_tiles = 0;
  EXPECT_GT(estimated_forward_seconds(all_partial, tile, 1), forward);
  EXPECT_GT(estimated_forward_seconds(causal.count_tiles({}, {8192, 8192, 1, 1}, tile), tile, 1),
            3.9 * forward);
  // The backward counts 64-row halves; a 32-key window leaves the lower half of each tile
  // left of the diagonal empty, and the backward skips it.
  const Tiling halves = backward_halves(tile);
  EXPECT_EQ(halves.m, 64);
  EXPECT_EQ(halves.n, 128);
  EXPECT_GT(estimated_backward_seconds(causal.count_tiles({}, one, halves), halves, 1),
            2 * forward);
  const Mask window = must_compile("mask m() { q in all: k in [q - 31, q] }");
  const TileCounts window_tiles = window.count_tiles({}, one, tile);
  const TileCounts window_halves = window.count_tiles({}, one, halves);
  EXPECT_LT(window_halves.full_tiles + window_halves.partial_tiles,
            2 * (window_tiles.full_tiles + window_tiles.partial_tiles));
  EXPECT_DOUBLE_EQ(estimated_gather_seconds(2, 4096, 8), 2 * estimated_gather_seconds(1, 4096, 8));
  EXPECT_EQ(estimated_forward_seconds(TileCounts{}, tile, 1), 0);  // no instances, no work
}

}  // namespace
}  // namespace cm
