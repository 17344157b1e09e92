// The abstract syntax tree of a mask program. The parser builds it with a source position on
// every node; the checker fills in the fields marked "checker" (types and what names mean);
// lowering reads the checked tree.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace cm::lang {

using ir::SourceLoc;

// The static types of the language. Grids know their dimension (2D or 3D).
enum class Type : uint8_t {
  kError,  // an expression that already failed to check; suppresses follow-on errors
  kInt,
  kBool,
  kSet,
  kSegment,
  kSegments,
  kIntArray,
  kGrid2,
  kGrid3,
};
const char* type_name(Type type);
// True for types that can stand where a key or query set is expected.
bool is_set_like(Type type);

enum class Operator : uint8_t {
  kNeg,
  kNot,  // unary
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,  // int (kSub is also set difference)
  kUnion,
  kIntersect,  // set
  kAnd,
  kOr,  // bool
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,  // int x int -> bool
};
const char* operator_text(Operator op);

enum class ExprKind : uint8_t {
  kIntLiteral,  // value
  kName,        // name
  kUnary,       // op args[0]
  kBinary,      // args[0] op args[1]
  kInterval,    // args = {lo, hi}; lo_open / hi_open say which ends are excluded
  kCall,        // name(args...)
  kField,       // args[0].name
  kMethod,      // args[0].name(args[1...])
  kIndex,       // args[0][args[1]]
  kIf,          // if args[0] then args[1] else args[2]
  kLet,         // let name = args[0] in args[1]
};

// What a kName expression refers to (checker).
enum class NameKind : uint8_t {
  kUnresolved,
  kParam,    // Expr::param
  kLet,      // Expr::decl: the let statement or let expression
  kLoopVar,  // Expr::decl: the for statement
  kQ,
  kB,
  kH,
  kNq,
  kNk,
  kDiag,
  kAll,
  kNone,
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kIntLiteral;
  SourceLoc loc;
  int64_t value = 0;
  std::string name;
  Operator op = Operator::kAdd;
  bool lo_open = false, hi_open = false;
  std::vector<ExprPtr> args;
  int height = 1;  // 1 + the tallest operand; the parser caps it so later passes recurse safely

  // Checker.
  Type type = Type::kError;
  bool depends_on_q = false;  // the value changes with the query row
  NameKind name_kind = NameKind::kUnresolved;
  int param = -1;
  const void* decl = nullptr;
};

using Param = ir::ParamDecl;

enum class StmtKind : uint8_t { kLet, kRegion, kFor, kIf, kRequire };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

struct Stmt {
  StmtKind kind = StmtKind::kLet;
  SourceLoc loc;
  SourceLoc end;     // kRequire: just past the condition
  std::string name;  // kLet: the bound name; kFor: the loop variable
  SourceLoc name_loc;
  // kLet: the value; kRegion: the query set; kFor: the segments; kIf, kRequire: the condition
  ExprPtr value;
  ExprPtr key_set;                 // kRegion
  std::vector<StmtPtr> body;       // kFor, kIf
  std::vector<StmtPtr> else_body;  // kIf
  bool has_else = false;
};

struct MaskDecl {
  std::string name;
  SourceLoc loc;
  std::vector<Param> params;
  std::vector<StmtPtr> body;
  bool checked = false;  // set by the checker; the printer then shows types
};

// Text form of the tree, one node per line, for --dump-after=parse|check and tests.
std::string print_ast(const MaskDecl& mask);

}  // namespace cm::lang
