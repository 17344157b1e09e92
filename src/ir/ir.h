// The mask IR: what the front end lowers a checked program to, and what the analysis passes
// rewrite. Two levels live here:
//   * integer expressions (Expr, in an ExprPool), pure functions of variable slots and
//     parameters;
//   * key sets (SetNode trees), which the `normalize` pass rewrites into a union of interval
//     terms (Region::keys).
//
// Semantics, stated once:
//   * Every interval is half-open [lo, hi); hi <= lo means empty (never an error).
//   * Division and modulo are floor division and floor modulo (Python semantics); division by
//     zero is an evaluation error reported at specialize time with the source position.
//   * Comparisons and logical operators yield 0 or 1; a condition is true when non-zero.
//   * Key sets are clipped to [0, Nk) and query sets to [0, Nq) when evaluated.
//   * A mask is the union of its regions: key k is visible to query q if some region contains
//     q in its query set and k in its key set evaluated at q.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cm::ir {

struct SourceLoc {
  int line = 0;
  int column = 0;
};

using ExprId = int32_t;
using SetId = int32_t;
inline constexpr int32_t kNone = -1;

// Fixed variable slots. Loop and iterator variables take slots from kFirstFreeSlot on.
enum Slot : int32_t {
  kSlotQ = 0,   // the query row
  kSlotB = 1,   // batch index
  kSlotH = 2,   // head index
  kSlotNq = 3,  // query length
  kSlotNk = 4,  // key length
  kFirstFreeSlot = 5,
};

enum class Op : uint8_t {
  kConst,     // value
  kVar,       // index = slot
  kParam,     // index = int parameter
  kArrayAt,   // index = int[] parameter, a = element index (out of range is an error)
  kArrayLen,  // index = int[] parameter
  kSegStart,  // index = segments/segment parameter, a = segment number
  kSegEnd,    // index = segments/segment parameter, a = segment number
  kSegCount,  // index = segments/segment parameter
  kAdd,
  kSub,
  kMul,
  kDiv,  // floor division
  kMod,  // floor modulo
  kMin,
  kMax,
  kNeg,
  kIsqrt,  // floor(sqrt(a)) for a >= 0; negative a is an error
  kLt,
  kLe,
  kEq,
  kNe,
  kAnd,
  kOr,
  kNot,
  kSelect,  // a ? b : c
};

struct Expr {
  Op op = Op::kConst;
  int32_t index = kNone;  // slot or parameter index, per op
  ExprId a = kNone, b = kNone, c = kNone;
  int64_t value = 0;
  SourceLoc loc;  // where the expression came from, for evaluation errors
};

// Arena of expressions. Ids are stable indices; nodes are immutable once added.
struct ExprPool {
  std::vector<Expr> nodes;

  ExprId add(const Expr& e) {
    nodes.push_back(e);
    return static_cast<ExprId>(nodes.size() - 1);
  }
  const Expr& operator[](ExprId id) const { return nodes[static_cast<size_t>(id)]; }
  ExprId constant(int64_t v, SourceLoc loc = {}) {
    return add({Op::kConst, kNone, kNone, kNone, kNone, v, loc});
  }
  ExprId var(int32_t slot, SourceLoc loc = {}) {
    return add({Op::kVar, slot, kNone, kNone, kNone, 0, loc});
  }
  ExprId unary(Op op, ExprId a, SourceLoc loc = {}) {
    return add({op, kNone, a, kNone, kNone, 0, loc});
  }
  ExprId binary(Op op, ExprId a, ExprId b, SourceLoc loc = {}) {
    return add({op, kNone, a, b, kNone, 0, loc});
  }
  ExprId select(ExprId cond, ExprId a, ExprId b, SourceLoc loc = {}) {
    return add({Op::kSelect, kNone, cond, a, b, 0, loc});
  }
};

enum class GridShape : int32_t { kBox = 0, kEllipse = 1 };  // values match desc::GridShape

// Row and column of the token at offset `p` into a frame of a strip grid (rows x cols, strips
// of `strip` columns; desc::GridFormula gives the order), as expressions.
struct StripPosition {
  ExprId row, col;
};
StripPosition strip_position(ExprPool& x, ExprId rows, ExprId cols, ExprId strip, ExprId p,
                             SourceLoc loc);

// A neighbourhood of `center` on a grid of frames x rows x cols tokens starting at token
// `start`, laid out row-major or in strips (desc::GridFormula): the grid tokens (t', y', x') with
//   box:     |t'-t| <= rt, |y'-y| <= ry, |x'-x| <= rx
//   ellipse: (t'-t)²/rt² + (y'-y)²/ry² + (x'-x)²/rx² < 1   (2D grids: frames = 1, rt = 1)
// where (t, y, x) is the grid position of `center` on the grid starting at `center_start`. A
// centre off its grid gives the empty set.
struct GridNeighbourhood {
  ExprId start = kNone, center_start = kNone;
  ExprId frames = kNone, rows = kNone, cols = kNone;
  ExprId strip = kNone;  // strip width in [1, cols] (desc::GridFormula's order); kNone: row-major
  ExprId center = kNone;
  GridShape shape = GridShape::kEllipse;
  ExprId rt = kNone, ry = kNone, rx = kNone;
};

enum class SetOp : uint8_t {
  kEmpty,
  kInterval,      // [lo, hi)
  kUnion,         // a | b
  kIntersect,     // a & b
  kDiff,          // a - b
  kSelect,        // cond ? a : b
  kGrid,          // grids[grid]
  kSegmentUnion,  // the union of the segments of segments parameter `param`
};

struct SetNode {
  SetOp op = SetOp::kEmpty;
  SetId a = kNone, b = kNone;
  ExprId lo = kNone, hi = kNone, cond = kNone;
  int32_t grid = kNone;
  int32_t param = kNone;
  SourceLoc loc;
};

// An integer variable ranging over [lo, hi) (a grid neighbourhood's row or frame offset).
struct Iterator {
  int32_t slot = kNone;
  ExprId lo = kNone, hi = kNone;
};

// One term of a key set in normal form: for every assignment of the iterators, the keys
// [lo, hi). `grid` is the neighbourhood this term came from when the term is exactly that
// neighbourhood, unmodified (the kernel may then evaluate it as a formula), else kNone.
struct KeyTerm {
  std::vector<Iterator> iterators;
  ExprId lo = kNone, hi = kNone;
  int32_t grid = kNone;
  // With exactly one iterator: lo and hi never decrease as the iterator grows, so the gaps
  // between consecutive members are the complement (what set difference needs).
  bool monotone = false;
};

// `for slot in segments_param { ... }`: slot takes the segment numbers 0 .. count-1.
struct Loop {
  int32_t slot = kNone;
  int32_t segments_param = kNone;
};

struct Region {
  std::vector<Loop> loops;  // outermost first
  SetId query_set = kNone;  // must not depend on q
  SetId key_set = kNone;
  // Filled by `normalize`: the same sets as unions of interval terms.
  std::vector<KeyTerm> queries;  // terms that do not depend on q
  std::vector<KeyTerm> keys;
  SourceLoc loc;
};

// `require cond`: specialize fails, naming this statement, for any loop binding and (b, h) where
// cond is false. cond never depends on q; an enclosing `if`'s condition c makes it
// `c ? cond : true`, whose untaken branch raises no evaluation error.
struct Requirement {
  std::vector<Loop> loops;  // outermost first
  ExprId cond = kNone;
  SourceLoc loc, end;  // the statement's source: from `require` to just past the condition
};

enum class ParamType : uint8_t { kInt, kIntArray, kSegment, kSegments };

struct ParamDecl {
  std::string name;
  ParamType type = ParamType::kInt;
  SourceLoc loc;
  // `NAME: int >= min` or `NAME: int[] >= min` (every element): checked when parameters are
  // bound, so that a value the program has no meaning for is an error, not an empty mask.
  std::optional<int64_t> min;
};

struct Program {
  std::string name;
  std::string file;
  std::vector<std::string> source_lines;  // for diagnostics raised after parsing
  std::vector<ParamDecl> params;
  ExprPool exprs;
  std::vector<SetNode> sets;
  std::vector<GridNeighbourhood> grids;
  std::vector<Region> regions;
  std::vector<Requirement> requirements;
  std::vector<std::string> slot_names;  // indexed by slot; includes the fixed slots
  bool normalized = false;
  bool uses_batch = false;  // filled by `classify`: some term depends on b
  bool uses_head = false;   // filled by `classify`: some term depends on h

  SetId add_set(const SetNode& s) {
    sets.push_back(s);
    return static_cast<SetId>(sets.size() - 1);
  }
};

const char* param_type_name(ParamType t);

// A declaration as written in the source: "W: int >= 1".
std::string param_text(const ParamDecl& param);

// The declarations comma-separated, as in a mask's signature: "W: int >= 1, docs: segments".
std::string param_list(const std::vector<ParamDecl>& params);

// Text form of the program, for --dump-after and golden tests.
std::string print(const Program& program);
std::string print_expr(const Program& program, ExprId id);

}  // namespace cm::ir
