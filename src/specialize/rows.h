// Row evaluation: the concrete visible key intervals of every query row of one (b, h).
#pragma once

#include "ir/ir.h"
#include "specialize/bind.h"
#include "specialize/evaluator.h"
#include "specialize/row_intervals.h"

namespace cm {

// Preconditions: `regions` compiled from `program` (normalized, classified); `bindings` valid
// for `program` and `dims`.
// Postconditions: result.all holds, for every row q in [0, nq), the sorted, disjoint,
// non-adjacent intervals of keys in [0, nk) visible to q at (b, h). Neighbourhood terms whose
// grid lies inside [0, nk) become GridFormula records when `use_formulas` is set, with
// row_formula and residual filled as row_intervals.h describes.
// Cost: O(loop bindings + rows covered + intervals emitted) term evaluations.
// Throws cm::Error for evaluation errors (division by zero, index out of range...).
InstanceRows evaluate_rows(const ir::Program& program, const std::vector<RegionCode>& regions,
                           const Bindings& bindings, const Dims& dims, int32_t b, int32_t h,
                           bool use_formulas = true);

}  // namespace cm
