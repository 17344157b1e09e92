// The checker: scoped name resolution and type assignment over the syntax tree.
#include "lang/checker.h"

#include <string>
#include <vector>

#include "lang/builtins.h"

namespace cm::lang {
namespace {

std::string pos(SourceLoc loc) {
  return std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

Type param_value_type(ir::ParamType t) {
  switch (t) {
    case ir::ParamType::kInt:
      return Type::kInt;
    case ir::ParamType::kIntArray:
      return Type::kIntArray;
    case ir::ParamType::kSegment:
      return Type::kSegment;
    case ir::ParamType::kSegments:
      return Type::kSegments;
  }
  return Type::kError;
}

// A declared name in scope.
struct Binding {
  std::string name;
  NameKind kind = NameKind::kUnresolved;
  int param = -1;
  const void* decl = nullptr;
  Type type = Type::kError;
  bool depends_on_q = false;
  SourceLoc loc;
};

class Checker {
 public:
  explicit Checker(DiagnosticSink& sink) : sink_(sink) {}

  void check_mask(MaskDecl& mask) {
    for (size_t i = 0; i < mask.params.size(); ++i) {
      const Param& p = mask.params[i];
      if (!declarable(p.name, p.loc, "a parameter")) continue;
      scope_.push_back({p.name, NameKind::kParam, static_cast<int>(i), nullptr,
                        param_value_type(p.type), false, p.loc});
    }
    check_block(mask.body);
  }

 private:
  void check_block(std::vector<StmtPtr>& body) {
    const size_t mark = scope_.size();
    for (StmtPtr& s : body) check_stmt(*s);
    scope_.resize(mark);
  }

  void check_stmt(Stmt& s) {
    switch (s.kind) {
      case StmtKind::kLet: {
        const Type type = check_expr(*s.value);
        if (declarable(s.name, s.name_loc, "a 'let'")) {
          scope_.push_back(
              {s.name, NameKind::kLet, -1, &s, type, s.value->depends_on_q, s.name_loc});
        }
        return;
      }
      case StmtKind::kRegion:
        if (expect_set(*s.value, "a query set")) forbid_q(*s.value, "a query set");
        expect_set(*s.key_set, "a key set");
        return;
      case StmtKind::kFor: {
        const Type type = check_expr(*s.value);
        if (type != Type::kSegments && type != Type::kError) {
          sink_.error(s.value->loc,
                      std::string("'for' iterates over segments, found ") + type_name(type));
        }
        const size_t mark = scope_.size();
        if (declarable(s.name, s.name_loc, "a loop variable")) {
          scope_.push_back({s.name, NameKind::kLoopVar, -1, &s, Type::kSegment, false, s.name_loc});
        }
        check_block(s.body);
        scope_.resize(mark);
        return;
      }
      case StmtKind::kIf:
        if (expect_type(*s.value, Type::kBool, "a bool condition")) {
          forbid_q(*s.value, "an 'if' statement's condition");
        }
        check_block(s.body);
        check_block(s.else_body);
        return;
      case StmtKind::kRequire:
        if (expect_type(*s.value, Type::kBool, "a bool condition")) {
          forbid_q(*s.value, "a 'require' statement's condition");
        }
        return;
    }
  }

  // Checks `e`; reports "expected WHAT, found T" unless it is set-like. True if it is.
  bool expect_set(Expr& e, const char* what) {
    const Type type = check_expr(e);
    if (is_set_like(type)) return true;
    if (type != Type::kError)
      sink_.error(e.loc, std::string("expected ") + what + ", found " + type_name(type));
    return false;
  }

  bool expect_type(Expr& e, Type want, const std::string& what) {
    const Type type = check_expr(e);
    if (type == want) return true;
    if (type != Type::kError) sink_.error(e.loc, "expected " + what + ", found " + type_name(type));
    return false;
  }

  // Reports the name through which `e` depends on q, if it does.
  void forbid_q(const Expr& e, const char* where) {
    const Expr* use = first_q_use(e);
    if (use == nullptr) return;
    const std::string detail = use->name_kind == NameKind::kQ ? "" : " depends on q and";
    sink_.error(use->loc, "'" + use->name + "'" + detail + " cannot be used in " + where);
  }

  static const Expr* first_q_use(const Expr& e) {
    if (!e.depends_on_q) return nullptr;
    if (e.kind == ExprKind::kName) return &e;
    for (const ExprPtr& a : e.args) {
      if (const Expr* use = first_q_use(*a)) return use;
    }
    return nullptr;
  }

  Type check_expr(Expr& e) {
    e.type = infer(e);
    for (const ExprPtr& a : e.args) e.depends_on_q = e.depends_on_q || a->depends_on_q;
    return e.type;
  }

  Type infer(Expr& e) {
    switch (e.kind) {
      case ExprKind::kIntLiteral:
        return Type::kInt;
      case ExprKind::kName:
        return resolve(e);
      case ExprKind::kUnary:
        return e.op == Operator::kNeg
                   ? operands(e, Type::kInt, Type::kInt, "an int operand for '-'")
                   : operands(e, Type::kBool, Type::kBool, "a bool operand for '!'");
      case ExprKind::kBinary:
        return infer_binary(e);
      case ExprKind::kInterval:
        return operands(e, Type::kInt, Type::kSet, "an int interval end");
      case ExprKind::kCall:
        return infer_call(e);
      case ExprKind::kField:
        return infer_field(e);
      case ExprKind::kMethod:
        return infer_method(e);
      case ExprKind::kIndex:
        return infer_index(e);
      case ExprKind::kIf:
        return infer_if(e);
      case ExprKind::kLet: {
        const Type value = check_expr(*e.args[0]);
        const size_t mark = scope_.size();
        if (declarable(e.name, e.loc, "a 'let'")) {
          scope_.push_back({e.name, NameKind::kLet, -1, &e, value, e.args[0]->depends_on_q, e.loc});
        }
        const Type body = check_expr(*e.args[1]);
        scope_.resize(mark);
        return body;
      }
    }
    return Type::kError;
  }

  Type resolve(Expr& e) {
    e.name_kind = builtin_name(e.name);
    switch (e.name_kind) {
      case NameKind::kQ:
      case NameKind::kDiag:
        e.depends_on_q = true;
        return Type::kInt;
      case NameKind::kB:
      case NameKind::kH:
      case NameKind::kNq:
      case NameKind::kNk:
        return Type::kInt;
      case NameKind::kAll:
      case NameKind::kNone:
        return Type::kSet;
      default:
        break;
    }
    if (const Binding* b = lookup(e.name)) {
      e.name_kind = b->kind;
      e.param = b->param;
      e.decl = b->decl;
      e.depends_on_q = b->depends_on_q;
      return b->type;
    }
    if (is_builtin_function(e.name)) {
      sink_.error(e.loc, "'" + e.name + "' is a function; call it as " + e.name + "(...)");
    } else {
      sink_.error(e.loc, "unknown name '" + e.name + "'");
    }
    return Type::kError;
  }

  // Checks that every operand of `e` has type `want`; the result is `result`.
  Type operands(Expr& e, Type want, Type result, const std::string& what, size_t first = 0) {
    bool ok = true;
    for (size_t i = first; i < e.args.size(); ++i) ok = expect_type(*e.args[i], want, what) && ok;
    return ok ? result : Type::kError;
  }

  Type infer_binary(Expr& e) {
    const std::string quoted = std::string(" for '") + operator_text(e.op) + "'";
    switch (e.op) {
      case Operator::kAdd:
      case Operator::kMul:
      case Operator::kDiv:
      case Operator::kMod:
        return operands(e, Type::kInt, Type::kInt, "an int operand" + quoted);
      case Operator::kEq:
      case Operator::kNe:
      case Operator::kLt:
      case Operator::kLe:
      case Operator::kGt:
      case Operator::kGe:
        return operands(e, Type::kInt, Type::kBool, "an int operand" + quoted);
      case Operator::kAnd:
      case Operator::kOr:
        return operands(e, Type::kBool, Type::kBool, "a bool operand" + quoted);
      case Operator::kUnion:
      case Operator::kIntersect: {
        const bool a = expect_set(*e.args[0], ("a set operand" + quoted).c_str());
        const bool b = expect_set(*e.args[1], ("a set operand" + quoted).c_str());
        return a && b ? Type::kSet : Type::kError;
      }
      case Operator::kSub: {
        const Type a = check_expr(*e.args[0]);
        const Type b = check_expr(*e.args[1]);
        if (a == Type::kError || b == Type::kError) return Type::kError;
        if (a == Type::kInt && b == Type::kInt) return Type::kInt;
        if (is_set_like(a) && is_set_like(b)) return Type::kSet;
        sink_.error(e.loc, std::string("'-' needs two ints or two sets, found ") + type_name(a) +
                               " and " + type_name(b));
        return Type::kError;
      }
      default:
        return Type::kError;
    }
  }

  Type infer_call(Expr& e) {
    const size_t n = e.args.size();
    const std::string quoted = " to '" + e.name + "'";
    auto arity_error = [&](const std::string& takes) {
      sink_.error(e.loc, "'" + e.name + "' takes " + takes + ", found " + std::to_string(n));
      for (ExprPtr& a : e.args) check_expr(*a);
      return Type::kError;
    };
    if (e.name == "min" || e.name == "max") {
      if (n < 2) return arity_error("at least 2 arguments");
      return operands(e, Type::kInt, Type::kInt, "an int argument" + quoted);
    }
    if (e.name == "abs" || e.name == "isqrt") {
      if (n != 1) return arity_error("1 argument");
      return operands(e, Type::kInt, Type::kInt, "an int argument" + quoted);
    }
    if (e.name == "clamp") {
      if (n != 3) return arity_error("3 arguments (x, lo, hi)");
      return operands(e, Type::kInt, Type::kInt, "an int argument" + quoted);
    }
    if (e.name == "grid") {
      if (n != 3 && n != 4) {
        return arity_error("3 arguments (start, rows, cols) or 4 (start, frames, rows, cols)");
      }
      return operands(e, Type::kInt, n == 3 ? Type::kGrid2 : Type::kGrid3,
                      "an int argument" + quoted);
    }
    if (e.name == "strip_grid") {
      if (n != 4 && n != 5) {
        return arity_error(
            "4 arguments (start, rows, cols, strip) or 5 (start, frames, rows, cols, strip)");
      }
      return operands(e, Type::kInt, n == 4 ? Type::kGrid2 : Type::kGrid3,
                      "an int argument" + quoted);
    }
    if (lookup(e.name) != nullptr || builtin_name(e.name) != NameKind::kUnresolved) {
      sink_.error(e.loc, "'" + e.name + "' is not a function");
    } else {
      sink_.error(e.loc, "unknown function '" + e.name + "'");
    }
    for (ExprPtr& a : e.args) check_expr(*a);
    return Type::kError;
  }

  Type infer_field(Expr& e) {
    const Type object = check_expr(*e.args[0]);
    if (object == Type::kError) return Type::kError;
    const Type type = field_type(object, e.name);
    if (type != Type::kError) return type;
    const std::string fields = field_list(object);
    sink_.error(e.loc, std::string(type_name(object)) + " has no field '" + e.name + "'" +
                           (fields.empty() ? "" : " (it has " + fields + ")"));
    return Type::kError;
  }

  Type infer_method(Expr& e) {
    const Type object = check_expr(*e.args[0]);
    for (size_t i = 1; i < e.args.size(); ++i) check_expr(*e.args[i]);
    if (object == Type::kError) return Type::kError;
    if (object != Type::kGrid2 && object != Type::kGrid3) {
      sink_.error(e.loc, "method '" + e.name + "' needs a grid, found " + type_name(object));
      return Type::kError;
    }
    const GridMethod* m = find_grid_method(e.name);
    if (m == nullptr) {
      sink_.error(e.loc, "grid has no method '" + e.name + "' (it has " + grid_method_list() + ")");
      return Type::kError;
    }
    const bool is_2d = object == Type::kGrid2;
    const int arity = is_2d ? m->arity_2d : m->arity_3d;
    if (arity == 0) {
      sink_.error(e.loc, "'" + e.name + "' needs a " + (is_2d ? "3D" : "2D") + " grid, found " +
                             type_name(object));
      return Type::kError;
    }
    const int given = static_cast<int>(e.args.size()) - 1;
    if (given != arity) {
      sink_.error(e.loc, "'" + e.name + "' on a " + type_name(object) + " takes " +
                             std::to_string(arity) + (arity == 1 ? " argument " : " arguments ") +
                             std::string(is_2d ? m->signature_2d : m->signature_3d) + ", found " +
                             std::to_string(given));
      return Type::kError;
    }
    for (size_t i = 1; i < e.args.size(); ++i) {
      const Type t = e.args[i]->type;
      if (t != Type::kInt && t != Type::kError) {
        sink_.error(e.args[i]->loc,
                    "expected an int argument to '" + e.name + "', found " + type_name(t));
        return Type::kError;
      }
      if (t == Type::kError) return Type::kError;
    }
    return m->result;
  }

  Type infer_index(Expr& e) {
    const Type object = check_expr(*e.args[0]);
    const Type index = check_expr(*e.args[1]);
    if (object == Type::kError || index == Type::kError) return Type::kError;
    if (object == Type::kSegments) {
      if (index == Type::kInt) return Type::kSegment;
      sink_.error(e.args[1]->loc, std::string("expected an int index, found ") + type_name(index));
      return Type::kError;
    }
    if (object == Type::kIntArray) {
      if (index == Type::kInt || index == Type::kSegment) return Type::kInt;
      sink_.error(e.args[1]->loc,
                  std::string("expected an int or segment index, found ") + type_name(index));
      return Type::kError;
    }
    sink_.error(e.loc,
                std::string("only segments and int[] can be indexed, found ") + type_name(object));
    return Type::kError;
  }

  Type infer_if(Expr& e) {
    const bool cond = expect_type(*e.args[0], Type::kBool, "a bool condition");
    const Type a = check_expr(*e.args[1]);
    const Type b = check_expr(*e.args[2]);
    if (!cond || a == Type::kError || b == Type::kError) return Type::kError;
    if (a == b && (a == Type::kInt || a == Type::kBool)) return a;
    if (is_set_like(a) && is_set_like(b)) return Type::kSet;
    if (a == b) {
      sink_.error(e.loc, std::string("an 'if' expression gives an int, bool or set, found ") +
                             type_name(a));
    } else {
      sink_.error(e.loc, std::string("the branches of 'if' differ: ") + type_name(a) + " and " +
                             type_name(b));
    }
    return Type::kError;
  }

  const Binding* lookup(const std::string& name) const {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it) {
      if (it->name == name) return &*it;
    }
    return nullptr;
  }

  // Names are never shadowed: a declaration may not reuse a built-in or a visible name.
  bool declarable(const std::string& name, SourceLoc loc, const char* what) {
    if (is_reserved(name)) {
      sink_.error(loc, "'" + name + "' is a built-in name and cannot be used as " + what + " name");
      return false;
    }
    if (const Binding* b = lookup(name)) {
      sink_.error(loc, "'" + name + "' is already defined at " + pos(b->loc));
      return false;
    }
    return true;
  }

  DiagnosticSink& sink_;
  std::vector<Binding> scope_;
};

}  // namespace

bool check(MaskDecl& mask, DiagnosticSink& sink) {
  const int before = sink.count();
  Checker(sink).check_mask(mask);
  mask.checked = sink.count() == before;
  return mask.checked;
}

}  // namespace cm::lang
