// Text form of the IR, for --dump-after and tests.
#include "ir/ir.h"

#include <sstream>

namespace cm::ir {

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::kInt:
      return "int";
    case ParamType::kIntArray:
      return "int[]";
    case ParamType::kSegment:
      return "segment";
    case ParamType::kSegments:
      return "segments";
  }
  return "?";
}

std::string param_text(const ParamDecl& param) {
  std::string text = param.name + ": " + param_type_name(param.type);
  if (param.min) text += " >= " + std::to_string(*param.min);
  return text;
}

std::string param_list(const std::vector<ParamDecl>& params) {
  std::string list;
  for (const ParamDecl& param : params) list += (list.empty() ? "" : ", ") + param_text(param);
  return list;
}

StripPosition strip_position(ExprPool& x, ExprId rows, ExprId cols, ExprId strip, ExprId p,
                             SourceLoc loc) {
  // Earlier strips are all full width, so p's strip starts at column p / (strip * rows) * strip.
  const ExprId x0 = x.binary(
      Op::kMul, x.binary(Op::kDiv, p, x.binary(Op::kMul, strip, rows, loc), loc), strip, loc);
  const ExprId width = x.binary(Op::kMin, strip, x.binary(Op::kSub, cols, x0, loc), loc);
  const ExprId local = x.binary(Op::kSub, p, x.binary(Op::kMul, x0, rows, loc), loc);
  return {x.binary(Op::kDiv, local, width, loc),
          x.binary(Op::kAdd, x0, x.binary(Op::kMod, local, width, loc), loc)};
}

namespace {

const char* binary_symbol(Op op) {
  switch (op) {
    case Op::kAdd:
      return " + ";
    case Op::kSub:
      return " - ";
    case Op::kMul:
      return " * ";
    case Op::kDiv:
      return " / ";
    case Op::kMod:
      return " % ";
    case Op::kLt:
      return " < ";
    case Op::kLe:
      return " <= ";
    case Op::kEq:
      return " == ";
    case Op::kNe:
      return " != ";
    case Op::kAnd:
      return " && ";
    case Op::kOr:
      return " || ";
    default:
      return nullptr;
  }
}

class Printer {
 public:
  explicit Printer(const Program& p) : p_(p) {}

  std::string expr(ExprId id) const {
    if (id == kNone) return "<none>";
    const Expr& e = p_.exprs[id];
    const std::string param = e.index >= 0 && static_cast<size_t>(e.index) < p_.params.size()
                                  ? p_.params[static_cast<size_t>(e.index)].name
                                  : "?";
    switch (e.op) {
      case Op::kConst:
        return std::to_string(e.value);
      case Op::kVar:
        return static_cast<size_t>(e.index) < p_.slot_names.size()
                   ? p_.slot_names[static_cast<size_t>(e.index)]
                   : "$" + std::to_string(e.index);
      case Op::kParam:
        return param;
      case Op::kArrayAt:
        return param + "[" + expr(e.a) + "]";
      case Op::kArrayLen:
        return param + ".len";
      case Op::kSegStart:
        return param + "[" + expr(e.a) + "].start";
      case Op::kSegEnd:
        return param + "[" + expr(e.a) + "].end";
      case Op::kSegCount:
        return param + ".count";
      case Op::kMin:
        return "min(" + expr(e.a) + ", " + expr(e.b) + ")";
      case Op::kMax:
        return "max(" + expr(e.a) + ", " + expr(e.b) + ")";
      case Op::kNeg:
        return "-" + expr(e.a);
      case Op::kNot:
        return "!" + expr(e.a);
      case Op::kIsqrt:
        return "isqrt(" + expr(e.a) + ")";
      case Op::kSelect:
        return "(if " + expr(e.a) + " then " + expr(e.b) + " else " + expr(e.c) + ")";
      default:
        return "(" + expr(e.a) + binary_symbol(e.op) + expr(e.b) + ")";
    }
  }

  std::string set(SetId id) const {
    if (id == kNone) return "<none>";
    const SetNode& s = p_.sets[static_cast<size_t>(id)];
    switch (s.op) {
      case SetOp::kEmpty:
        return "none";
      case SetOp::kInterval:
        return "[" + expr(s.lo) + ", " + expr(s.hi) + ")";
      case SetOp::kUnion:
        return "(" + set(s.a) + " | " + set(s.b) + ")";
      case SetOp::kIntersect:
        return "(" + set(s.a) + " & " + set(s.b) + ")";
      case SetOp::kDiff:
        return "(" + set(s.a) + " - " + set(s.b) + ")";
      case SetOp::kSelect:
        return "(if " + expr(s.cond) + " then " + set(s.a) + " else " + set(s.b) + ")";
      case SetOp::kGrid:
        return grid(s.grid);
      case SetOp::kSegmentUnion:
        return "union(" + p_.params[static_cast<size_t>(s.param)].name + ")";
    }
    return "?";
  }

  std::string grid(int32_t index) const {
    const GridNeighbourhood& g = p_.grids[static_cast<size_t>(index)];
    std::ostringstream out;
    out << (g.shape == GridShape::kBox ? "box" : "ellipse") << "(center=" << expr(g.center)
        << ", grid=" << expr(g.start) << ":" << expr(g.frames) << "x" << expr(g.rows) << "x"
        << expr(g.cols) << (g.strip == kNone ? "" : ", strip=" + expr(g.strip))
        << ", r=" << expr(g.rt) << "," << expr(g.ry) << "," << expr(g.rx) << ")";
    return out.str();
  }

  std::string term(const KeyTerm& t) const {
    std::string out;
    for (const Iterator& it : t.iterators) {
      out += "for " + p_.slot_names[static_cast<size_t>(it.slot)] + " in [" + expr(it.lo) + ", " +
             expr(it.hi) + "): ";
    }
    out += "[" + expr(t.lo) + ", " + expr(t.hi) + ")";
    if (t.grid != kNone) out += "  <formula " + grid(t.grid) + ">";
    return out;
  }

  std::string program() const {
    std::ostringstream out;
    out << "mask " << p_.name << "(" << param_list(p_.params) << ")";
    if (p_.uses_batch || p_.uses_head) {
      out << "  [depends on" << (p_.uses_batch ? " b" : "") << (p_.uses_head ? " h" : "") << "]";
    }
    out << "\n";
    for (size_t r = 0; r < p_.regions.size(); ++r) {
      const Region& region = p_.regions[r];
      out << "region " << r << " (line " << region.loc.line << ")\n";
      loops(region.loops, out);
      if (!p_.normalized) {
        out << "  q in " << set(region.query_set) << "\n";
        out << "  k in " << set(region.key_set) << "\n";
        continue;
      }
      for (const KeyTerm& t : region.queries) out << "  q term " << term(t) << "\n";
      for (const KeyTerm& t : region.keys) out << "  k term " << term(t) << "\n";
    }
    for (const Requirement& r : p_.requirements) {
      out << "require (line " << r.loc.line << ")\n";
      loops(r.loops, out);
      out << "  " << expr(r.cond) << "\n";
    }
    return out.str();
  }

 private:
  void loops(const std::vector<Loop>& loops, std::ostringstream& out) const {
    for (const Loop& loop : loops) {
      out << "  for " << p_.slot_names[static_cast<size_t>(loop.slot)] << " in "
          << p_.params[static_cast<size_t>(loop.segments_param)].name << "\n";
    }
  }

  const Program& p_;
};

}  // namespace

std::string print(const Program& program) {
  return Printer(program).program();
}

std::string print_expr(const Program& program, ExprId id) {
  return Printer(program).expr(id);
}

}  // namespace cm::ir
