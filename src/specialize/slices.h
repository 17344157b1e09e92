// A mask instance's visible pairs as attention slices (query range, key range, shape): the
// form MagiAttention's flexible kernels and dispatch solvers take (compilemask.h, AttnSlice).
#pragma once

#include <compilemask/compilemask.h>

#include "specialize/row_intervals.h"

#include <vector>

namespace cm {

// Pre: `rows` is well formed (row_intervals.h: per row, non-empty, sorted, disjoint and
// non-adjacent intervals inside [0, nk)).
// Post: the slices cover exactly the visible pairs of `rows`, each pair once (no two slices
// overlap), and every slice's rows are all non-empty. Sorted by (q_begin, k_begin).
// Method: each interval continues a slice of the row above when its ends moved by the same
// steps (0 or 1 each) as that slice's rows before it, so a run of rows whose interval keeps
// its start and end (full), moves its end (causal), its start (inverse causal) or both
// (bi-causal) by one per row becomes one slice. Greedy, so not always the fewest slices.
// Cost: O(nq + intervals), plus sorting the S slices (S log S).
std::vector<AttnSlice> slices_from_rows(const RowIntervals& rows);

}  // namespace cm
