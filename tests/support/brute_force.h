// Test-only oracle: evaluates a compiled program's original set trees (before normalization)
// for every (q, k) pair, straight from the IR semantics in src/ir/ir.h. It shares no code with
// the normalize pass, the row evaluator or the descriptor, so it can catch their mistakes.
#pragma once

#include <compilemask/compilemask.h>

#include "ir/ir.h"

#include <cstdint>
#include <vector>

namespace cm::testing {

// Row-major nq x nk visibility of mask (b, h). Throws cm::Error on evaluation errors. Needs
// only the lowered program (the set trees), so it also serves the front end's tests.
std::vector<uint8_t> brute_force_dense(const ir::Program& program, const Params& params,
                                       const Dims& dims, int32_t b, int32_t h);

inline std::vector<uint8_t> brute_force_dense(const Mask& mask, const Params& params,
                                              const Dims& dims, int32_t b, int32_t h) {
  return brute_force_dense(mask.program(), params, dims, b, h);
}

}  // namespace cm::testing
