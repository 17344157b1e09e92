// The checker: resolves names and assigns types. It annotates the tree in place (Expr::type,
// depends_on_q, name_kind, param, decl) so that lowering can rely on a well-typed program.
#pragma once

#include "lang/ast.h"
#include "lang/diagnostics.h"

namespace cm::lang {

// Pre: `mask` came from parse().
// Post: returns true and sets mask.checked when the program is well formed: every name is
// known, every operand has the type its operator needs, no query set and no `if` statement
// condition depends on q, and no name is declared twice. Otherwise reports each error (up to
// the sink's limit) and returns false.
bool check(MaskDecl& mask, DiagnosticSink& sink);

}  // namespace cm::lang
