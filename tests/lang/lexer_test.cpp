// Lexer tests: token kinds, spellings, positions, comments and lexical errors.
#include "lang/lexer.h"

#include <gtest/gtest.h>

namespace cm::lang {
namespace {

struct Lexed {
  bool ok;
  std::vector<Token> tokens;
  std::vector<Diagnostic> diagnostics;
};

Lexed run_lex(const std::string& source) {
  Lexed out;
  const std::vector<std::string> lines = split_lines(source);
  DiagnosticSink sink("t.mask", lines, out.diagnostics);
  out.ok = lex(source, sink, out.tokens);
  return out;
}

std::vector<TokenKind> kinds(const std::string& source) {
  std::vector<TokenKind> out;
  for (const Token& t : run_lex(source).tokens) out.push_back(t.kind);
  return out;
}

TEST(Lexer, KeywordsNamesAndIntegers) {
  const Lexed l = run_lex("mask m(W: int) { let x = W1 + 42 }");
  ASSERT_TRUE(l.ok);
  using K = TokenKind;
  const std::vector<K> want = {K::kMask,   K::kIdent,  K::kLParen, K::kIdent, K::kColon,  K::kIdent,
                               K::kRParen, K::kLBrace, K::kLet,    K::kIdent, K::kAssign, K::kIdent,
                               K::kPlus,   K::kInt,    K::kRBrace, K::kEnd};
  EXPECT_EQ(kinds("mask m(W: int) { let x = W1 + 42 }"), want);
  EXPECT_EQ(l.tokens[11].text, "W1");
  EXPECT_EQ(l.tokens[13].value, 42);
}

TEST(Lexer, TwoCharacterOperatorsWin) {
  using K = TokenKind;
  EXPECT_EQ(kinds("<= >= == != && || < > = ! & |"),
            (std::vector<K>{K::kLe, K::kGe, K::kEqEq, K::kNotEq, K::kAndAnd, K::kOrOr, K::kLt,
                            K::kGt, K::kAssign, K::kBang, K::kAmp, K::kPipe, K::kEnd}));
}

TEST(Lexer, CommentsAndNewlines) {
  using K = TokenKind;
  EXPECT_EQ(kinds("a # comment ( [\nb\r\n"),
            (std::vector<K>{K::kIdent, K::kNewline, K::kIdent, K::kNewline, K::kEnd}));
}

TEST(Lexer, Positions) {
  const Lexed l = run_lex("ab\n  \tcd");
  ASSERT_TRUE(l.ok);
  EXPECT_EQ(l.tokens[0].loc.line, 1);
  EXPECT_EQ(l.tokens[0].loc.column, 1);
  EXPECT_EQ(l.tokens[2].loc.line, 2);
  EXPECT_EQ(l.tokens[2].loc.column, 4);  // a tab counts as one column
}

TEST(Lexer, LargestIntegerFits) {
  const Lexed l = run_lex("9223372036854775807");
  ASSERT_TRUE(l.ok);
  EXPECT_EQ(l.tokens[0].value, INT64_MAX);
}

TEST(Lexer, IntegerOverflowIsAnError) {
  const Lexed l = run_lex("x = 9223372036854775808");
  ASSERT_FALSE(l.ok);
  ASSERT_EQ(l.diagnostics.size(), 1u);
  EXPECT_EQ(l.diagnostics[0].column, 5);
  EXPECT_NE(l.diagnostics[0].message.find("too large"), std::string::npos);
}

TEST(Lexer, UnexpectedCharacters) {
  Lexed l = run_lex("a $ b");
  ASSERT_FALSE(l.ok);
  EXPECT_EQ(l.diagnostics[0].message, "unexpected character '$'");
  EXPECT_EQ(l.diagnostics[0].column, 3);
  l = run_lex("\xff");
  ASSERT_FALSE(l.ok);
  EXPECT_EQ(l.diagnostics[0].message, "unexpected character byte 0xff");
  l = run_lex("12ab");
  ASSERT_FALSE(l.ok);
  EXPECT_EQ(l.diagnostics[0].message, "unexpected 'a' after integer literal");
}

TEST(Diagnostics, FormatHasPositionSourceLineAndCaret) {
  Diagnostic d{"f.mask", 2, 5, "bad thing", "\tab cd"};
  EXPECT_EQ(d.format(), "f.mask:2:5: error: bad thing\n  \tab cd\n  \t   ^\n");
  Diagnostic nowhere{"f.mask", 0, 0, "no place", ""};
  EXPECT_EQ(nowhere.format(), "f.mask: error: no place\n");
}

TEST(Diagnostics, SinkStopsAtItsLimit) {
  std::vector<Diagnostic> out;
  const std::vector<std::string> lines = {"x"};
  DiagnosticSink sink("f", lines, out);
  for (int i = 0; i < 3 * DiagnosticSink::kMaxErrors; ++i) sink.error({1, 1}, "e");
  EXPECT_EQ(out.size(), static_cast<size_t>(DiagnosticSink::kMaxErrors));
  EXPECT_EQ(out[0].source_line, "x");
}

}  // namespace
}  // namespace cm::lang
