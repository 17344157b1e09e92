// Tokens of the mask language and the lexer that produces them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lang/diagnostics.h"

namespace cm::lang {

enum class TokenKind : uint8_t {
  kEnd,
  kNewline,
  kIdent,
  kInt,
  // Keywords.
  kMask,
  kLet,
  kIn,
  kFor,
  kIf,
  kThen,
  kElse,
  kRequire,
  // Punctuation.
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kComma,
  kColon,
  kSemicolon,
  kDot,
  kAssign,
  // Operators.
  kPlus,
  kMinus,
  kStar,
  kSlash,
  kPercent,
  kPipe,
  kAmp,
  kOrOr,
  kAndAnd,
  kEqEq,
  kNotEq,
  kLt,
  kLe,
  kGt,
  kGe,
  kBang,
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;   // the spelling, as written
  int64_t value = 0;  // kInt
  SourceLoc loc;
};

// How a token kind reads in an error message, e.g. "'('" or "an integer".
std::string describe(TokenKind kind);
// How a particular token reads in an error message, e.g. "'foo'" or "end of line".
std::string describe(const Token& token);

// Splits `source` into tokens ending with kEnd. Comments (# to end of line) are dropped;
// newlines become kNewline tokens. Returns false after reporting the first lexical error.
bool lex(const std::string& source, DiagnosticSink& sink, std::vector<Token>& tokens);

}  // namespace cm::lang
