// Pass `classify`: facts about a normalized program that specialize relies on.
//   Pre:  program.normalized.
//   Post: program.uses_batch / uses_head say whether any term or requirement reads b / h
//         (masks that read neither are specialized once and shared by every (b, h)); KeyTerm::grid
//         is kept only where the kernel can evaluate the term as a closed-form formula (the
//         neighbourhood's centre is q itself and the grid does not depend on q); no term of
//         Region::queries depends on q.
//   Fails (returns false, appends a diagnostic) if an expression nests deeper than
//   kMaxExprDepth, which would make evaluation recurse too deeply.
#pragma once

#include <compilemask/compilemask.h>

#include "ir/ir.h"

#include <vector>

namespace cm::passes {

inline constexpr int kMaxExprDepth = 1000;

bool classify(ir::Program& program, std::vector<Diagnostic>& diagnostics);

}  // namespace cm::passes
