// Expression construction with constant folding and light algebraic simplification. Every pass
// that builds expressions goes through here, so the IR never holds foldable constant subtrees.
#pragma once

#include "ir/ir.h"

namespace cm::passes {

// Builders that fold. `loc` is kept on the new node for evaluation errors.
ir::ExprId make_unary(ir::ExprPool& pool, ir::Op op, ir::ExprId a, ir::SourceLoc loc = {});
ir::ExprId make_binary(ir::ExprPool& pool, ir::Op op, ir::ExprId a, ir::ExprId b,
                       ir::SourceLoc loc = {});
ir::ExprId make_select(ir::ExprPool& pool, ir::ExprId cond, ir::ExprId a, ir::ExprId b,
                       ir::SourceLoc loc = {});

// Rebuilds expression `id` with variable `slot` replaced by `value`, folding as it goes.
ir::ExprId substitute(ir::ExprPool& pool, ir::ExprId id, int32_t slot, ir::ExprId value);

// True if expression `id` reads variable `slot`.
bool depends_on(const ir::ExprPool& pool, ir::ExprId id, int32_t slot);

}  // namespace cm::passes
