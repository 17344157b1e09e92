// Pass `normalize` (see normalize.h).
#include "passes/normalize.h"

#include "passes/diagnostic.h"
#include "passes/fold.h"

#include <stdexcept>

namespace cm::passes {

using ir::ExprId;
using ir::KeyTerm;
using ir::kNone;
using ir::Op;
using ir::SetId;
using ir::SetOp;

namespace {

constexpr size_t kMaxTerms = 4096;
// Stand-ins for ±infinity in complements; far outside any int32 token index.
constexpr int64_t kFar = int64_t{1} << 40;

struct NormalizeError {
  ir::SourceLoc loc;
  std::string message;
};

class Normalizer {
 public:
  explicit Normalizer(ir::Program& p) : p_(p), e_(p.exprs) {}

  std::vector<KeyTerm> terms(SetId id) {
    const ir::SetNode s = p_.sets[static_cast<size_t>(id)];
    loc_ = s.loc;
    switch (s.op) {
      case SetOp::kEmpty:
        return {};
      case SetOp::kInterval:
        return {KeyTerm{{}, s.lo, s.hi, kNone, false}};
      case SetOp::kSegmentUnion:
        return {segment_union(s.param)};
      case SetOp::kGrid:
        return {neighbourhood(s.grid)};
      case SetOp::kUnion: {
        std::vector<KeyTerm> out = terms(s.a);
        std::vector<KeyTerm> b = terms(s.b);
        out.insert(out.end(), b.begin(), b.end());
        return limit(std::move(out), s.loc);
      }
      case SetOp::kSelect: {
        std::vector<KeyTerm> a = terms(s.a);
        std::vector<KeyTerm> b = terms(s.b);
        loc_ = s.loc;
        std::vector<KeyTerm> out = guard(std::move(a), s.cond, true);
        b = guard(std::move(b), s.cond, false);
        out.insert(out.end(), b.begin(), b.end());
        return limit(std::move(out), s.loc);
      }
      case SetOp::kIntersect: {
        std::vector<KeyTerm> a = terms(s.a);
        std::vector<KeyTerm> b = terms(s.b);
        loc_ = s.loc;
        return limit(intersect(a, b), s.loc);
      }
      case SetOp::kDiff: {
        std::vector<KeyTerm> out = terms(s.a);
        std::vector<KeyTerm> bs = terms(s.b);
        loc_ = s.loc;
        for (const KeyTerm& b : bs) out = limit(subtract(std::move(out), b, s.loc), s.loc);
        return out;
      }
    }
    return {};
  }

 private:
  ExprId c(int64_t v) { return e_.constant(v, loc_); }
  ExprId add(ExprId a, ExprId b) { return make_binary(e_, Op::kAdd, a, b, loc_); }
  ExprId sub(ExprId a, ExprId b) { return make_binary(e_, Op::kSub, a, b, loc_); }
  ExprId mul(ExprId a, ExprId b) { return make_binary(e_, Op::kMul, a, b, loc_); }
  ExprId div(ExprId a, ExprId b) { return make_binary(e_, Op::kDiv, a, b, loc_); }
  ExprId mod(ExprId a, ExprId b) { return make_binary(e_, Op::kMod, a, b, loc_); }
  ExprId min(ExprId a, ExprId b) { return make_binary(e_, Op::kMin, a, b, loc_); }
  ExprId max(ExprId a, ExprId b) { return make_binary(e_, Op::kMax, a, b, loc_); }
  ExprId lt(ExprId a, ExprId b) { return make_binary(e_, Op::kLt, a, b, loc_); }
  ExprId land(ExprId a, ExprId b) { return make_binary(e_, Op::kAnd, a, b, loc_); }
  ExprId select(ExprId cond, ExprId a, ExprId b) { return make_select(e_, cond, a, b, loc_); }

  int32_t fresh_slot(const std::string& name) {
    p_.slot_names.push_back(name);
    return static_cast<int32_t>(p_.slot_names.size() - 1);
  }

  std::vector<KeyTerm> limit(std::vector<KeyTerm> t, ir::SourceLoc loc) {
    if (t.size() > kMaxTerms) {
      throw NormalizeError{loc, "key set too complex: more than " + std::to_string(kMaxTerms) +
                                    " interval terms after normalization"};
    }
    return t;
  }

  KeyTerm segment_union(int32_t param) {
    const int32_t slot = fresh_slot(p_.params[static_cast<size_t>(param)].name + "#");
    const ExprId i = e_.var(slot);
    const ExprId count = e_.add({Op::kSegCount, param, kNone, kNone, kNone, 0, {}});
    KeyTerm t;
    t.iterators.push_back({slot, c(0), count});
    t.lo = e_.add({Op::kSegStart, param, i, kNone, kNone, 0, {}});
    t.hi = e_.add({Op::kSegEnd, param, i, kNone, kNone, 0, {}});
    t.monotone = true;
    return t;
  }

  // One iterator per grid line offset (dy; and dt for 3D grids), clipped to the grid; the
  // columns of each line are [x - w, x + w] clipped to the line, w the half-width there. On a
  // strip grid one more iterator walks the strips those columns can reach, each holding one
  // run of them.
  KeyTerm neighbourhood(int32_t index) {
    ir::GridNeighbourhood g = p_.grids[static_cast<size_t>(index)];
    const bool is_2d = e_[g.frames].op == Op::kConst && e_[g.frames].value == 1;
    // Extents below 1 are an error, reported as a division by zero where the grid is used
    // (docs/language.md), as a strip width below 1 is: v / (v > 0) is v, or divides by zero.
    for (ExprId* extent : {&g.frames, &g.rows, &g.cols}) *extent = div(*extent, lt(c(0), *extent));
    const bool ellipse = g.shape == ir::GridShape::kEllipse;
    const bool strips = g.strip != kNone;
    const ExprId plane = mul(g.rows, g.cols);
    const ExprId rel = sub(g.center, g.center_start);
    ExprId on_grid = land(lt(c(-1), rel), lt(rel, mul(plane, g.frames)));
    if (ellipse) {  // a radius of 0 or less makes the ellipse empty (the width below squares it)
      on_grid = land(on_grid, land(lt(c(0), g.rt), land(lt(c(0), g.ry), lt(c(0), g.rx))));
    }
    const ExprId t = div(rel, plane);
    ExprId y = div(mod(rel, plane), g.cols), x = mod(rel, g.cols);
    if (strips) {
      const ir::StripPosition s =
          ir::strip_position(e_, g.rows, g.cols, g.strip, mod(rel, plane), loc_);
      y = s.row;
      x = s.col;
    }
    // Offsets with |d| <= reach can be non-empty: radius for a box, radius - 1 for an ellipse.
    auto reach = [&](ExprId r) { return ellipse ? sub(r, c(1)) : r; };
    // Only grid offsets in [first_key, end_key) hold keys (0 <= k < Nk): a frame, strip or line
    // outside them adds nothing, so each range also stops at them. A grid far larger than the
    // keys then costs no more than the part of it that holds keys.
    const ExprId first_key = sub(c(0), g.start), end_key = sub(e_.var(ir::kSlotNk), g.start);
    // For items k of `step` offsets from `first` on (item k is [first + k step, +step)): the
    // first that reaches first_key, and the end of those that start below end_key.
    auto first_item = [&](ExprId first, ExprId step) { return div(sub(first_key, first), step); };
    auto end_item = [&](ExprId first, ExprId step) {
      return div(add(sub(end_key, first), sub(step, c(1))), step);
    };
    // Offsets d in [-reach, reach] around pos, inside [0, extent), and whose items hold keys.
    auto clipped_range = [&](int32_t slot, ExprId r, ExprId pos, ExprId extent, ExprId first,
                             ExprId step) {
      const ExprId lo =
          max(max(sub(c(0), reach(r)), sub(c(0), pos)), sub(first_item(first, step), pos));
      const ExprId hi = min(add(min(reach(r), sub(sub(extent, c(1)), pos)), c(1)),
                            sub(end_item(first, step), pos));
      return ir::Iterator{slot, lo, select(on_grid, hi, lo)};
    };
    KeyTerm term;
    const int32_t dy_slot = fresh_slot("dy");
    const ExprId dy = e_.var(dy_slot);
    ExprId dt = c(0);
    if (!is_2d) {
      const int32_t dt_slot = fresh_slot("dt");
      dt = e_.var(dt_slot);
      term.iterators.push_back(clipped_range(dt_slot, g.rt, t, g.frames, c(0), plane));
    }
    const ExprId frame_first = mul(add(t, dt), plane);  // the key frame's first offset
    ExprId line_first = frame_first, line_step = g.cols;
    ExprId x0 = kNone, strip_cols = kNone;  // the key strip's first column and width
    if (strips) {
      const int32_t strip_slot = fresh_slot("strip");
      // Strips are strip * rows offsets long but the last, narrower one: the first item that
      // reaches first_key by that length is a safe start.
      const ExprId strip_len = mul(g.strip, g.rows);
      const ExprId lo =
          max(div(max(c(0), sub(x, reach(g.rx))), g.strip), first_item(frame_first, strip_len));
      const ExprId hi = min(add(div(min(sub(g.cols, c(1)), add(x, reach(g.rx))), g.strip), c(1)),
                            end_item(frame_first, strip_len));
      term.iterators.push_back(ir::Iterator{strip_slot, lo, select(on_grid, hi, lo)});
      x0 = mul(e_.var(strip_slot), g.strip);
      strip_cols = min(g.strip, sub(g.cols, x0));
      line_first = add(frame_first, mul(x0, g.rows));
      line_step = strip_cols;
    }
    term.iterators.push_back(clipped_range(dy_slot, g.ry, y, g.rows, line_first, line_step));
    ExprId w = g.rx;
    if (ellipse) {
      const ExprId ryrx = mul(g.ry, g.rx), rtrx = mul(g.rt, g.rx), rtry = mul(g.rt, g.ry);
      const ExprId all = mul(mul(g.rt, ryrx), mul(g.rt, ryrx));
      const ExprId budget =
          sub(sub(all, mul(mul(dt, dt), mul(ryrx, ryrx))), mul(mul(dy, dy), mul(rtrx, rtrx)));
      // Clamped so that the unused branch of the select below stays defined (ry = 0 or a
      // negative budget).
      const ExprId ratio = div(sub(budget, c(1)), max(c(1), mul(rtry, rtry)));
      const ExprId width = make_unary(e_, Op::kIsqrt, max(c(0), ratio), loc_);
      w = select(lt(c(0), budget), width, c(-1));
    }
    if (strips) {
      // The key row's run in the strip: token `base` holds column x0.
      const ExprId frame_base = add(g.start, mul(add(t, dt), plane));
      const ExprId base = add(add(frame_base, mul(x0, g.rows)), mul(add(y, dy), strip_cols));
      term.lo = add(base, sub(max(x0, sub(x, w)), x0));
      term.hi = add(base, sub(min(add(x0, strip_cols), add(add(x, w), c(1))), x0));
    } else {
      const ExprId line = add(mul(add(t, dt), g.rows), add(y, dy));
      const ExprId base = add(g.start, mul(line, g.cols));
      term.lo = add(base, max(c(0), sub(x, w)));
      term.hi = add(base, min(g.cols, add(add(x, w), c(1))));
    }
    term.grid = index;
    term.monotone = is_2d && !strips;
    return term;
  }

  std::vector<KeyTerm> guard(std::vector<KeyTerm> ts, ExprId cond, bool keep_when) {
    for (KeyTerm& t : ts) {
      ExprId& lo = t.iterators.empty() ? t.lo : t.iterators.front().lo;
      ExprId& hi = t.iterators.empty() ? t.hi : t.iterators.front().hi;
      hi = keep_when ? select(cond, hi, lo) : select(cond, lo, hi);
      t.grid = kNone;  // a formula knows nothing of the condition
    }
    return ts;
  }

  // Renames b's iterators if a already uses their slots (a set used twice through a let).
  KeyTerm rename_clashes(const KeyTerm& a, KeyTerm b) {
    for (ir::Iterator& it : b.iterators) {
      bool clash = false;
      for (const ir::Iterator& other : a.iterators) clash |= other.slot == it.slot;
      if (!clash) continue;
      const int32_t slot = fresh_slot(p_.slot_names[static_cast<size_t>(it.slot)] + "'");
      const ExprId v = e_.var(slot);
      for (ir::Iterator& later : b.iterators) {
        later.lo = substitute(e_, later.lo, it.slot, v);
        later.hi = substitute(e_, later.hi, it.slot, v);
      }
      b.lo = substitute(e_, b.lo, it.slot, v);
      b.hi = substitute(e_, b.hi, it.slot, v);
      it.slot = slot;
    }
    return b;
  }

  KeyTerm intersect_terms(const KeyTerm& a, const KeyTerm& b_in) {
    const KeyTerm b = rename_clashes(a, b_in);
    KeyTerm t;
    t.iterators = a.iterators;
    t.iterators.insert(t.iterators.end(), b.iterators.begin(), b.iterators.end());
    t.lo = max(a.lo, b.lo);
    t.hi = min(a.hi, b.hi);
    t.monotone = t.iterators.size() == 1 && (a.iterators.empty() ? b.monotone : a.monotone);
    return t;
  }

  std::vector<KeyTerm> intersect(const std::vector<KeyTerm>& as, const std::vector<KeyTerm>& bs) {
    std::vector<KeyTerm> out;
    for (const KeyTerm& a : as) {
      for (const KeyTerm& b : bs) out.push_back(intersect_terms(a, b));
    }
    return out;
  }

  // The complement of b as a union of terms.
  std::vector<KeyTerm> complement(const KeyTerm& b, ir::SourceLoc loc) {
    if (b.iterators.empty()) {
      return {KeyTerm{{}, c(-kFar), b.lo, kNone, false}, KeyTerm{{}, b.hi, c(kFar), kNone, false}};
    }
    if (b.iterators.size() != 1 || !b.monotone) {
      throw NormalizeError{loc,
                           "cannot subtract this key set: only intervals, segment lists, 2D "
                           "neighbourhoods and their intersections with intervals can be "
                           "subtracted"};
    }
    const ir::Iterator it = b.iterators.front();
    const ExprId non_empty = lt(it.lo, it.hi);
    auto at = [&](ExprId e, ExprId value) { return substitute(e_, e, it.slot, value); };
    const ExprId last = sub(it.hi, c(1));
    KeyTerm before{{}, c(-kFar), select(non_empty, at(b.lo, it.lo), c(kFar)), kNone, false};
    KeyTerm after{{}, select(non_empty, at(b.hi, last), c(kFar)), c(kFar), kNone, false};
    const int32_t slot = fresh_slot(p_.slot_names[static_cast<size_t>(it.slot)] + "'");
    const ExprId j = e_.var(slot);
    KeyTerm gaps{
        {ir::Iterator{slot, it.lo, last}}, at(b.hi, j), at(b.lo, add(j, c(1))), kNone, true};
    return {before, gaps, after};
  }

  std::vector<KeyTerm> subtract(std::vector<KeyTerm> as, const KeyTerm& b, ir::SourceLoc loc) {
    return intersect(as, complement(b, loc));
  }

  ir::Program& p_;
  ir::ExprPool& e_;
  ir::SourceLoc loc_;  // position given to the expressions built for the current set node
};

}  // namespace

bool normalize(ir::Program& program, std::vector<Diagnostic>& diagnostics) {
  Normalizer normalizer(program);
  try {
    for (ir::Region& r : program.regions) {
      r.queries = normalizer.terms(r.query_set);
      r.keys = normalizer.terms(r.key_set);
    }
  } catch (const NormalizeError& e) {
    diagnostics.push_back(make_diagnostic(program, e.loc, e.message));
    return false;
  }
  program.normalized = true;
  return true;
}

}  // namespace cm::passes
