// Text form of the syntax tree: one statement per line, expressions as parenthesized prefix
// forms. After checking, every expression node also shows its type (":int").
#include <string>

#include "lang/ast.h"

namespace cm::lang {

const char* type_name(Type type) {
  switch (type) {
    case Type::kError:
      return "<error>";
    case Type::kInt:
      return "int";
    case Type::kBool:
      return "bool";
    case Type::kSet:
      return "set";
    case Type::kSegment:
      return "segment";
    case Type::kSegments:
      return "segments";
    case Type::kIntArray:
      return "int[]";
    case Type::kGrid2:
      return "2D grid";
    case Type::kGrid3:
      return "3D grid";
  }
  return "?";
}

bool is_set_like(Type type) {
  return type == Type::kSet || type == Type::kSegment || type == Type::kSegments ||
         type == Type::kGrid2 || type == Type::kGrid3;
}

const char* operator_text(Operator op) {
  switch (op) {
    case Operator::kNeg:
    case Operator::kSub:
      return "-";
    case Operator::kNot:
      return "!";
    case Operator::kAdd:
      return "+";
    case Operator::kMul:
      return "*";
    case Operator::kDiv:
      return "/";
    case Operator::kMod:
      return "%";
    case Operator::kUnion:
      return "|";
    case Operator::kIntersect:
      return "&";
    case Operator::kAnd:
      return "&&";
    case Operator::kOr:
      return "||";
    case Operator::kEq:
      return "==";
    case Operator::kNe:
      return "!=";
    case Operator::kLt:
      return "<";
    case Operator::kLe:
      return "<=";
    case Operator::kGt:
      return ">";
    case Operator::kGe:
      return ">=";
  }
  return "?";
}

namespace {

std::string at(SourceLoc loc) {
  return "@" + std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

class AstPrinter {
 public:
  explicit AstPrinter(bool show_types) : show_types_(show_types) {}

  std::string expr(const Expr& e) const {
    std::string out;
    switch (e.kind) {
      case ExprKind::kIntLiteral:
        out = std::to_string(e.value);
        break;
      case ExprKind::kName:
        out = e.name;
        break;
      case ExprKind::kUnary:
      case ExprKind::kBinary:
        out = std::string("(") + operator_text(e.op) + list(e, 0) + ")";
        break;
      case ExprKind::kInterval:
        out = std::string(e.lo_open ? "(" : "[") + expr(*e.args[0]) + ", " + expr(*e.args[1]) +
              (e.hi_open ? ")" : "]");
        break;
      case ExprKind::kCall:
        out = "(call " + e.name + list(e, 0) + ")";
        break;
      case ExprKind::kField:
        out = "(. " + expr(*e.args[0]) + " " + e.name + ")";
        break;
      case ExprKind::kMethod:
        out = "(." + e.name + list(e, 0) + ")";
        break;
      case ExprKind::kIndex:
        out = "(index" + list(e, 0) + ")";
        break;
      case ExprKind::kIf:
        out = "(if" + list(e, 0) + ")";
        break;
      case ExprKind::kLet:
        out = "(let " + e.name + list(e, 0) + ")";
        break;
    }
    if (show_types_) out += std::string(":") + type_name(e.type);
    return out;
  }

  void block(const std::vector<StmtPtr>& body, int indent, std::string& out) const {
    for (const StmtPtr& s : body) stmt(*s, indent, out);
  }

 private:
  std::string list(const Expr& e, size_t first) const {
    std::string out;
    for (size_t i = first; i < e.args.size(); ++i) out += " " + expr(*e.args[i]);
    return out;
  }

  void stmt(const Stmt& s, int indent, std::string& out) const {
    const std::string pad(static_cast<size_t>(indent) * 2, ' ');
    switch (s.kind) {
      case StmtKind::kLet:
        out += pad + "let " + s.name + " = " + expr(*s.value) + "  " + at(s.loc) + "\n";
        return;
      case StmtKind::kRegion:
        out += pad + "region q in " + expr(*s.value) + " : k in " + expr(*s.key_set) + "  " +
               at(s.loc) + "\n";
        return;
      case StmtKind::kFor:
        out += pad + "for " + s.name + " in " + expr(*s.value) + "  " + at(s.loc) + "\n";
        block(s.body, indent + 1, out);
        return;
      case StmtKind::kIf:
        out += pad + "if " + expr(*s.value) + "  " + at(s.loc) + "\n";
        block(s.body, indent + 1, out);
        if (s.has_else) {
          out += pad + "else\n";
          block(s.else_body, indent + 1, out);
        }
        return;
      case StmtKind::kRequire:
        out += pad + "require " + expr(*s.value) + "  " + at(s.loc) + "\n";
        return;
    }
  }

  bool show_types_;
};

}  // namespace

std::string print_ast(const MaskDecl& mask) {
  std::string out =
      "mask " + mask.name + "(" + ir::param_list(mask.params) + ")  " + at(mask.loc) + "\n";
  AstPrinter(mask.checked).block(mask.body, 1, out);
  return out;
}

}  // namespace cm::lang
