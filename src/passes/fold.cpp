// Constant folding for the IR's integer expressions.
#include "passes/fold.h"

#include "passes/arith.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace cm::passes {

using ir::ExprId;
using ir::kNone;
using ir::Op;

namespace {

bool is_const(const ir::ExprPool& pool, ExprId id, int64_t& v) {
  if (id == kNone || pool[id].op != Op::kConst) return false;
  v = pool[id].value;
  return true;
}

bool is_const_value(const ir::ExprPool& pool, ExprId id, int64_t v) {
  int64_t x = 0;
  return is_const(pool, id, x) && x == v;
}

}  // namespace

ExprId make_unary(ir::ExprPool& pool, Op op, ExprId a, ir::SourceLoc loc) {
  int64_t va = 0, r = 0;
  if (is_const(pool, a, va) && fold_constant(op, va, 0, 0, r)) return pool.constant(r, loc);
  return pool.unary(op, a, loc);
}

ExprId make_binary(ir::ExprPool& pool, Op op, ExprId a, ExprId b, ir::SourceLoc loc) {
  int64_t va = 0, vb = 0, r = 0;
  const bool ca = is_const(pool, a, va), cb = is_const(pool, b, vb);
  if (ca && cb && fold_constant(op, va, vb, 0, r)) return pool.constant(r, loc);
  switch (op) {
    case Op::kAdd:
      if (ca && va == 0) return b;
      if (cb && vb == 0) return a;
      break;
    case Op::kSub:
      if (cb && vb == 0) return a;
      if (a == b) return pool.constant(0, loc);
      break;
    case Op::kMul:
      if (ca && va == 1) return b;
      if (cb && vb == 1) return a;
      break;
    case Op::kDiv:
      if (cb && vb == 1) return a;
      break;
    case Op::kMin:
    case Op::kMax:
      if (a == b) return a;
      break;
    default:
      break;
  }
  return pool.binary(op, a, b, loc);
}

ExprId make_select(ir::ExprPool& pool, ExprId cond, ExprId a, ExprId b, ir::SourceLoc loc) {
  int64_t vc = 0;
  if (is_const(pool, cond, vc)) return vc != 0 ? a : b;
  if (a == b) return a;
  if (is_const_value(pool, a, 1) && is_const_value(pool, b, 0)) {
    const Op op = pool[cond].op;
    const bool boolean = op == Op::kLt || op == Op::kLe || op == Op::kEq || op == Op::kNe ||
                         op == Op::kAnd || op == Op::kOr || op == Op::kNot;
    if (boolean) return cond;
  }
  return pool.select(cond, a, b, loc);
}

namespace {

class Substituter {
 public:
  Substituter(ir::ExprPool& pool, int32_t slot, ExprId value)
      : pool_(pool), slot_(slot), value_(value) {}

  ExprId run(ExprId id) {
    if (id == kNone) return kNone;
    if (auto it = memo_.find(id); it != memo_.end()) return it->second;
    const ir::Expr e = pool_[id];  // copy: the pool may grow below
    ExprId out = id;
    if (e.op == Op::kVar) {
      out = e.index == slot_ ? value_ : id;
    } else if (e.op == Op::kSelect) {
      out = make_select(pool_, run(e.a), run(e.b), run(e.c), e.loc);
    } else if (e.op == Op::kArrayAt || e.op == Op::kSegStart || e.op == Op::kSegEnd) {
      const ExprId a = run(e.a);
      out = a == e.a ? id : pool_.add({e.op, e.index, a, kNone, kNone, 0, e.loc});
    } else if (e.a != kNone && e.b != kNone) {
      out = make_binary(pool_, e.op, run(e.a), run(e.b), e.loc);
    } else if (e.a != kNone) {
      out = make_unary(pool_, e.op, run(e.a), e.loc);
    }
    memo_.emplace(id, out);
    return out;
  }

 private:
  ir::ExprPool& pool_;
  int32_t slot_;
  ExprId value_;
  std::unordered_map<ExprId, ExprId> memo_;
};

}  // namespace

ExprId substitute(ir::ExprPool& pool, ExprId id, int32_t slot, ExprId value) {
  return Substituter(pool, slot, value).run(id);
}

bool depends_on(const ir::ExprPool& pool, ExprId id, int32_t slot) {
  // Children always have smaller ids than their parents, so one backward sweep over the ids
  // reachable from `id` visits each shared node once (lets make the IR a DAG).
  if (id == kNone) return false;
  std::vector<bool> reachable(static_cast<size_t>(id) + 1, false);
  reachable[static_cast<size_t>(id)] = true;
  for (ExprId i = id; i >= 0; --i) {
    if (!reachable[static_cast<size_t>(i)]) continue;
    const ir::Expr& e = pool[i];
    if (e.op == Op::kVar && e.index == slot) return true;
    for (ExprId child : {e.a, e.b, e.c}) {
      if (child != kNone) reachable[static_cast<size_t>(child)] = true;
    }
  }
  return false;
}

}  // namespace cm::passes
