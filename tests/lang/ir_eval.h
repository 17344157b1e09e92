// A deliberately naive evaluator of lowered IR programs, for the front end's tests only: it
// answers "is key k visible to row q?" straight from the IR's stated semantics (src/ir/ir.h),
// with no normalization, so lowering can be checked against independent definitions.
#pragma once

#include <compilemask/compilemask.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "ir/ir.h"

namespace cm::lang::testing {

class IrEval {
 public:
  // `values` holds one value per program parameter, in declaration order.
  IrEval(const ir::Program& p, std::vector<ParamValue> values, int64_t nq, int64_t nk,
         int64_t b = 0, int64_t h = 0)
      : p_(p), values_(std::move(values)), slots_(p.slot_names.size(), 0) {
    slots_.at(ir::kSlotB) = b;
    slots_.at(ir::kSlotH) = h;
    slots_.at(ir::kSlotNq) = nq;
    slots_.at(ir::kSlotNk) = nk;
  }

  bool visible(int64_t q, int64_t k) {
    slots_.at(ir::kSlotQ) = q;
    for (const ir::Region& r : p_.regions) {
      if (region_visible(r, 0, q, k)) return true;
    }
    return false;
  }

  int64_t expr(ir::ExprId id) {
    const ir::Expr& e = p_.exprs[id];
    switch (e.op) {
      case ir::Op::kConst:
        return e.value;
      case ir::Op::kVar:
        return slots_.at(static_cast<size_t>(e.index));
      case ir::Op::kParam:
        return std::get<int64_t>(value(e.index));
      case ir::Op::kArrayAt:
        return array(e.index).at(static_cast<size_t>(expr(e.a)));
      case ir::Op::kArrayLen:
        return static_cast<int64_t>(array(e.index).size());
      case ir::Op::kSegStart:
        return segments(e.index).starts.at(static_cast<size_t>(expr(e.a)));
      case ir::Op::kSegEnd:
        return segments(e.index).ends.at(static_cast<size_t>(expr(e.a)));
      case ir::Op::kSegCount:
        return static_cast<int64_t>(segments(e.index).size());
      case ir::Op::kAdd:
        return expr(e.a) + expr(e.b);
      case ir::Op::kSub:
        return expr(e.a) - expr(e.b);
      case ir::Op::kMul:
        return expr(e.a) * expr(e.b);
      case ir::Op::kDiv:
        return floor_div(expr(e.a), expr(e.b));
      case ir::Op::kMod: {
        const int64_t a = expr(e.a), b = expr(e.b);
        return a - floor_div(a, b) * b;
      }
      case ir::Op::kMin:
        return std::min(expr(e.a), expr(e.b));
      case ir::Op::kMax:
        return std::max(expr(e.a), expr(e.b));
      case ir::Op::kNeg:
        return -expr(e.a);
      case ir::Op::kIsqrt: {
        const int64_t a = expr(e.a);
        int64_t r = 0;
        while ((r + 1) * (r + 1) <= a) ++r;
        return r;
      }
      case ir::Op::kLt:
        return expr(e.a) < expr(e.b);
      case ir::Op::kLe:
        return expr(e.a) <= expr(e.b);
      case ir::Op::kEq:
        return expr(e.a) == expr(e.b);
      case ir::Op::kNe:
        return expr(e.a) != expr(e.b);
      case ir::Op::kAnd:
        return expr(e.a) != 0 && expr(e.b) != 0;
      case ir::Op::kOr:
        return expr(e.a) != 0 || expr(e.b) != 0;
      case ir::Op::kNot:
        return expr(e.a) == 0;
      case ir::Op::kSelect:
        return expr(e.a) != 0 ? expr(e.b) : expr(e.c);
    }
    throw std::logic_error("unknown op");
  }

  bool contains(ir::SetId id, int64_t x) {
    const ir::SetNode& s = p_.sets[static_cast<size_t>(id)];
    switch (s.op) {
      case ir::SetOp::kEmpty:
        return false;
      case ir::SetOp::kInterval:
        return expr(s.lo) <= x && x < expr(s.hi);
      case ir::SetOp::kUnion:
        return contains(s.a, x) || contains(s.b, x);
      case ir::SetOp::kIntersect:
        return contains(s.a, x) && contains(s.b, x);
      case ir::SetOp::kDiff:
        return contains(s.a, x) && !contains(s.b, x);
      case ir::SetOp::kSelect:
        return expr(s.cond) != 0 ? contains(s.a, x) : contains(s.b, x);
      case ir::SetOp::kGrid:
        return in_grid(p_.grids[static_cast<size_t>(s.grid)], x);
      case ir::SetOp::kSegmentUnion: {
        const Segments& segs = segments(s.param);
        for (size_t i = 0; i < segs.size(); ++i) {
          if (segs.starts[i] <= x && x < segs.ends[i]) return true;
        }
        return false;
      }
    }
    throw std::logic_error("unknown set op");
  }

 private:
  static int64_t floor_div(int64_t a, int64_t b) {
    if (b == 0) throw std::domain_error("division by zero");
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }

  bool region_visible(const ir::Region& r, size_t loop, int64_t q, int64_t k) {
    if (loop < r.loops.size()) {
      const ir::Loop& l = r.loops[loop];
      const auto count = static_cast<int64_t>(segments(l.segments_param).size());
      for (int64_t i = 0; i < count; ++i) {
        slots_[static_cast<size_t>(l.slot)] = i;
        if (region_visible(r, loop + 1, q, k)) return true;
      }
      return false;
    }
    return q >= 0 && q < slots_[ir::kSlotNq] && k >= 0 && k < slots_[ir::kSlotNk] &&
           contains(r.query_set, q) && contains(r.key_set, k);
  }

  bool in_grid(const ir::GridNeighbourhood& g, int64_t k) {
    const int64_t frames = expr(g.frames), rows = expr(g.rows), cols = expr(g.cols);
    const int64_t size = frames * rows * cols;
    const int64_t p = expr(g.center) - expr(g.center_start), x = k - expr(g.start);
    if (p < 0 || p >= size || x < 0 || x >= size) return false;
    const int64_t dt = p / (rows * cols) - x / (rows * cols);
    const int64_t dy = p / cols % rows - x / cols % rows;
    const int64_t dx = p % cols - x % cols;
    const int64_t rt = expr(g.rt), ry = expr(g.ry), rx = expr(g.rx);
    if (g.shape == ir::GridShape::kBox) {
      return std::abs(dt) <= rt && std::abs(dy) <= ry && std::abs(dx) <= rx;
    }
    return dt * dt * ry * ry * rx * rx + dy * dy * rt * rt * rx * rx + dx * dx * rt * rt * ry * ry <
           rt * rt * ry * ry * rx * rx;
  }

  const ParamValue& value(int32_t param) const { return values_.at(static_cast<size_t>(param)); }
  const std::vector<int64_t>& array(int32_t param) const {
    return std::get<std::vector<int64_t>>(value(param));
  }
  const Segments& segments(int32_t param) const { return std::get<Segments>(value(param)); }

  const ir::Program& p_;
  std::vector<ParamValue> values_;
  std::vector<int64_t> slots_;
};

}  // namespace cm::lang::testing
