// Lowering: a checked syntax tree to an ir::Program (src/ir/ir.h).
#pragma once

#include "ir/ir.h"
#include "lang/ast.h"

namespace cm::lang {

// Pre: check(mask) succeeded.
// Post: `program` holds the mask's name, parameters, expressions, sets, grid neighbourhoods,
// regions (loops, query_set, key_set, loc) and slot names (q, b, h, Nq, Nk, then one slot per
// `for` loop, named after its variable). Lets are inlined, sharing one lowering per use
// position; `if` statements become query sets guarded by kSelect; Region::queries and
// Region::keys are left for the normalize pass. Lowering cannot fail on a checked tree.
void lower(const MaskDecl& mask, ir::Program& program);

}  // namespace cm::lang
