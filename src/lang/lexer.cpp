// The lexer: bytes to tokens, with 1-based line and column positions.
#include "lang/lexer.h"

#include <array>
#include <cstdio>
#include <limits>
#include <string_view>
#include <utility>

namespace cm::lang {
namespace {

struct Spelling {
  std::string_view text;
  TokenKind kind;
};

constexpr std::array kKeywords = {
    Spelling{"mask", TokenKind::kMask}, Spelling{"let", TokenKind::kLet},
    Spelling{"in", TokenKind::kIn},     Spelling{"for", TokenKind::kFor},
    Spelling{"if", TokenKind::kIf},     Spelling{"then", TokenKind::kThen},
    Spelling{"else", TokenKind::kElse}, Spelling{"require", TokenKind::kRequire},
};

// Two-character operators first so that "<=" is not read as "<" then "=".
constexpr std::array kPunctuation = {
    Spelling{"||", TokenKind::kOrOr},     Spelling{"&&", TokenKind::kAndAnd},
    Spelling{"==", TokenKind::kEqEq},     Spelling{"!=", TokenKind::kNotEq},
    Spelling{"<=", TokenKind::kLe},       Spelling{">=", TokenKind::kGe},
    Spelling{"(", TokenKind::kLParen},    Spelling{")", TokenKind::kRParen},
    Spelling{"[", TokenKind::kLBracket},  Spelling{"]", TokenKind::kRBracket},
    Spelling{"{", TokenKind::kLBrace},    Spelling{"}", TokenKind::kRBrace},
    Spelling{",", TokenKind::kComma},     Spelling{":", TokenKind::kColon},
    Spelling{";", TokenKind::kSemicolon}, Spelling{".", TokenKind::kDot},
    Spelling{"=", TokenKind::kAssign},    Spelling{"+", TokenKind::kPlus},
    Spelling{"-", TokenKind::kMinus},     Spelling{"*", TokenKind::kStar},
    Spelling{"/", TokenKind::kSlash},     Spelling{"%", TokenKind::kPercent},
    Spelling{"|", TokenKind::kPipe},      Spelling{"&", TokenKind::kAmp},
    Spelling{"<", TokenKind::kLt},        Spelling{">", TokenKind::kGt},
    Spelling{"!", TokenKind::kBang},
};

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string show_char(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x21 && byte < 0x7f) return std::string("'") + c + "'";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", byte);
  return std::string("byte ") + buf;
}

}  // namespace

std::string describe(TokenKind kind) {
  switch (kind) {
    case TokenKind::kEnd:
      return "end of input";
    case TokenKind::kNewline:
      return "end of line";
    case TokenKind::kIdent:
      return "a name";
    case TokenKind::kInt:
      return "an integer";
    default:
      break;
  }
  for (const Spelling& s : kKeywords) {
    if (s.kind == kind) return "'" + std::string(s.text) + "'";
  }
  for (const Spelling& s : kPunctuation) {
    if (s.kind == kind) return "'" + std::string(s.text) + "'";
  }
  return "a token";
}

std::string describe(const Token& token) {
  if (token.kind == TokenKind::kEnd || token.kind == TokenKind::kNewline) {
    return describe(token.kind);
  }
  return "'" + token.text + "'";
}

bool lex(const std::string& source, DiagnosticSink& sink, std::vector<Token>& tokens) {
  int line = 1;
  size_t line_start = 0;
  size_t i = 0;
  auto here = [&](size_t at) { return SourceLoc{line, static_cast<int>(at - line_start) + 1}; };
  while (i < source.size()) {
    const char c = source[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '#') {
      while (i < source.size() && source[i] != '\n') ++i;
    } else if (c == '\n') {
      tokens.push_back({TokenKind::kNewline, "\n", 0, here(i)});
      ++i;
      ++line;
      line_start = i;
    } else if (is_ident_start(c)) {
      const size_t begin = i;
      while (i < source.size() && (is_ident_start(source[i]) || is_digit(source[i]))) ++i;
      Token t{TokenKind::kIdent, source.substr(begin, i - begin), 0, here(begin)};
      for (const Spelling& k : kKeywords) {
        if (k.text == t.text) t.kind = k.kind;
      }
      tokens.push_back(std::move(t));
    } else if (is_digit(c)) {
      const size_t begin = i;
      constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
      int64_t value = 0;
      bool overflow = false;
      while (i < source.size() && is_digit(source[i])) {
        const int digit = source[i] - '0';
        if (value > (kMax - digit) / 10) overflow = true;
        if (!overflow) value = value * 10 + digit;
        ++i;
      }
      if (i < source.size() && is_ident_start(source[i])) {
        sink.error(here(i), "unexpected " + show_char(source[i]) + " after integer literal");
        return false;
      }
      if (overflow) {
        sink.error(here(begin), "integer literal " + source.substr(begin, i - begin) +
                                    " is too large (the largest is 9223372036854775807)");
        return false;
      }
      tokens.push_back({TokenKind::kInt, source.substr(begin, i - begin), value, here(begin)});
    } else {
      const Spelling* match = nullptr;
      for (const Spelling& p : kPunctuation) {
        if (std::string_view(source).substr(i, p.text.size()) == p.text) {
          match = &p;
          break;
        }
      }
      if (match == nullptr) {
        sink.error(here(i), "unexpected character " + show_char(c));
        return false;
      }
      tokens.push_back({match->kind, std::string(match->text), 0, here(i)});
      i += match->text.size();
    }
  }
  tokens.push_back({TokenKind::kEnd, "", 0, here(i)});
  return true;
}

}  // namespace cm::lang
