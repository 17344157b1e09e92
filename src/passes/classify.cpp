// Pass `classify` (see classify.h).
#include "passes/classify.h"

#include "passes/diagnostic.h"
#include "passes/fold.h"

namespace cm::passes {

using ir::ExprId;
using ir::KeyTerm;
using ir::kNone;

namespace {

template <class F>
void for_each_expr(const KeyTerm& t, F&& f) {
  for (const ir::Iterator& it : t.iterators) {
    f(it.lo);
    f(it.hi);
  }
  f(t.lo);
  f(t.hi);
}

bool formula_capable(const ir::Program& p, const ir::GridNeighbourhood& g) {
  const ir::Expr& center = p.exprs[g.center];
  if (center.op != ir::Op::kVar || center.index != ir::kSlotQ) return false;
  for (ExprId e : {g.start, g.center_start, g.frames, g.rows, g.cols, g.strip, g.rt, g.ry, g.rx}) {
    if (depends_on(p.exprs, e, ir::kSlotQ)) return false;
  }
  return true;
}

}  // namespace

bool classify(ir::Program& program, std::vector<Diagnostic>& diagnostics) {
  // Depth of every node in one forward sweep: children have smaller ids than parents.
  std::vector<int> depth(program.exprs.nodes.size(), 1);
  for (size_t i = 0; i < program.exprs.nodes.size(); ++i) {
    const ir::Expr& e = program.exprs.nodes[i];
    for (ExprId child : {e.a, e.b, e.c}) {
      if (child != kNone) depth[i] = std::max(depth[i], depth[static_cast<size_t>(child)] + 1);
    }
    if (depth[i] > kMaxExprDepth) {
      diagnostics.push_back(make_diagnostic(
          program, e.loc,
          "expression nests too deeply (more than " + std::to_string(kMaxExprDepth) + " levels)"));
      return false;
    }
  }
  bool uses_b = false, uses_h = false;
  auto note = [&](ExprId e) {
    uses_b = uses_b || depends_on(program.exprs, e, ir::kSlotB);
    uses_h = uses_h || depends_on(program.exprs, e, ir::kSlotH);
  };
  for (ir::Region& r : program.regions) {
    for (const KeyTerm& t : r.queries) {
      for_each_expr(t, [&](ExprId e) {
        note(e);
        if (depends_on(program.exprs, e, ir::kSlotQ)) {
          throw std::logic_error("front end let a query set depend on q");
        }
      });
    }
    for (KeyTerm& t : r.keys) {
      for_each_expr(t, note);
      if (t.grid != kNone &&
          !formula_capable(program, program.grids[static_cast<size_t>(t.grid)])) {
        t.grid = kNone;
      }
    }
  }
  // A requirement that reads b or h is checked for every (b, h), so those get instances too.
  for (const ir::Requirement& r : program.requirements) note(r.cond);
  program.uses_batch = uses_b;
  program.uses_head = uses_h;
  return true;
}

}  // namespace cm::passes
