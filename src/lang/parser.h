// The recursive-descent parser: tokens to a MaskDecl.
#pragma once

#include <memory>
#include <vector>

#include "lang/ast.h"
#include "lang/diagnostics.h"
#include "lang/lexer.h"

namespace cm::lang {

// Nesting limit for expressions and blocks; deeper input gets an error instead of exhausting
// the stack in this or a later pass.
inline constexpr int kMaxNesting = 200;

// Pre: `tokens` ends with kEnd (as lex() produces).
// Post: the tree, or nullptr after reporting the first syntax error to `sink`.
std::unique_ptr<MaskDecl> parse(const std::vector<Token>& tokens, DiagnosticSink& sink);

}  // namespace cm::lang
