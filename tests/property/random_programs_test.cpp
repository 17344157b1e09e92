// Randomly generated mask programs with random parameters, lengths and tilings: the row
// intervals and both descriptor forms must agree exactly with brute-force evaluation of the
// program. The generator writes source text, so the parser, checker and lowering are covered
// as well as every pass after them.
#include "agreement.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

namespace cm::testing {
namespace {

class ProgramGenerator {
 public:
  explicit ProgramGenerator(uint32_t seed) : rng_(seed) {}

  std::string program() {
    std::ostringstream out;
    out << "mask random(docs: segments, W: int[], n: int) {\n";
    out << "  let g = grid(" << pick(0, 9) << ", " << pick(2, 9) << ", " << pick(2, 11) << ")\n";
    out << "  let v = grid(" << pick(0, 5) << ", " << pick(2, 3) << ", " << pick(2, 4) << ", "
        << pick(2, 5) << ")\n";
    const int regions = pick(1, 3);
    for (int r = 0; r < regions; ++r) {
      in_loop_ = chance(0.4);
      if (in_loop_) out << "  for d in docs {\n  ";
      out << "  q in " << query_set() << ": k in " << key_set(3) << "\n";
      if (in_loop_) out << "  }\n";
    }
    out << "}\n";
    return out.str();
  }

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

 private:
  std::string query_set() {
    switch (pick(0, in_loop_ ? 5 : 3)) {
      case 0:
        return "all";
      case 1:
        return bracket(std::to_string(pick(-3, 40)), "Nq - " + std::to_string(pick(0, 30)));
      case 2:
        return "docs";
      case 3:
        return "g";
      case 4:
        return "d";
      default:
        return "[d.start + 1, d.end)";
    }
  }

  // An integer expression that may read q (affine and non-affine forms).
  std::string row_expr() {
    const std::string c = std::to_string(pick(0, 25));
    switch (pick(0, in_loop_ ? 13 : 11)) {
      case 0:
        return "q";
      case 1:
        return "q - " + c;
      case 2:
        return "q + " + c;
      case 3:
        return c;
      case 4:
        return "diag";
      case 5:
        return "min(q, " + c + ")";
      case 6:
        return "max(q - " + c + ", n)";
      case 7:
        return "q / " + std::to_string(pick(1, 5)) + " * 2";
      case 8:
        return "q % " + std::to_string(pick(1, 7)) + " + " + c;
      case 9:
        return "W[h] + q";
      case 10:
        return "clamp(q * 2 - " + c + ", 0, Nk)";
      case 11:
        return "let t = q - " + c + " in if t < n then n else t";
      case 12:
        return "d.start + " + c;
      default:
        return "max(d.end - " + c + ", q)";
    }
  }

  std::string bracket(const std::string& a, const std::string& b) {
    static const char* opens[] = {"[", "("};
    static const char* closes[] = {"]", ")"};
    return std::string(opens[pick(0, 1)]) + a + ", " + b + closes[pick(0, 1)];
  }

  // Sets that can be subtracted: intervals, segment lists, 2D neighbourhoods.
  std::string subtractable() {
    switch (pick(0, 3)) {
      case 0:
        return bracket(row_expr(), row_expr());
      case 1:
        return "docs";
      case 2:
        return "g.disk(q, " + std::to_string(pick(0, 4)) + ")";
      default:
        return "g.box(q, " + std::to_string(pick(0, 2)) + ", " + std::to_string(pick(0, 3)) + ")";
    }
  }

  std::string key_set(int depth) {
    const int choice = depth <= 0 ? pick(0, 4) : pick(0, 10);
    switch (choice) {
      case 0:
      case 1:
        return bracket(row_expr(), row_expr());
      case 2:
        return "g.ellipse(q, " + std::to_string(pick(0, 4)) + ", " + std::to_string(pick(1, 5)) +
               ")";
      case 3:
        return subtractable();
      case 4:
        return in_loop_ ? "d" : "v.ball(q, " + std::to_string(pick(1, 3)) + ")";
      case 5:
      case 6:
        return "(" + key_set(depth - 1) + " | " + key_set(depth - 1) + ")";
      case 7:
        return "(" + key_set(depth - 1) + " & " + key_set(depth - 1) + ")";
      case 8:
        return "(" + key_set(depth - 1) + " - " + subtractable() + ")";
      case 9:
        return "(if q % " + std::to_string(pick(2, 4)) + " == 0 then " + key_set(depth - 1) +
               " else " + key_set(depth - 1) + ")";
      default:
        return "v.box(q, 1, " + std::to_string(pick(0, 1)) + ", " + std::to_string(pick(0, 2)) +
               ")";
    }
  }

  std::mt19937 rng_;
  bool in_loop_ = false;
};

Params random_params(ProgramGenerator& gen, int64_t nq, int heads) {
  std::vector<int64_t> boundaries{gen.pick(0, 3)};
  while (boundaries.back() < nq + 2) boundaries.push_back(boundaries.back() + gen.pick(0, 40));
  std::vector<int64_t> windows;
  for (int h = 0; h < heads; ++h) windows.push_back(gen.pick(-5, 20));
  return {{"docs", Segments::from_boundaries(boundaries)},
          {"W", windows},
          {"n", int64_t{gen.pick(0, 30)}}};
}

TEST(RandomPrograms, AgreeWithBruteForce) {
  const Tiling tilings[] = {{16, 16}, {32, 64}, {48, 16}, {128, 128}, {64, 32}};
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    ProgramGenerator gen(seed);
    const std::string source = gen.program();
    CompileResult compiled = compile(source, "random.mask");
    ASSERT_TRUE(compiled) << source << "\n"
                          << (compiled.diagnostics.empty() ? "" : compiled.diagnostics[0].format());
    const int64_t nq = gen.chance(0.1) ? gen.pick(1, 3) : gen.pick(1, 200);
    const int64_t nk = gen.chance(0.7) ? nq : gen.pick(1, 200);
    const Dims dims{nq, nk, gen.pick(1, 2), gen.pick(1, 3)};
    const Params params = random_params(gen, nq, dims.heads);
    const Tiling tiling = tilings[gen.pick(0, 4)];
    EXPECT_EQ(disagreement(*compiled.mask, params, dims, tiling), "")
        << "seed " << seed << " nq=" << nq << " nk=" << nk << " tile " << tiling.m << "x"
        << tiling.n << "\n"
        << source;
  }
}

}  // namespace
}  // namespace cm::testing
