// Piecewise-affine analysis of row expressions (see affine.h).
#include "specialize/affine.h"

#include "passes/arith.h"

#include <algorithm>

namespace cm {

using ir::Op;

namespace {

constexpr size_t kMaxPieces = 256;
constexpr int64_t kMaxSlope = int64_t{1} << 20;

using passes::floor_div;

int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

void push(Affine& out, int64_t begin, int64_t slope, int64_t offset) {
  if (!out.empty() && out.back().slope == slope && out.back().offset == offset) return;
  out.push_back({begin, slope, offset});
}

// The part of [b, e) where slope*q + offset < 0: a prefix or a suffix of it.
std::pair<int64_t, int64_t> negative_part(int64_t slope, int64_t offset, int64_t b, int64_t e) {
  if (slope == 0) return offset < 0 ? std::pair{b, e} : std::pair{b, b};
  if (slope > 0) return {b, std::clamp(ceil_div(-offset, slope), b, e)};
  return {std::clamp(floor_div(offset, -slope) + 1, b, e), e};
}

struct Fail {};

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) throw Fail{};
  return r;
}

int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw Fail{};
  return r;
}

// Where d = a - b < 0 (strict) or < 1 (non-strict) on [b0, e0): writes 1 there, 0 elsewhere.
void compare(Affine& out, const AffinePiece& a, const AffinePiece& b, int64_t b0, int64_t e0,
             int64_t bias, bool negate) {
  const int64_t slope = add(a.slope, -b.slope);
  const int64_t offset = add(add(a.offset, -b.offset), -bias);
  const auto [lo, hi] = negative_part(slope, offset, b0, e0);
  const int64_t inside = negate ? 0 : 1;
  if (b0 < lo) push(out, b0, 0, 1 - inside);
  if (lo < hi) push(out, lo, 0, inside);
  if (hi < e0) push(out, hi, 0, 1 - inside);
}

}  // namespace

AffineRows::AffineRows(const Block& row_block, const Machine& machine, size_t registers,
                       int64_t q_begin, int64_t q_end)
    : machine_(machine), q_begin_(q_begin), q_end_(q_end), state_(registers, 0), forms_(registers) {
  for (const Instr& in : row_block) {
    std::optional<Affine> f;
    try {
      f = analyse(in);
    } catch (const Fail&) {
      f.reset();
    }
    const size_t r = static_cast<size_t>(in.dst);
    if (f && f->size() <= kMaxPieces) {
      forms_[r] = std::move(*f);
      state_[r] = 1;
    } else {
      state_[r] = 2;
    }
  }
}

const Affine* AffineRows::form(int32_t reg) {
  const size_t r = static_cast<size_t>(reg);
  if (state_[r] == 1) return &forms_[r];
  if (state_[r] == 2 || machine_.poisoned(reg)) return nullptr;
  scratch_constant_ = constant(machine_.value(reg));
  return &scratch_constant_;
}

std::optional<Affine> AffineRows::analyse(const Instr& in) {
  if (in.op == Op::kVar) {
    if (in.index != ir::kSlotQ) return std::nullopt;
    return Affine{{q_begin_, 1, 0}};
  }
  // Operand forms, copied: form() may reuse its scratch for constants.
  std::array<Affine, 3> ops;
  size_t count = 0;
  for (int32_t reg : {in.a, in.b, in.c}) {
    if (reg < 0) break;
    const Affine* f = form(reg);
    if (f == nullptr) return std::nullopt;
    ops[count++] = *f;
  }
  Affine out;
  auto each2 = [&](auto&& f) {
    refine<2>({&ops[0], &ops[1]}, q_end_,
              [&](int64_t b, int64_t e, const auto& p) { f(b, e, p[0], p[1]); });
  };
  switch (in.op) {
    case Op::kAdd:
    case Op::kSub: {
      const int64_t sign = in.op == Op::kAdd ? 1 : -1;
      each2([&](int64_t b, int64_t, const AffinePiece& x, const AffinePiece& y) {
        push(out, b, add(x.slope, mul(sign, y.slope)), add(x.offset, mul(sign, y.offset)));
      });
      break;
    }
    case Op::kNeg:
      for (const AffinePiece& p : ops[0]) push(out, p.begin, mul(-1, p.slope), mul(-1, p.offset));
      break;
    case Op::kMul:
      each2([&](int64_t b, int64_t, const AffinePiece& x, const AffinePiece& y) {
        if (x.slope != 0 && y.slope != 0) throw Fail{};
        const AffinePiece& scaled = x.slope != 0 ? x : y;
        const int64_t factor = x.slope != 0 ? y.offset : x.offset;
        push(out, b, mul(scaled.slope, factor), mul(scaled.offset, factor));
      });
      break;
    case Op::kLt:
    case Op::kLe:
      each2([&](int64_t b, int64_t e, const AffinePiece& x, const AffinePiece& y) {
        compare(out, x, y, b, e, in.op == Op::kLe ? 1 : 0, false);
      });
      break;
    case Op::kEq:
    case Op::kNe:
      // a == b  <=>  !(a < b) && !(b < a)
      each2([&](int64_t b, int64_t e, const AffinePiece& x, const AffinePiece& y) {
        Affine below, above;
        compare(below, x, y, b, e, 0, false);
        compare(above, y, x, b, e, 0, false);
        refine<2>({&below, &above}, e, [&](int64_t b2, int64_t, const auto& p) {
          const bool equal = p[0].offset == 0 && p[1].offset == 0;
          push(out, b2, 0, (in.op == Op::kEq) == equal ? 1 : 0);
        });
      });
      break;
    case Op::kMin:
    case Op::kMax:
      each2([&](int64_t b, int64_t e, const AffinePiece& x, const AffinePiece& y) {
        Affine less;
        compare(less, x, y, b, e, 0, false);
        for (size_t i = 0; i < less.size(); ++i) {
          const bool take_x = (less[i].offset == 1) == (in.op == Op::kMin);
          const AffinePiece& p = take_x ? x : y;
          push(out, less[i].begin, p.slope, p.offset);
        }
      });
      break;
    case Op::kSelect:
      refine<3>({&ops[0], &ops[1], &ops[2]}, q_end_, [&](int64_t b, int64_t, const auto& p) {
        if (p[0].slope != 0) throw Fail{};
        const AffinePiece& chosen = p[0].offset != 0 ? p[1] : p[2];
        push(out, b, chosen.slope, chosen.offset);
      });
      break;
    default: {
      // Anything else is affine only where all its operands are constant.
      std::array<const Affine*, 3> ptrs{&ops[0], &ops[count > 1 ? 1 : 0], &ops[count > 2 ? 2 : 0]};
      refine<3>(ptrs, q_end_, [&](int64_t b, int64_t, const auto& p) {
        int64_t v = 0;
        for (const AffinePiece& x : p) {
          if (x.slope != 0) throw Fail{};
        }
        if (in.op == Op::kArrayAt || in.op == Op::kSegStart || in.op == Op::kSegEnd ||
            !passes::fold_constant(in.op, p[0].offset, p[1].offset, p[2].offset, v)) {
          throw Fail{};
        }
        push(out, b, 0, v);
      });
      break;
    }
  }
  for (const AffinePiece& p : out) {
    if (p.slope > kMaxSlope || p.slope < -kMaxSlope) return std::nullopt;
  }
  return out;
}

}  // namespace cm
