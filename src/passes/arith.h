// The integer semantics of the IR's operations, shared by constant folding (fold.cpp), the
// specialize evaluator and the affine analysis. Inline: the evaluator applies them once per
// instruction per query row, so a call across libraries per operation would cost as much as
// the operation.
#pragma once

#include "ir/ir.h"

#include <compilemask/descriptor.h>

#include <cstdint>

namespace cm::passes {

// Division rounding toward negative infinity; b != 0 and not (a, b) = (INT64_MIN, -1).
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// The remainder of floor_div, with the sign of b; b != 0.
inline int64_t floor_mod(int64_t a, int64_t b) {
  return a - floor_div(a, b) * b;
}

// Evaluates op on constants. Returns false when the operation has no defined result (division
// or modulo by zero, isqrt of a negative number, int64 overflow): such operations are left
// unfolded and reported at specialize time, with their source position, only if evaluated.
inline bool fold_constant(ir::Op op, int64_t a, int64_t b, int64_t c, int64_t& r) {
  using ir::Op;
  switch (op) {
    case Op::kAdd:
      return !__builtin_add_overflow(a, b, &r);
    case Op::kSub:
      return !__builtin_sub_overflow(a, b, &r);
    case Op::kMul:
      return !__builtin_mul_overflow(a, b, &r);
    case Op::kDiv:
      if (b == 0 || (b == -1 && a == INT64_MIN)) return false;
      r = floor_div(a, b);
      return true;
    case Op::kMod:
      if (b == 0) return false;
      r = b == -1 ? 0 : floor_mod(a, b);
      return true;
    case Op::kMin:
      r = a < b ? a : b;
      return true;
    case Op::kMax:
      r = a > b ? a : b;
      return true;
    case Op::kNeg:
      return !__builtin_sub_overflow(int64_t{0}, a, &r);
    case Op::kIsqrt:
      if (a < 0) return false;
      r = desc::isqrt_floor(a);
      return true;
    case Op::kLt:
      r = a < b;
      return true;
    case Op::kLe:
      r = a <= b;
      return true;
    case Op::kEq:
      r = a == b;
      return true;
    case Op::kNe:
      r = a != b;
      return true;
    case Op::kAnd:
      r = (a != 0) && (b != 0);
      return true;
    case Op::kOr:
      r = (a != 0) || (b != 0);
      return true;
    case Op::kNot:
      r = a == 0;
      return true;
    case Op::kSelect:
      r = a != 0 ? b : c;
      return true;
    default:
      return false;
  }
}

}  // namespace cm::passes
