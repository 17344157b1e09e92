// Pass `simplify` (see simplify.h).
#include "passes/simplify.h"

#include "passes/fold.h"

#include <unordered_map>

namespace cm::passes {

using ir::ExprId;
using ir::kNone;
using ir::SetId;
using ir::SetNode;
using ir::SetOp;

namespace {

class Simplifier {
 public:
  explicit Simplifier(ir::Program& p) : p_(p) {}

  void run() {
    for (ir::GridNeighbourhood& g : p_.grids) {
      for (ExprId* e : {&g.start, &g.center_start, &g.frames, &g.rows, &g.cols, &g.strip, &g.center,
                        &g.rt, &g.ry, &g.rx}) {
        *e = expr(*e);
      }
    }
    for (ir::Region& r : p_.regions) {
      r.query_set = set(r.query_set);
      r.key_set = set(r.key_set);
    }
    for (ir::Requirement& r : p_.requirements) r.cond = expr(r.cond);
  }

 private:
  // Rebuilding with an impossible slot substitutes nothing and folds everything.
  ExprId expr(ExprId id) { return substitute(p_.exprs, id, kNone, kNone); }

  bool is_empty(SetId id) const { return p_.sets[static_cast<size_t>(id)].op == SetOp::kEmpty; }

  SetId empty(ir::SourceLoc loc) {
    return p_.add_set({SetOp::kEmpty, kNone, kNone, kNone, kNone, kNone, kNone, kNone, loc});
  }

  SetId set(SetId id) {
    if (auto it = memo_.find(id); it != memo_.end()) return it->second;
    SetNode s = p_.sets[static_cast<size_t>(id)];
    SetId out = id;
    switch (s.op) {
      case SetOp::kEmpty:
      case SetOp::kSegmentUnion:
      case SetOp::kGrid:
        break;
      case SetOp::kInterval: {
        s.lo = expr(s.lo);
        s.hi = expr(s.hi);
        const ir::Expr& lo = p_.exprs[s.lo];
        const ir::Expr& hi = p_.exprs[s.hi];
        const bool constant_empty =
            lo.op == ir::Op::kConst && hi.op == ir::Op::kConst && hi.value <= lo.value;
        out = constant_empty ? empty(s.loc) : p_.add_set(s);
        break;
      }
      case SetOp::kUnion:
      case SetOp::kIntersect:
      case SetOp::kDiff: {
        s.a = set(s.a);
        s.b = set(s.b);
        if (s.op == SetOp::kUnion && is_empty(s.a)) {
          out = s.b;
        } else if ((s.op == SetOp::kUnion || s.op == SetOp::kDiff) && is_empty(s.b)) {
          out = s.a;
        } else if (is_empty(s.a) || (s.op == SetOp::kIntersect && is_empty(s.b))) {
          out = empty(s.loc);
        } else {
          out = p_.add_set(s);
        }
        break;
      }
      case SetOp::kSelect: {
        s.cond = expr(s.cond);
        s.a = set(s.a);
        s.b = set(s.b);
        const ir::Expr& c = p_.exprs[s.cond];
        if (c.op == ir::Op::kConst) {
          out = c.value != 0 ? s.a : s.b;
        } else if (is_empty(s.a) && is_empty(s.b)) {
          out = s.a;
        } else {
          out = p_.add_set(s);
        }
        break;
      }
    }
    memo_.emplace(id, out);
    return out;
  }

  ir::Program& p_;
  std::unordered_map<SetId, SetId> memo_;
};

}  // namespace

void simplify(ir::Program& program) {
  Simplifier(program).run();
}

}  // namespace cm::passes
