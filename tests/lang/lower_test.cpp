// Lowering tests: the IR's structure (through ir::print) and its meaning (through the test
// evaluator), construct by construct.
#include "lang/lower.h"

#include <gtest/gtest.h>

#include "ir_eval.h"
#include "test_util.h"

namespace cm::lang::testing {
namespace {

ir::Program body(const std::string& statements, const std::string& params = "") {
  return compile_ok("mask m(" + params + ") {\n" + statements + "\n}\n");
}

// The keys visible to row q, as a 0/1 string over [0, nk).
std::string row(const ir::Program& p, const std::vector<ParamValue>& values, int64_t q, int64_t nq,
                int64_t nk, int64_t h = 0) {
  IrEval eval(p, values, nq, nk, 0, h);
  std::string out;
  for (int64_t k = 0; k < nk; ++k) out += eval.visible(q, k) ? '1' : '0';
  return out;
}

TEST(Lower, ProgramShape) {
  const ir::Program p = body("for s in L { for t in L { q in s: k in t } }", "W: int, L: segments");
  EXPECT_EQ(p.name, "m");
  EXPECT_EQ(p.file, "test.mask");
  ASSERT_EQ(p.params.size(), 2u);
  EXPECT_EQ(p.params[1].type, ir::ParamType::kSegments);
  EXPECT_EQ(p.slot_names, (std::vector<std::string>{"q", "b", "h", "Nq", "Nk", "s", "t"}));
  ASSERT_EQ(p.regions.size(), 1u);
  ASSERT_EQ(p.regions[0].loops.size(), 2u);
  EXPECT_EQ(p.regions[0].loops[0].slot, 5);
  EXPECT_EQ(p.regions[0].loops[1].slot, 6);
  EXPECT_EQ(p.regions[0].loops[0].segments_param, 1);
  EXPECT_EQ(p.regions[0].loc.line, 2);
  EXPECT_EQ(p.source_lines.size(), 4u);
  EXPECT_TRUE(p.regions[0].keys.empty());  // left for normalize
}

TEST(Lower, IntervalEnds) {
  const ir::Program p = body("q in all: k in [2, 5] | (7, 9) | (10, 12] | [14, 15)");
  EXPECT_EQ(row(p, {}, 0, 1, 17), "00111100100110100");
  EXPECT_EQ(row(body("q in all: k in [5, 2]"), {}, 0, 1, 8), "00000000");  // empty, no error
}

TEST(Lower, StructureThroughPrinter) {
  const std::string text =
      ir::print(body("let w = W\nq in [0, 4): k in (diag - w, diag]", "W: int"));
  EXPECT_NE(text.find("q in [0, 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("k in [((((q + Nk) - Nq) - W) + 1), (((q + Nk) - Nq) + 1))"),
            std::string::npos)
      << text;
}

TEST(Lower, AllMeansKeysInKeySetsAndRowsInQuerySets) {
  const ir::Program p = body("let a = all\nq in a: k in a");
  EXPECT_EQ(row(p, {}, 2, 3, 6), "111111");
  EXPECT_EQ(row(p, {}, 0, 3, 6), "111111");
  const std::string text = ir::print(p);
  EXPECT_NE(text.find("q in [0, Nq)"), std::string::npos) << text;
  EXPECT_NE(text.find("k in [0, Nk)"), std::string::npos) << text;
}

TEST(Lower, FloorDivisionAndModulo) {
  // Keys [x, x] for x = -7 / 2 + 10 = 6 and -7 % 3 + 4 = 6 (floor semantics), so only key 6.
  EXPECT_EQ(row(body("q in all: k in [-7 / 2 + 10, -7 % 3 + 4]"), {}, 0, 1, 8), "00000010");
  // 7 / -2 = -4 and 7 % -3 = -2.
  EXPECT_EQ(row(body("q in all: k in [7 / -2 + 5, 7 % -3 + 3]"), {}, 0, 1, 4), "0100");
}

TEST(Lower, BuiltinFunctions) {
  const ir::Program p = body(
      "q in all: k in [max(1, 2), min(5, 3, 4)] | [abs(-7), clamp(20, 0, 8)] | [isqrt(120), "
      "isqrt(121)]");
  EXPECT_EQ(row(p, {}, 0, 1, 13), "0011000110110");
}

TEST(Lower, BoolsAndIfExpressions) {
  const ir::Program p =
      body("q in all: k in if q >= 2 && !(q == 4) || q < 0 then [0, q] else none");
  EXPECT_EQ(row(p, {}, 1, 6, 6), "000000");
  EXPECT_EQ(row(p, {}, 3, 6, 6), "111100");
  EXPECT_EQ(row(p, {}, 4, 6, 6), "000000");
  EXPECT_EQ(row(body("q in all: k in [if q > 1 then 1 else 3, 4)"), {}, 0, 1, 5), "00010");
}

TEST(Lower, IfStatementsGuardQuerySets) {
  const ir::Program p = body(
      "if W > 2 { q in all: k in [0, 0] } else if W > 1 { q in all: k in [1, 1] }"
      " else { q in all: k in [2, 2] }",
      "W: int");
  EXPECT_EQ(row(p, {int64_t{3}}, 0, 1, 3), "100");
  EXPECT_EQ(row(p, {int64_t{2}}, 0, 1, 3), "010");
  EXPECT_EQ(row(p, {int64_t{0}}, 0, 1, 3), "001");
}

TEST(Lower, SegmentsFieldsAndIndexing) {
  const std::vector<ParamValue> values = {segments_of({2, 3, 4}), std::vector<int64_t>{10, 20, 30},
                                          segments_of({1}, 6)};
  const std::string params = "L: segments, A: int[], s: segment";
  // L[1] = [2, 5); s = [6, 7) with index 0; A[L[2]] is A[2].
  auto keys = [&](const std::string& set) {
    return row(body("q in all: k in " + set, params), values, 0, 1, 10);
  };
  EXPECT_EQ(keys("L[1]"), "0011100000");
  EXPECT_EQ(keys("L"), "1111111110");
  EXPECT_EQ(keys("s"), "0000001000");
  EXPECT_EQ(keys("[L.count, A.len + s.index]"), "0001000000");
  EXPECT_EQ(keys("[A[L[2]] / 10, L[2].len + L[2].index]"), "0001111000");
  EXPECT_EQ(keys("[s.start, s.end]"), "0000001100");
  EXPECT_EQ(keys("L - [3, 6) & [0, 8)"), "1110001100");
}

TEST(Lower, LoopVariablesKnowTheirIndex) {
  const ir::Program p = body("for s in L { q in s: k in [s.index, s.index] | [A[s], A[s]] }",
                             "L: segments, A: int[]");
  const std::vector<ParamValue> values = {segments_of({2, 2}), std::vector<int64_t>{5, 7}};
  EXPECT_EQ(row(p, values, 1, 4, 8), "10000100");
  EXPECT_EQ(row(p, values, 3, 4, 8), "01000001");
}

TEST(Lower, GridCoordinatesAndNeighbourhoods) {
  // A 3D grid of 2 frames x 3 rows x 4 cols starting at token 2; token 2 + 12 + 4 + 3 = 21 is
  // frame 1, row 1, col 3.
  const std::string coords =
      "let g = grid(2, 2, 3, 4)\nq in all: k in [g.frame(21), g.frame(21)] | "
      "[g.row(21) + 2, g.row(21) + 2] | [g.col(21) + 4, g.col(21) + 4] | [g.end, g.end]";
  EXPECT_EQ(row(body(coords), {}, 0, 1, 27), "010100010000000000000000001");
  // 2D box and disk on a 3 x 3 grid at token 1; centre token 5 is (1, 1).
  EXPECT_EQ(row(body("let g = grid(1, 3, 3)\nq in all: k in g.box(5, 0, 1)"), {}, 0, 1, 10),
            "0000111000");
  EXPECT_EQ(row(body("let g = grid(1, 3, 3)\nq in all: k in g.disk(5, 1)"), {}, 0, 1, 10),
            "0000010000");
  EXPECT_EQ(row(body("let g = grid(1, 3, 3)\nq in all: k in g.disk(5, 2)"), {}, 0, 1, 10),
            "0111111111");  // corners: 1 + 1 < 4
  EXPECT_EQ(row(body("let g = grid(1, 3, 3)\nq in all: k in g.ellipse(5, 1, 2)"), {}, 0, 1, 10),
            "0000111000");
  EXPECT_EQ(row(body("let g = grid(1, 3, 3)\nq in all: k in g"), {}, 0, 1, 11), "01111111110");
  // On a 2 x 3 x 3 grid, token 4 is frame 0, (1, 1). A ball of radius 1 is the centre alone
  // (the bound is strict); an ellipse with rt = 2 also reaches the same cell in frame 1.
  EXPECT_EQ(row(body("let g = grid(0, 2, 3, 3)\nq in all: k in g.ball(4, 1)"), {}, 0, 1, 18),
            "000010000000000000");
  EXPECT_EQ(
      row(body("let g = grid(0, 2, 3, 3)\nq in all: k in g.ellipse(4, 2, 1, 1)"), {}, 0, 1, 18),
      "000010000000010000");
  EXPECT_EQ(row(body("let g = grid(0, 2, 3, 3)\nq in all: k in g.box(4, 1, 0, 0)"), {}, 0, 1, 18),
            "000010000000010000");
}

TEST(Lower, BatchAndHead) {
  const ir::Program p = body("q in all: k in [b + 2 * h, b + 2 * h]");
  IrEval eval(p, {}, 1, 8, 1, 3);
  EXPECT_TRUE(eval.visible(0, 7));
  EXPECT_FALSE(eval.visible(0, 6));
}

}  // namespace
}  // namespace cm::lang::testing
