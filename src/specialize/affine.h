// Piecewise-affine analysis of row expressions: for one loop binding and one range of query
// rows, rewrites the expressions that read q into functions `slope*q + offset` on a few
// ranges of q. Key terms whose bounds become piecewise affine are then emitted row by row in
// native code, with no interpretation per row. Expressions outside the affine fragment
// (q-dependent division, modulo, isqrt, array lookups, products of two q-dependent values)
// are not rewritten; their terms fall back to the interpreter.
#pragma once

#include "specialize/evaluator.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace cm {

// value(q) = slope*q + offset for q in [begin, next piece's begin).
struct AffinePiece {
  int64_t begin;
  int64_t slope;
  int64_t offset;
};

// Pieces sorted by begin; the first begins at the range start, the last ends at the range
// end.
using Affine = std::vector<AffinePiece>;

// Calls f(begin, end, pieces) over the common refinement of forms that start together, up to
// `end`; pieces[i] is the piece of in[i] covering [begin, end).
template <size_t N, class F>
void refine(const std::array<const Affine*, N>& in, int64_t end, F&& f) {
  std::array<size_t, N> at{};
  int64_t cur = in[0]->front().begin;
  while (cur < end) {
    int64_t next = end;
    for (size_t i = 0; i < N; ++i) {
      if (at[i] + 1 < in[i]->size()) next = std::min(next, (*in[i])[at[i] + 1].begin);
    }
    std::array<AffinePiece, N> pieces;
    for (size_t i = 0; i < N; ++i) pieces[i] = (*in[i])[at[i]];
    f(cur, next, pieces);
    cur = next;
    for (size_t i = 0; i < N; ++i) {
      if (at[i] + 1 < in[i]->size() && (*in[i])[at[i] + 1].begin == cur) ++at[i];
    }
  }
}

class AffineRows {
 public:
  // Preconditions: `machine` has run the region's outer block, so operands that do not read q
  // hold their values. Analyses every instruction of `row_block` over q in [q_begin, q_end).
  AffineRows(const Block& row_block, const Machine& machine, size_t registers, int64_t q_begin,
             int64_t q_end);

  // The affine form of a register, or nullptr if it is outside the affine fragment. Registers
  // that do not read q are constants.
  const Affine* form(int32_t reg);

 private:
  std::optional<Affine> analyse(const Instr& in);
  Affine constant(int64_t v) const { return {{q_begin_, 0, v}}; }

  const Machine& machine_;
  int64_t q_begin_, q_end_;
  std::vector<int8_t> state_;  // per register: 0 not a row register, 1 affine, 2 not affine
  std::vector<Affine> forms_;
  Affine scratch_constant_;
};

}  // namespace cm
