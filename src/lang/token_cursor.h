// The parser's view of the token stream: look-ahead, matching, newline handling inside brackets,
// the recursion limit, and syntax-error reporting. Internal to the parser.
#pragma once

#include <string>
#include <vector>

#include "lang/diagnostics.h"
#include "lang/lexer.h"
#include "lang/parser.h"

namespace cm::lang {

struct SyntaxError {};  // thrown after the error has been reported, to unwind the descent

class TokenCursor {
 public:
  // Pre: `tokens` ends with kEnd.
  TokenCursor(const std::vector<Token>& tokens, DiagnosticSink& sink)
      : tokens_(tokens), sink_(sink) {}

 protected:
  // Counts recursion depth for the lifetime of one parse call.
  class DepthGuard {
   public:
    DepthGuard(TokenCursor& cursor, const Token& at) : cursor_(cursor) {
      if (++cursor_.depth_ > kMaxNesting) cursor_.too_deep(at.loc);
    }
    ~DepthGuard() { --cursor_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    TokenCursor& cursor_;
  };

  [[noreturn]] void too_deep(SourceLoc loc) {
    fail_at(loc, "nesting is too deep (the limit is " + std::to_string(kMaxNesting) + " levels)");
  }

  // Inside parentheses and brackets (nesting_ > 0) a newline is just white space.
  const Token& peek() {
    if (nesting_ > 0) skip_newlines();
    return tokens_[pos_];
  }
  const Token& next() {
    const Token& t = peek();
    if (t.kind != TokenKind::kEnd) ++pos_;
    return t;
  }
  bool accept(TokenKind kind) {
    if (peek().kind != kind) return false;
    next();
    return true;
  }
  // Consumes newlines and then a `kind` token if one follows them; otherwise consumes nothing.
  bool accept_after_newlines(TokenKind kind) {
    size_t ahead = pos_;
    while (tokens_[ahead].kind == TokenKind::kNewline) ++ahead;
    if (tokens_[ahead].kind != kind) return false;
    pos_ = ahead + 1;
    return true;
  }
  const Token& expect(TokenKind kind, const std::string& what) {
    if (peek().kind != kind) fail(peek(), what);
    return next();
  }
  // Just past the last token consumed: where a statement that ends there ends.
  SourceLoc end_of_previous() const {
    const Token& t = tokens_[pos_ - 1];
    return {t.loc.line, t.loc.column + static_cast<int>(t.text.size())};
  }
  void skip_newlines() {
    while (tokens_[pos_].kind == TokenKind::kNewline) ++pos_;
  }
  [[noreturn]] void fail(const Token& found, const std::string& expected) {
    fail_at(found.loc, "expected " + expected + ", found " + describe(found));
  }
  [[noreturn]] void fail_at(SourceLoc loc, const std::string& message) {
    sink_.error(loc, message);
    throw SyntaxError{};
  }

  int nesting_ = 0;  // open parentheses and brackets

 private:
  const std::vector<Token>& tokens_;
  DiagnosticSink& sink_;
  size_t pos_ = 0;
  int depth_ = 0;  // recursion depth
};

}  // namespace cm::lang
