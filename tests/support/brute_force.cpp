// Test-only brute-force mask evaluation (see brute_force.h).
#include "brute_force.h"

#include "grid_layout.h"

#include "ir/ir.h"
#include "specialize/bind.h"

#include <cmath>

namespace cm::testing {

namespace {

using ir::ExprId;
using ir::Op;
using ir::SetId;
using ir::SetOp;

class Oracle {
 public:
  Oracle(const ir::Program& p, const Bindings& bindings, const Dims& dims)
      : p_(p), bind_(bindings), slots_(p.slot_names.size(), 0) {
    slots_[ir::kSlotNq] = dims.nq;
    slots_[ir::kSlotNk] = dims.nk;
  }

  std::vector<int64_t>& slots() { return slots_; }

  int64_t eval(ExprId id) const {
    const ir::Expr& e = p_.exprs[id];
    auto fail = [&](const char* what) -> int64_t { throw Error(std::string("oracle: ") + what); };
    switch (e.op) {
      case Op::kConst:
        return e.value;
      case Op::kVar:
        return slots_[static_cast<size_t>(e.index)];
      case Op::kParam:
        return bind_.ints[static_cast<size_t>(e.index)];
      case Op::kArrayLen:
        return static_cast<int64_t>(bind_.arrays[static_cast<size_t>(e.index)].size());
      case Op::kSegCount:
        return static_cast<int64_t>(bind_.segments[static_cast<size_t>(e.index)].size());
      case Op::kArrayAt: {
        const auto& a = bind_.arrays[static_cast<size_t>(e.index)];
        const int64_t i = eval(e.a);
        return i >= 0 && i < static_cast<int64_t>(a.size()) ? a[static_cast<size_t>(i)]
                                                            : fail("index");
      }
      case Op::kSegStart:
      case Op::kSegEnd: {
        const Segments& s = bind_.segments[static_cast<size_t>(e.index)];
        const int64_t i = eval(e.a);
        if (i < 0 || i >= static_cast<int64_t>(s.size())) return fail("segment");
        return (e.op == Op::kSegStart ? s.starts : s.ends)[static_cast<size_t>(i)];
      }
      case Op::kSelect:
        return eval(e.a) != 0 ? eval(e.b) : eval(e.c);
      case Op::kNeg:
        return -eval(e.a);
      case Op::kNot:
        return eval(e.a) == 0;
      case Op::kIsqrt: {
        const int64_t a = eval(e.a);
        if (a < 0) return fail("isqrt");
        int64_t r = static_cast<int64_t>(std::sqrt(static_cast<long double>(a)));
        while (r * r > a) --r;
        while ((r + 1) * (r + 1) <= a) ++r;
        return r;
      }
      default:
        break;
    }
    const int64_t a = eval(e.a), b = eval(e.b);
    switch (e.op) {
      case Op::kAdd:
        return a + b;
      case Op::kSub:
        return a - b;
      case Op::kMul:
        return a * b;
      case Op::kDiv:
      case Op::kMod: {
        if (b == 0) return fail("division by zero");
        const long double q = std::floor(static_cast<long double>(a) / static_cast<long double>(b));
        const int64_t fq = static_cast<int64_t>(q);
        return e.op == Op::kDiv ? fq : a - fq * b;
      }
      case Op::kMin:
        return a < b ? a : b;
      case Op::kMax:
        return a > b ? a : b;
      case Op::kLt:
        return a < b;
      case Op::kLe:
        return a <= b;
      case Op::kEq:
        return a == b;
      case Op::kNe:
        return a != b;
      case Op::kAnd:
        return (a != 0) && (b != 0);
      case Op::kOr:
        return (a != 0) || (b != 0);
      default:
        return fail("unknown op");
    }
  }

  bool contains(SetId id, int64_t x) const {
    const ir::SetNode& s = p_.sets[static_cast<size_t>(id)];
    switch (s.op) {
      case SetOp::kEmpty:
        return false;
      case SetOp::kInterval:
        return eval(s.lo) <= x && x < eval(s.hi);
      case SetOp::kUnion:
        return contains(s.a, x) || contains(s.b, x);
      case SetOp::kIntersect:
        return contains(s.a, x) && contains(s.b, x);
      case SetOp::kDiff:
        return contains(s.a, x) && !contains(s.b, x);
      case SetOp::kSelect:
        return eval(s.cond) != 0 ? contains(s.a, x) : contains(s.b, x);
      case SetOp::kSegmentUnion: {
        const Segments& seg = bind_.segments[static_cast<size_t>(s.param)];
        for (size_t i = 0; i < seg.size(); ++i) {
          if (seg.starts[i] <= x && x < seg.ends[i]) return true;
        }
        return false;
      }
      case SetOp::kGrid:
        return in_neighbourhood(p_.grids[static_cast<size_t>(s.grid)], x);
    }
    return false;
  }

 private:
  // Direct definition: both tokens on the grid, and the offset inside the shape.
  // A radius below the shape's least (0 for a box, 1 for an ellipse) makes the neighbourhood
  // empty without placing a cell on the grid, so its grid's extents and strip go unchecked,
  // as in the compiler.
  bool in_neighbourhood(const ir::GridNeighbourhood& g, int64_t k) const {
    const int64_t rt = eval(g.rt), ry = eval(g.ry), rx = eval(g.rx);
    const int64_t least_radius = g.shape == ir::GridShape::kBox ? 0 : 1;
    if (rt < least_radius || ry < least_radius || rx < least_radius) return false;
    const int64_t frames = eval(g.frames), rows = eval(g.rows), cols = eval(g.cols);
    const int64_t size = rows * cols * frames;
    const int64_t strip = g.strip == ir::kNone ? cols : eval(g.strip);
    if (frames < 1 || rows < 1 || cols < 1) throw Error("oracle: grid extent below 1");
    if (strip < 1) throw Error("oracle: strip below 1");
    const int64_t c = eval(g.center) - eval(g.center_start), kk = k - eval(g.start);
    if (c < 0 || c >= size || kk < 0 || kk >= size) return false;
    const GridPosition centre = walk_grid_cell(rows, cols, strip, c);
    const GridPosition key = walk_grid_cell(rows, cols, strip, kk);
    const int64_t dt = key.t - centre.t, dy = key.y - centre.y, dx = key.x - centre.x;
    if (g.shape == ir::GridShape::kBox) {
      return std::abs(dt) <= rt && std::abs(dy) <= ry && std::abs(dx) <= rx;
    }
    // dt²/rt² + dy²/ry² + dx²/rx² < 1, in exact rational arithmetic.
    const long double lhs = static_cast<long double>(dt * dt) * ry * ry * rx * rx +
                            static_cast<long double>(dy * dy) * rt * rt * rx * rx +
                            static_cast<long double>(dx * dx) * rt * rt * ry * ry;
    return lhs < static_cast<long double>(rt * ry * rx) * static_cast<long double>(rt * ry * rx);
  }

  const ir::Program& p_;
  const Bindings& bind_;
  std::vector<int64_t> slots_;
};

void for_each_binding(const ir::Program& p, const Bindings& bind, const ir::Region& r,
                      std::vector<int64_t>& slots, size_t depth, const auto& f) {
  if (depth == r.loops.size()) {
    f();
    return;
  }
  const ir::Loop& loop = r.loops[depth];
  const size_t count = bind.segments[static_cast<size_t>(loop.segments_param)].size();
  for (size_t i = 0; i < count; ++i) {
    slots[static_cast<size_t>(loop.slot)] = static_cast<int64_t>(i);
    for_each_binding(p, bind, r, slots, depth + 1, f);
  }
}

}  // namespace

std::vector<uint8_t> brute_force_dense(const ir::Program& p, const Params& params, const Dims& dims,
                                       int32_t b, int32_t h) {
  const Bindings bindings = bind(p, params, dims);
  Oracle oracle(p, bindings, dims);
  oracle.slots()[ir::kSlotB] = b;
  oracle.slots()[ir::kSlotH] = h;
  std::vector<uint8_t> dense(static_cast<size_t>(dims.nq * dims.nk), 0);
  for (const ir::Region& r : p.regions) {
    for_each_binding(p, bindings, r, oracle.slots(), 0, [&] {
      for (int64_t q = 0; q < dims.nq; ++q) {
        if (!oracle.contains(r.query_set, q)) continue;
        oracle.slots()[ir::kSlotQ] = q;
        for (int64_t k = 0; k < dims.nk; ++k) {
          if (oracle.contains(r.key_set, k)) dense[static_cast<size_t>(q * dims.nk + k)] = 1;
        }
      }
    });
  }
  return dense;
}

}  // namespace cm::testing
