// Pass `simplify`: constant folding and set simplification.
//   Pre:  a lowered program (regions with query_set and key_set trees; not normalized).
//   Post: the same mask; every expression reachable from a region or a requirement is rebuilt
//         through the folding builders of fold.h (no operator with all-constant operands
//         remains unless evaluating it is an error), and set trees have no constant-empty
//         intervals, no unions/intersections with `none`, and no selects on constant conditions.
#pragma once

#include "ir/ir.h"

namespace cm::passes {

void simplify(ir::Program& program);

}  // namespace cm::passes
