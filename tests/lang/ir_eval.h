// Visibility of a lowered program, for the front end's tests: a thin view over the shared
// brute-force oracle (tests/support/brute_force.h), which evaluates the IR's set trees straight
// from their stated semantics, with no normalization.
#pragma once

#include <compilemask/compilemask.h>

#include <cstdint>
#include <vector>

#include "brute_force.h"
#include "ir/ir.h"

namespace cm::lang::testing {

class IrEval {
 public:
  // `values` holds one value per program parameter, in declaration order.
  IrEval(const ir::Program& p, const std::vector<ParamValue>& values, int64_t nq, int64_t nk,
         int32_t b = 0, int32_t h = 0)
      : nk_(nk) {
    Params params;
    for (size_t i = 0; i < values.size(); ++i) params[p.params[i].name] = values[i];
    dense_ = cm::testing::brute_force_dense(p, params, Dims{nq, nk, b + 1, h + 1}, b, h);
  }

  bool visible(int64_t q, int64_t k) const { return dense_[static_cast<size_t>(q * nk_ + k)] != 0; }

 private:
  int64_t nk_;
  std::vector<uint8_t> dense_;
};

}  // namespace cm::lang::testing
