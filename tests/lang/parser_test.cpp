// Parser tests, through the AST printer: precedence, associativity, interval ends, statement
// forms, newline handling, and syntax errors.
#include "lang/parser.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace cm::lang {
namespace {

// The parse dump of `mask m(...) { BODY }`, or the formatted errors.
std::string parse_body(const std::string& body, const std::string& params = "") {
  const std::string source = "mask m(" + params + ") {\n" + body + "\n}\n";
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  std::string dump;
  if (!run_frontend(source, "t.mask", "parse", &dump, program, diagnostics) && dump.empty()) {
    std::string out;
    for (const Diagnostic& d : diagnostics) out += d.format();
    return out;
  }
  // Drop the header line; keep the statements without their positions.
  std::string out;
  size_t line_start = dump.find('\n') + 1;
  while (line_start < dump.size()) {
    const size_t end = dump.find('\n', line_start);
    std::string line = dump.substr(line_start, end - line_start);
    const size_t at = line.rfind("  @");
    if (at != std::string::npos) line.erase(at);
    out += line.substr(2) + "\n";
    line_start = end + 1;
  }
  return out;
}

TEST(Parser, Precedence) {
  EXPECT_EQ(parse_body("let x = 1 + 2 * 3 - 4"), "let x = (- (+ 1 (* 2 3)) 4)\n");
  EXPECT_EQ(parse_body("let x = -a * b"), "let x = (* (- a) b)\n");
  EXPECT_EQ(parse_body("let x = a < b && c == d || !e"),
            "let x = (|| (&& (< a b) (== c d)) (! e))\n");
  EXPECT_EQ(parse_body("let x = a | b & c - d"), "let x = (| a (& b (- c d)))\n");
  EXPECT_EQ(parse_body("let x = a / b % c"), "let x = (% (/ a b) c)\n");
}

TEST(Parser, IntervalEndsAndGrouping) {
  EXPECT_EQ(parse_body("let x = [a, b] | [a, b) | (a, b] | (a, b)"),
            "let x = (| (| (| [a, b] [a, b)) (a, b]) (a, b))\n");
  EXPECT_EQ(parse_body("let x = (a + b) * c"), "let x = (* (+ a b) c)\n");
  EXPECT_EQ(parse_body("let x = L[i][j].start"), "let x = (. (index (index L i) j) start)\n");
}

TEST(Parser, CallsMethodsIfAndLet) {
  EXPECT_EQ(parse_body("let x = g.box(q, 1, 2)"), "let x = (.box g q 1 2)\n");
  EXPECT_EQ(parse_body("let x = min(a, b, c)"), "let x = (call min a b c)\n");
  EXPECT_EQ(parse_body("let x = if a then b else c + 1"), "let x = (if a b (+ c 1))\n");
  EXPECT_EQ(parse_body("let x = let y = 2 in y * y"), "let x = (let y 2 (* y y))\n");
}

TEST(Parser, Statements) {
  EXPECT_EQ(parse_body("for s in L { q in s: k in [s.start, q] }\nif c { q in all: k in none } "
                       "else if d {\n} else { }"),
            "for s in L\n"
            "  region q in s : k in [(. s start), q]\n"
            "if c\n"
            "  region q in all : k in none\n"
            "else\n"
            "  if d\n"
            "  else\n");
}

TEST(Parser, NewlinesInsideBracketsAndAfterOperators) {
  EXPECT_EQ(parse_body("q in all: k in [0,\n  diag] |\n  none; let y = (1\n + 2)"),
            "region q in all : k in (| [0, diag] none)\nlet y = (+ 1 2)\n");
}

TEST(Parser, SyntaxErrorsSayWhatWasExpectedAndFound) {
  EXPECT_EQ(parse_body("let x = 1 +"),
            "t.mask:3:1: error: expected an expression, found '}'\n  }\n  ^\n");
  EXPECT_EQ(
      parse_body("let x 1"),
      "t.mask:2:7: error: expected '=' after the name in 'let', found '1'\n  let x 1\n        ^\n");
  EXPECT_EQ(parse_body("let x = a < b < c"),
            "t.mask:2:15: error: comparisons do not chain; write 'a < b && b < c' instead\n"
            "  let x = a < b < c\n                ^\n");
}

TEST(Parser, ParameterBounds) {
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  std::string dump;
  ASSERT_TRUE(run_frontend("mask m(W: int >= 1, A: int[] >= -2, n: int, d: segments) {\n}\n",
                           "t.mask", "parse", &dump, program, diagnostics));
  EXPECT_EQ(dump.substr(0, dump.find("  @")),
            "mask m(W: int >= 1, A: int[] >= -2, n: int, d: segments)");
  ASSERT_EQ(program.params.size(), 4u);
  EXPECT_EQ(program.params[0].min, 1);
  EXPECT_EQ(program.params[1].min, -2);
  EXPECT_FALSE(program.params[2].min.has_value());
  EXPECT_EQ(parse_body("", "W: int >= x"),
            "t.mask:1:18: error: expected an integer after '>=', found 'x'\n"
            "  mask m(W: int >= x) {\n                   ^\n");
}

TEST(Parser, RequireStatements) {
  EXPECT_EQ(parse_body("require W <= Nk && W > 0\nfor d in D {\n  require d.end <= Nq\n}"),
            "require (&& (<= W Nk) (> W 0))\nfor d in D\n  require (<= (. d end) Nq)\n");
  EXPECT_EQ(
      parse_body("require"),
      "t.mask:2:8: error: expected an expression, found end of line\n  require\n         ^\n");
}

TEST(Parser, DeepNestingIsAnErrorNotACrash) {
  const std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
  EXPECT_NE(parse_body("let x = " + deep).find("nesting is too deep"), std::string::npos);
  std::string chain = "1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_NE(parse_body("let x = " + chain).find("nesting is too deep"), std::string::npos);
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "if c {";
  EXPECT_NE(parse_body(blocks).find("nesting is too deep"), std::string::npos);
}

}  // namespace
}  // namespace cm::lang
