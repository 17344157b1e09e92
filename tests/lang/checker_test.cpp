// Checker tests: the types it assigns (through the check dump) and the rules it enforces.
#include "lang/checker.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace cm::lang::testing {
namespace {

// The check dump of the one statement in `mask m(PARAMS) { BODY }`, without its position.
std::string checked(const std::string& body, const std::string& params = "") {
  const std::string source = "mask m(" + params + ") {\n" + body + "\n}\n";
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  std::string dump;
  if (!run_frontend(source, "t.mask", "check", &dump, program, diagnostics)) {
    return diagnostics.empty() ? "?" : "error: " + diagnostics[0].message;
  }
  std::string line = dump.substr(dump.find('\n') + 3);
  return line.substr(0, line.rfind("  @"));
}

TEST(Checker, ArithmeticComparisonAndLogic) {
  EXPECT_EQ(checked("let x = 1 + b * h"), "let x = (+ 1:int (* b:int h:int):int):int");
  EXPECT_EQ(checked("let x = Nq < Nk || !(b == 0)"),
            "let x = (|| (< Nq:int Nk:int):bool (! (== b:int 0:int):bool):bool):bool");
}

TEST(Checker, SetLikeValuesCoerceInSetOperators) {
  EXPECT_EQ(checked("let x = s | L - g", "s: segment, L: segments, g: int"),
            "error: '-' needs two ints or two sets, found segments and int");
  EXPECT_EQ(checked("let x = s | L - grid(0, 2, 2)", "s: segment, L: segments"),
            "let x = (| s:segment (- L:segments (call grid 0:int 2:int 2:int):2D grid):set):set");
  EXPECT_EQ(checked("let x = if b == 0 then s else all", "s: segment"),
            "let x = (if (== b:int 0:int):bool s:segment all:set):set");
}

TEST(Checker, FieldsIndexingAndMethods) {
  EXPECT_EQ(checked("let x = L[A[0]].len + L.count + A.len", "L: segments, A: int[]"),
            "let x = (+ (+ (. (index L:segments (index A:int[] 0:int):int):segment len):int "
            "(. L:segments count):int):int (. A:int[] len):int):int");
  EXPECT_EQ(checked("let x = grid(0, 2, 3, 4).ball(5, 1)"),
            "let x = (.ball (call grid 0:int 2:int 3:int 4:int):3D grid 5:int 1:int):set");
  EXPECT_EQ(checked("let x = grid(0, 3, 4).disk(5, 1)"),
            "let x = (.disk (call grid 0:int 3:int 4:int):2D grid 5:int 1:int):set");
}

TEST(Checker, QueryRowRules) {
  EXPECT_EQ(checked("q in [0, q]: k in all"), "error: 'q' cannot be used in a query set");
  EXPECT_EQ(checked("let d = diag + 1\nq in [0, d]: k in all"),
            "error: 'd' depends on q and cannot be used in a query set");
  EXPECT_EQ(checked("if q > 0 { }"), "error: 'q' cannot be used in an 'if' statement's condition");
  // q is fine in key sets, directly or through lets, and in if expressions there.
  EXPECT_EQ(checked("let d = diag\nq in all: k in if d > 2 then [0, d] else none").substr(0, 11),
            "let d = dia");
}

TEST(Checker, NamesAreScopedAndNeverShadowed) {
  EXPECT_EQ(checked("for s in L { let x = s.start }\nlet y = x", "L: segments"),
            "error: unknown name 'x'");
  EXPECT_EQ(checked("let W = 1", "W: int"), "error: 'W' is already defined at 1:8");
  EXPECT_EQ(checked("let y = 1; let x = let y = 2 in y"), "error: 'y' is already defined at 2:5");
  EXPECT_EQ(checked("let diag = 1"),
            "error: 'diag' is a built-in name and cannot be used as a 'let' name");
  EXPECT_EQ(checked("let x = min"), "error: 'min' is a function; call it as min(...)");
}

TEST(Checker, StopsAfterTheErrorLimit) {
  std::string body;
  for (int i = 0; i < 100; ++i) body += "let x" + std::to_string(i) + " = nope\n";
  const std::string source = "mask m() {\n" + body + "}\n";
  ir::Program program;
  std::vector<Diagnostic> diagnostics;
  EXPECT_FALSE(run_frontend(source, "t.mask", "", nullptr, program, diagnostics));
  EXPECT_EQ(diagnostics.size(), static_cast<size_t>(DiagnosticSink::kMaxErrors));
}

}  // namespace
}  // namespace cm::lang::testing
