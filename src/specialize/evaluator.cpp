// Flattening and evaluation of term expressions (see evaluator.h).
#include "specialize/evaluator.h"

#include "passes/arith.h"
#include "passes/diagnostic.h"

#include <compilemask/compilemask.h>

#include <algorithm>

namespace cm {

using ir::ExprId;
using ir::kNone;
using ir::Op;

namespace {

// Assigns every node reachable from the roots to the innermost phase it needs and appends it,
// after its operands, to that phase's block. Phase 0 is outer, 1 is row, 2 + i is the term's
// iterator i.
class Flattener {
 public:
  Flattener(const ir::Program& p, RegionCode& region)
      : p_(p), region_(region), phase_(p.exprs.nodes.size(), -1) {}

  // Emits the code for `root` and returns its register.
  int32_t emit(ExprId root, TermCode* term) {
    term_ = term;
    visit(root);
    return root;
  }

  // Forgets the phases of iterator-level nodes, whose code lives in one term's blocks.
  void end_term() {
    for (ExprId id : term_nodes_) phase_[static_cast<size_t>(id)] = -1;
    term_nodes_.clear();
  }

 private:
  int variable_phase(int32_t slot) const {
    if (slot == ir::kSlotQ) return 1;
    if (term_ != nullptr) {
      const auto& slots = term_->iterator_slots;
      const auto it = std::find(slots.begin(), slots.end(), slot);
      if (it != slots.end()) return 2 + static_cast<int>(it - slots.begin());
    }
    return 0;
  }

  int visit(ExprId id) {
    int& phase = phase_[static_cast<size_t>(id)];
    if (phase >= 0) return phase;
    const ir::Expr& e = p_.exprs[id];
    int needed = e.op == Op::kVar ? variable_phase(e.index) : 0;
    for (ExprId child : {e.a, e.b, e.c}) {
      if (child != kNone) needed = std::max(needed, visit(child));
    }
    phase = needed;
    const Instr instr{e.op, id, e.a, e.b, e.c, e.index, e.value};
    if (needed == 0) {
      region_.outer.push_back(instr);
    } else if (needed == 1) {
      region_.row.push_back(instr);
    } else {
      term_->levels[static_cast<size_t>(needed - 2)].push_back(instr);
      term_nodes_.push_back(id);
    }
    return needed;
  }

  const ir::Program& p_;
  RegionCode& region_;
  std::vector<int> phase_;
  TermCode* term_ = nullptr;
  std::vector<ExprId> term_nodes_;
};

TermCode compile_term(const ir::KeyTerm& t, Flattener& f) {
  TermCode code;
  for (const ir::Iterator& it : t.iterators) code.iterator_slots.push_back(it.slot);
  code.levels.resize(t.iterators.size());
  for (const ir::Iterator& it : t.iterators) {
    code.iterator_lo.push_back(f.emit(it.lo, &code));
    code.iterator_hi.push_back(f.emit(it.hi, &code));
  }
  code.lo = f.emit(t.lo, &code);
  code.hi = f.emit(t.hi, &code);
  code.grid = t.grid;
  f.end_term();
  return code;
}

}  // namespace

ProgramCode compile_program(const ir::Program& program) {
  ProgramCode out;
  for (const ir::Region& r : program.regions) {
    RegionCode code;
    code.loops = r.loops;
    code.grid_params.resize(program.grids.size());
    Flattener f(program, code);
    for (const ir::KeyTerm& t : r.queries) code.queries.push_back(compile_term(t, f));
    for (const ir::KeyTerm& t : r.keys) {
      code.keys.push_back(compile_term(t, f));
      if (t.grid == kNone) continue;
      const ir::GridNeighbourhood& g = program.grids[static_cast<size_t>(t.grid)];
      std::vector<int32_t>& regs = code.grid_params[static_cast<size_t>(t.grid)];
      regs.clear();
      const ExprId strip = g.strip == kNone ? g.cols : g.strip;  // row-major: one strip
      for (ExprId e :
           {g.start, g.center_start, g.frames, g.rows, g.cols, strip, g.rt, g.ry, g.rx}) {
        regs.push_back(f.emit(e, nullptr));
      }
    }
    out.regions.push_back(std::move(code));
  }
  for (const ir::Requirement& r : program.requirements) {
    // A condition reads neither q nor an iterator, so all of its code is the outer block.
    RegionCode scope;
    scope.loops = r.loops;
    const int32_t cond = Flattener(program, scope).emit(r.cond, nullptr);
    out.requirements.push_back({r.loops, std::move(scope.outer), cond, r.loc, r.end});
  }
  return out;
}

Machine::Machine(const ir::Program& program, const Bindings& bindings)
    : program_(program),
      bindings_(bindings),
      slots_(program.slot_names.size(), 0),
      regs_(program.exprs.nodes.size(), 0),
      poison_(program.exprs.nodes.size(), 0) {}

void Machine::run(const Block& block) {
  int64_t* r = regs_.data();
  int32_t* bad = poison_.data();
  for (const Instr& in : block) {
    int32_t err = 0;
    int64_t v = 0;
    const int64_t a = in.a >= 0 ? r[in.a] : 0;
    const int64_t b = in.b >= 0 ? r[in.b] : 0;
    const int32_t ea = in.a >= 0 ? bad[in.a] : 0;
    const int32_t eb = in.b >= 0 ? bad[in.b] : 0;
    switch (in.op) {
      case Op::kConst:
        v = in.value;
        break;
      case Op::kVar:
        v = slots_[static_cast<size_t>(in.index)];
        break;
      case Op::kParam:
        v = bindings_.ints[static_cast<size_t>(in.index)];
        break;
      case Op::kArrayLen:
        v = static_cast<int64_t>(bindings_.arrays[static_cast<size_t>(in.index)].size());
        break;
      case Op::kSegCount:
        v = static_cast<int64_t>(bindings_.segments[static_cast<size_t>(in.index)].size());
        break;
      case Op::kArrayAt: {
        const auto& arr = bindings_.arrays[static_cast<size_t>(in.index)];
        err = ea;
        if (a >= 0 && a < static_cast<int64_t>(arr.size())) {
          v = arr[static_cast<size_t>(a)];
        } else if (!err) {
          err = in.dst + 1;
        }
        break;
      }
      case Op::kSegStart:
      case Op::kSegEnd: {
        const Segments& s = bindings_.segments[static_cast<size_t>(in.index)];
        err = ea;
        if (a >= 0 && a < static_cast<int64_t>(s.size())) {
          v = (in.op == Op::kSegStart ? s.starts : s.ends)[static_cast<size_t>(a)];
        } else if (!err) {
          err = in.dst + 1;
        }
        break;
      }
      case Op::kSelect: {
        v = a != 0 ? b : r[in.c];
        err = ea ? ea : (a != 0 ? eb : bad[in.c]);
        break;
      }
      default:
        err = ea ? ea : eb;
        if (!passes::fold_constant(in.op, a, b, 0, v) && !err) err = in.dst + 1;
        break;
    }
    r[in.dst] = v;
    bad[in.dst] = err;
  }
}

void Machine::raise(int32_t reg) const {
  const int32_t origin = poison_[static_cast<size_t>(reg)] - 1;
  const ir::Expr& e = program_.exprs[origin];
  std::string what;
  switch (e.op) {
    case Op::kDiv:
    case Op::kMod:
      what = regs_[static_cast<size_t>(e.b)] == 0 ? "division by zero" : "integer overflow";
      break;
    case Op::kIsqrt:
      what = "isqrt of a negative number";
      break;
    case Op::kArrayAt:
      what = "index out of range for parameter '" +
             program_.params[static_cast<size_t>(e.index)].name + "' (" +
             std::to_string(bindings_.arrays[static_cast<size_t>(e.index)].size()) + " elements)";
      break;
    case Op::kSegStart:
    case Op::kSegEnd:
      what = "segment number out of range for parameter '" +
             program_.params[static_cast<size_t>(e.index)].name + "' (" +
             std::to_string(bindings_.segments[static_cast<size_t>(e.index)].size()) + " segments)";
      break;
    default:
      what = "integer overflow";
      break;
  }
  std::string at = " (at";
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (s != ir::kSlotNq && s != ir::kSlotNk) at += slot_text(static_cast<int32_t>(s));
  }
  throw Error(passes::located(program_, e.loc, what + at + ")"));
}

std::string Machine::slot_text(int32_t slot) const {
  const auto s = static_cast<size_t>(slot);
  return " " + program_.slot_names[s] + "=" + std::to_string(slots_[s]);
}

}  // namespace cm
