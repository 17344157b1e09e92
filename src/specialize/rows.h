// Row evaluation: the concrete visible key intervals of every query row of one (b, h).
#pragma once

#include "ir/ir.h"
#include "specialize/bind.h"
#include "specialize/evaluator.h"
#include "specialize/row_intervals.h"

namespace cm {

// Preconditions: `code` compiled from `program` (normalized, classified); `bindings` valid
// for `program` and `dims`.
// Postconditions: for every row q in [0, nq), the result describes exactly the keys in [0, nk)
// visible to q at (b, h), as row_intervals.h defines: without formulas in `all`; with them
// (neighbourhood terms whose grid lies inside [0, nk)) as
// `residual` plus the row's formula, `all` left empty. Listed intervals are sorted, disjoint
// and non-adjacent. A row gets at most one formula; a second neighbourhood term on the same
// row is listed explicitly.
// Cost: O(loop bindings + rows covered + listed intervals) term evaluations; formula rows cost
// O(1) each.
// Throws cm::Error for evaluation errors (division by zero, index out of range...) and for a
// `require` statement whose condition is false at (b, h) for some binding of its loops.
InstanceRows evaluate_rows(const ir::Program& program, const ProgramCode& code,
                           const Bindings& bindings, const Dims& dims, int32_t b, int32_t h);

}  // namespace cm
