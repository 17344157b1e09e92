// Lowering of the checked tree. Values are lowered per use position: `all` means every key in
// a key set and every row in a query set, so a let holding `all` may lower differently in the
// two places.
#include "lang/lower.h"

#include <map>
#include <utility>

namespace cm::lang {
namespace {

using ir::ExprId;
using ir::kNone;
using ir::Op;
using ir::SetId;
using ir::SetOp;

enum class Position : uint8_t { kKey, kQuery };

// A grid's extent and token order: `strip` is the strip width of strip_grid (kNone for the
// row-major grid of `grid`).
struct GridValue {
  ExprId start = kNone, frames = kNone, rows = kNone, cols = kNone, strip = kNone;
};

// A lowered value of any type: ints and bools are expressions, sets are set nodes, segments
// are (parameter, segment number), segment lists and arrays are parameters.
struct Value {
  ExprId expr = kNone;  // int, bool, or a segment's number
  SetId set = kNone;
  int32_t param = kNone;
  GridValue grid;

  Value() = default;
  Value(ExprId e, SetId s = kNone, int32_t p = kNone) : expr(e), set(s), param(p) {}
};

struct LoopVar {
  int32_t slot = kNone;
  int32_t segments_param = kNone;
};

class Lowerer {
 public:
  explicit Lowerer(ir::Program& program) : p_(program) {}

  void lower_mask(const MaskDecl& mask) {
    p_.name = mask.name;
    p_.params = mask.params;
    p_.slot_names = {"q", "b", "h", "Nq", "Nk"};
    lower_block(mask.body, kNone);
  }

 private:
  // `cond` is the conjunction of enclosing `if` conditions, or kNone.
  void lower_block(const std::vector<StmtPtr>& body, ExprId cond) {
    for (const StmtPtr& s : body) lower_stmt(*s, cond);
  }

  void lower_stmt(const Stmt& s, ExprId cond) {
    switch (s.kind) {
      case StmtKind::kLet:
        let_values_[&s] = s.value.get();
        return;
      case StmtKind::kRegion: {
        ir::Region region;
        region.loops = loops_;
        region.query_set = to_set(*s.value, Position::kQuery);
        if (cond != kNone) {
          const SetId empty =
              p_.add_set({SetOp::kEmpty, kNone, kNone, kNone, kNone, kNone, kNone, kNone, s.loc});
          region.query_set = p_.add_set(
              {SetOp::kSelect, region.query_set, empty, kNone, kNone, cond, kNone, kNone, s.loc});
        }
        region.key_set = to_set(*s.key_set, Position::kKey);
        region.loc = s.loc;
        p_.regions.push_back(std::move(region));
        return;
      }
      case StmtKind::kFor: {
        const LoopVar var{static_cast<int32_t>(p_.slot_names.size()),
                          lower(*s.value, Position::kKey).param};
        p_.slot_names.push_back(s.name);
        loop_vars_[&s] = var;
        loops_.push_back({var.slot, var.segments_param});
        lower_block(s.body, cond);
        loops_.pop_back();
        return;
      }
      case StmtKind::kIf: {
        const ExprId c = lower(*s.value, Position::kKey).expr;
        lower_block(s.body, conjoin(cond, c, s.loc));
        lower_block(s.else_body, conjoin(cond, p_.exprs.unary(Op::kNot, c, s.loc), s.loc));
        return;
      }
      case StmtKind::kRequire: {
        ExprId c = lower(*s.value, Position::kKey).expr;
        // A select, not !cond || c: evaluation errors in c count only where cond holds.
        if (cond != kNone) c = p_.exprs.select(cond, c, p_.exprs.constant(1, s.loc), s.loc);
        p_.requirements.push_back({loops_, c, s.loc, s.end});
        return;
      }
    }
  }

  ExprId conjoin(ExprId a, ExprId b, SourceLoc loc) {
    return a == kNone ? b : p_.exprs.binary(Op::kAnd, a, b, loc);
  }

  SetId to_set(const Expr& e, Position where) { return as_set(e.type, lower(e, where), e.loc); }

  SetId as_set(Type type, const Value& v, SourceLoc loc) {
    switch (type) {
      case Type::kSegment:
        return interval(seg(Op::kSegStart, v, loc), seg(Op::kSegEnd, v, loc), loc);
      case Type::kSegments:
        return p_.add_set(
            {SetOp::kSegmentUnion, kNone, kNone, kNone, kNone, kNone, kNone, v.param, loc});
      case Type::kGrid2:
      case Type::kGrid3:
        return interval(v.grid.start, grid_end(v.grid, loc), loc);
      default:
        return v.set;
    }
  }

  SetId interval(ExprId lo, ExprId hi, SourceLoc loc) {
    return p_.add_set({SetOp::kInterval, kNone, kNone, lo, hi, kNone, kNone, kNone, loc});
  }

  ExprId seg(Op op, const Value& segment, SourceLoc loc) {
    return p_.exprs.add({op, segment.param, segment.expr, kNone, kNone, 0, loc});
  }

  ExprId grid_end(const GridValue& g, SourceLoc loc) {
    ir::ExprPool& x = p_.exprs;
    const ExprId size = x.binary(Op::kMul, x.binary(Op::kMul, g.frames, g.rows, loc), g.cols, loc);
    return x.binary(Op::kAdd, g.start, size, loc);
  }

  Value lower(const Expr& e, Position where) {
    ir::ExprPool& x = p_.exprs;
    const SourceLoc loc = e.loc;
    switch (e.kind) {
      case ExprKind::kIntLiteral:
        return {x.constant(e.value, loc)};
      case ExprKind::kName:
        return lower_name(e, where);
      case ExprKind::kUnary:
        return {x.unary(e.op == Operator::kNeg ? Op::kNeg : Op::kNot, lower(*e.args[0], where).expr,
                        loc)};
      case ExprKind::kBinary:
        return lower_binary(e, where);
      case ExprKind::kInterval: {
        const ExprId one = x.constant(1, loc);
        ExprId lo = lower(*e.args[0], where).expr;
        ExprId hi = lower(*e.args[1], where).expr;
        if (e.lo_open) lo = x.binary(Op::kAdd, lo, one, loc);
        if (!e.hi_open) hi = x.binary(Op::kAdd, hi, one, loc);
        return {kNone, interval(lo, hi, loc)};
      }
      case ExprKind::kCall:
        return lower_call(e, where);
      case ExprKind::kField:
        return {lower_field(e, where)};
      case ExprKind::kMethod:
        return lower_method(e, where);
      case ExprKind::kIndex: {
        const Value object = lower(*e.args[0], where);
        const Value index = lower(*e.args[1], where);
        if (e.args[0]->type == Type::kSegments) return {index.expr, kNone, object.param};
        return {x.add({Op::kArrayAt, object.param, index.expr, kNone, kNone, 0, loc})};
      }
      case ExprKind::kIf: {
        const ExprId cond = lower(*e.args[0], where).expr;
        if (e.type == Type::kSet) {
          const SetId a = to_set(*e.args[1], where);
          const SetId b = to_set(*e.args[2], where);
          return {kNone, p_.add_set({SetOp::kSelect, a, b, kNone, kNone, cond, kNone, kNone, loc})};
        }
        return {x.select(cond, lower(*e.args[1], where).expr, lower(*e.args[2], where).expr, loc)};
      }
      case ExprKind::kLet:
        let_values_[&e] = e.args[0].get();
        return lower(*e.args[1], where);
    }
    return {};
  }

  Value lower_name(const Expr& e, Position where) {
    ir::ExprPool& x = p_.exprs;
    const SourceLoc loc = e.loc;
    switch (e.name_kind) {
      case NameKind::kQ:
        return {x.var(ir::kSlotQ, loc)};
      case NameKind::kB:
        return {x.var(ir::kSlotB, loc)};
      case NameKind::kH:
        return {x.var(ir::kSlotH, loc)};
      case NameKind::kNq:
        return {x.var(ir::kSlotNq, loc)};
      case NameKind::kNk:
        return {x.var(ir::kSlotNk, loc)};
      case NameKind::kDiag: {
        const ExprId shifted =
            x.binary(Op::kAdd, x.var(ir::kSlotQ, loc), x.var(ir::kSlotNk, loc), loc);
        return {x.binary(Op::kSub, shifted, x.var(ir::kSlotNq, loc), loc)};
      }
      case NameKind::kAll: {
        const int32_t length = where == Position::kKey ? ir::kSlotNk : ir::kSlotNq;
        return {kNone, interval(x.constant(0, loc), x.var(length, loc), loc)};
      }
      case NameKind::kNone:
        return {kNone,
                p_.add_set({SetOp::kEmpty, kNone, kNone, kNone, kNone, kNone, kNone, kNone, loc})};
      case NameKind::kParam:
        return lower_param(e.param, loc);
      case NameKind::kLet: {
        const auto key = std::make_pair(e.decl, where);
        const auto cached = let_cache_.find(key);
        if (cached != let_cache_.end()) return cached->second;
        const Value v = lower(*let_values_.at(e.decl), where);
        let_cache_[key] = v;
        return v;
      }
      case NameKind::kLoopVar: {
        const LoopVar& var = loop_vars_.at(e.decl);
        return {x.var(var.slot, loc), kNone, var.segments_param};
      }
      case NameKind::kUnresolved:
        break;
    }
    return {};
  }

  Value lower_param(int32_t index, SourceLoc loc) {
    switch (p_.params[static_cast<size_t>(index)].type) {
      case ir::ParamType::kInt:
        return {p_.exprs.add({Op::kParam, index, kNone, kNone, kNone, 0, loc})};
      case ir::ParamType::kSegment:
        return {p_.exprs.constant(0, loc), kNone, index};  // a lone segment is segment 0
      case ir::ParamType::kIntArray:
      case ir::ParamType::kSegments:
        break;
    }
    return {kNone, kNone, index};
  }

  Value lower_binary(const Expr& e, Position where) {
    const SourceLoc loc = e.loc;
    if (e.type == Type::kSet) {
      const SetOp op = e.op == Operator::kUnion       ? SetOp::kUnion
                       : e.op == Operator::kIntersect ? SetOp::kIntersect
                                                      : SetOp::kDiff;
      const SetId a = to_set(*e.args[0], where);
      const SetId b = to_set(*e.args[1], where);
      return {kNone, p_.add_set({op, a, b, kNone, kNone, kNone, kNone, kNone, loc})};
    }
    ExprId a = lower(*e.args[0], where).expr;
    ExprId b = lower(*e.args[1], where).expr;
    if (e.op == Operator::kGt || e.op == Operator::kGe) std::swap(a, b);  // a > b is b < a
    return {p_.exprs.binary(int_op(e.op), a, b, loc)};
  }

  // The IR operator of an int or bool binary operator (> and >= become < and <= swapped).
  static Op int_op(Operator op) {
    constexpr std::pair<Operator, Op> kOps[] = {
        {Operator::kAdd, Op::kAdd}, {Operator::kSub, Op::kSub}, {Operator::kMul, Op::kMul},
        {Operator::kDiv, Op::kDiv}, {Operator::kMod, Op::kMod}, {Operator::kAnd, Op::kAnd},
        {Operator::kOr, Op::kOr},   {Operator::kEq, Op::kEq},   {Operator::kNe, Op::kNe},
        {Operator::kLt, Op::kLt},   {Operator::kLe, Op::kLe},   {Operator::kGt, Op::kLt},
        {Operator::kGe, Op::kLe}};
    for (const auto& [from, to] : kOps) {
      if (from == op) return to;
    }
    return Op::kAdd;  // unreachable on a checked tree: every int/bool operator is listed
  }

  Value lower_call(const Expr& e, Position where) {
    ir::ExprPool& x = p_.exprs;
    const SourceLoc loc = e.loc;
    std::vector<ExprId> args;
    for (const ExprPtr& a : e.args) args.push_back(lower(*a, where).expr);
    if (e.name == "min" || e.name == "max") {
      const Op op = e.name == "min" ? Op::kMin : Op::kMax;
      ExprId folded = args[0];
      for (size_t i = 1; i < args.size(); ++i) folded = x.binary(op, folded, args[i], loc);
      return {folded};
    }
    if (e.name == "abs") return {x.binary(Op::kMax, args[0], x.unary(Op::kNeg, args[0], loc), loc)};
    if (e.name == "isqrt") return {x.unary(Op::kIsqrt, args[0], loc)};
    if (e.name == "clamp") {
      return {x.binary(Op::kMin, x.binary(Op::kMax, args[0], args[1], loc), args[2], loc)};
    }
    // grid(start, [frames,] rows, cols) or strip_grid(start, [frames,] rows, cols, strip)
    ExprId strip = kNone;
    if (e.name == "strip_grid") {
      strip = args.back();
      args.pop_back();
    }
    Value v;
    const bool is_2d = args.size() == 3;
    v.grid = {args[0], is_2d ? x.constant(1, loc) : args[1], args[args.size() - 2], args.back()};
    if (strip != kNone) {
      // Strips wider than the grid are the row-major layout; a strip below 1 becomes 0 and is
      // reported as a division by zero where the grid is used.
      const ExprId positive = x.binary(Op::kLt, x.constant(0, loc), strip, loc);
      v.grid.strip =
          x.select(positive, x.binary(Op::kMin, strip, v.grid.cols, loc), x.constant(0, loc), loc);
    }
    return v;
  }

  ExprId lower_field(const Expr& e, Position where) {
    ir::ExprPool& x = p_.exprs;
    const SourceLoc loc = e.loc;
    const Value object = lower(*e.args[0], where);
    const std::string& f = e.name;
    switch (e.args[0]->type) {
      case Type::kSegment:
        if (f == "start") return seg(Op::kSegStart, object, loc);
        if (f == "end") return seg(Op::kSegEnd, object, loc);
        if (f == "index") return object.expr;
        return x.binary(Op::kSub, seg(Op::kSegEnd, object, loc), seg(Op::kSegStart, object, loc),
                        loc);
      case Type::kSegments:
        return x.add({Op::kSegCount, object.param, kNone, kNone, kNone, 0, loc});
      case Type::kIntArray:
        return x.add({Op::kArrayLen, object.param, kNone, kNone, kNone, 0, loc});
      default:
        break;
    }
    const GridValue& g = object.grid;
    if (f == "start") return g.start;
    if (f == "end") return grid_end(g, loc);
    if (f == "frames") return g.frames;
    return f == "rows" ? g.rows : g.cols;
  }

  Value lower_method(const Expr& e, Position where) {
    ir::ExprPool& x = p_.exprs;
    const SourceLoc loc = e.loc;
    const GridValue g = lower(*e.args[0], where).grid;
    std::vector<ExprId> args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(lower(*e.args[i], where).expr);
    const std::string& m = e.name;
    if (m == "frame" || m == "row" || m == "col") {
      const ExprId offset = x.binary(Op::kSub, args[0], g.start, loc);
      const ExprId plane = x.binary(Op::kMul, g.rows, g.cols, loc);
      if (m == "frame") return {x.binary(Op::kDiv, offset, plane, loc)};
      if (g.strip == kNone) {
        if (m == "col") return {x.binary(Op::kMod, offset, g.cols, loc)};
        return {x.binary(Op::kMod, x.binary(Op::kDiv, offset, g.cols, loc), g.rows, loc)};
      }
      const ir::StripPosition s = ir::strip_position(x, g.rows, g.cols, g.strip,
                                                     x.binary(Op::kMod, offset, plane, loc), loc);
      return {m == "row" ? s.row : s.col};
    }
    ir::GridNeighbourhood n;
    n.start = n.center_start = g.start;
    n.frames = g.frames;
    n.rows = g.rows;
    n.cols = g.cols;
    n.strip = g.strip;
    n.center = args[0];
    n.shape = m == "box" ? ir::GridShape::kBox : ir::GridShape::kEllipse;
    if (m == "disk" || m == "ball") {
      n.ry = n.rx = args[1];
      n.rt = m == "ball" ? args[1] : x.constant(1, loc);
    } else if (args.size() == 3) {  // 2D box or ellipse: (p, ry, rx)
      n.rt = x.constant(1, loc);
      n.ry = args[1];
      n.rx = args[2];
    } else {
      n.rt = args[1];
      n.ry = args[2];
      n.rx = args[3];
    }
    p_.grids.push_back(n);
    const auto index = static_cast<int32_t>(p_.grids.size() - 1);
    return {kNone,
            p_.add_set({SetOp::kGrid, kNone, kNone, kNone, kNone, kNone, index, kNone, loc})};
  }

  ir::Program& p_;
  std::vector<ir::Loop> loops_;
  std::map<const void*, const Expr*> let_values_;
  std::map<std::pair<const void*, Position>, Value> let_cache_;
  std::map<const void*, LoopVar> loop_vars_;
};

}  // namespace

void lower(const MaskDecl& mask, ir::Program& program) {
  Lowerer(program).lower_mask(mask);
}

}  // namespace cm::lang
