// Pass `normalize`: rewrites every region's query and key set trees into unions of interval
// terms (ir::KeyTerm): the symbolic form of each row's visible key intervals.
//   Pre:  a simplified program (passes/simplify.h); program.normalized is false.
//   Post: Region::queries and Region::keys hold terms whose union, for every binding of q, b,
//         h, the loop slots and the parameters, equals the set tree's value (before clipping);
//         terms built directly from a neighbourhood keep its index in KeyTerm::grid;
//         program.normalized is true. Neighbourhoods become iterator terms (one iterator per
//         grid row offset, two for 3D grids), segment unions one iterator over segment numbers.
//   Fails (returns false, appends a diagnostic) when a difference subtracts a set that is not
//   a union of intervals, segment lists and 2D neighbourhoods, or when a set grows past the
//   term limit.
#pragma once

#include <compilemask/compilemask.h>

#include "ir/ir.h"

#include <vector>

namespace cm::passes {

bool normalize(ir::Program& program, std::vector<Diagnostic>& diagnostics);

}  // namespace cm::passes
