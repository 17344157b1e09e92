// Row evaluation (see rows.h).
#include "specialize/rows.h"

#include "passes/diagnostic.h"
#include "specialize/affine.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace cm {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

struct Emitted {
  int32_t q, lo, hi;
};

// Bounds lo(q) = lo_slope*q + lo_offset, hi(q) likewise, for the rows of one affine piece,
// which ends before row `end`.
struct RowPiece {
  int64_t end;
  int64_t lo_slope, lo_offset, hi_slope, hi_offset;
};

// normalize() for intervals whose first `ordered` ones are sorted and disjoint, and the next
// is not.
[[gnu::noinline]] size_t normalize_from(Interval* data, size_t count, size_t ordered) {
  if (count < 16) {  // rows usually hold a handful of intervals
    for (size_t i = ordered; i < count; ++i) {
      const Interval x = data[i];
      size_t j = i;
      for (; j > 0 && data[j - 1].lo > x.lo; --j) data[j] = data[j - 1];
      data[j] = x;
    }
  } else {
    std::sort(data, data + count, [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  }
  size_t last = 0;
  for (size_t i = 1; i < count; ++i) {
    if (data[i].lo <= data[last].hi) {
      data[last].hi = std::max(data[last].hi, data[i].hi);
    } else {
      data[++last] = data[i];
    }
  }
  return count == 0 ? 0 : last + 1;
}

// Sorts the `count` intervals at `data` by lo and merges overlapping or adjacent ones, in
// place; returns how many remain.
inline size_t normalize(Interval* data, size_t count) {
  size_t ordered = 1;  // rows usually arrive sorted and disjoint already
  while (ordered < count && data[ordered - 1].hi < data[ordered].lo) ++ordered;
  return ordered >= count ? count : normalize_from(data, count, ordered);
}

// Collects emitted intervals into sorted, merged CSR rows. Rows that arrive in order (the usual
// case) go straight into the CSR; the first row out of order moves everything to a list that
// is counting-sorted by row at the end.
class RowLister {
 public:
  RowLister(int32_t nq, int32_t nk) : nq_(nq), nk_(nk) {
    rows_.nq = nq;
    rows_.nk = nk;
    rows_.offsets.reserve(static_cast<size_t>(nq) + 1);
    rows_.offsets.push_back(0);
    rows_.intervals.reserve(static_cast<size_t>(nq));  // most masks list about one per row
  }

  [[gnu::always_inline]] void add(int32_t q, int64_t lo, int64_t hi) {
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, nk_);
    if (lo >= hi) return;
    const Interval iv{static_cast<int32_t>(lo), static_cast<int32_t>(hi)};
    if (ordered_ && q < open_) spill();
    if (!ordered_) {
      unordered_.push_back({q, iv.lo, iv.hi});
      return;
    }
    if (q > open_) close_rows_before(q);
    rows_.intervals.push_back(iv);
  }

  RowIntervals finish() {
    if (ordered_) {
      close_rows_before(nq_);
      return std::move(rows_);
    }
    // Counting sort by row straight into the CSR, then each row sorted and merged in place
    // while the rows are compacted.
    std::vector<int64_t>& offsets = rows_.offsets;
    offsets.assign(static_cast<size_t>(nq_) + 1, 0);
    for (const Emitted& e : unordered_) ++offsets[static_cast<size_t>(e.q) + 1];
    for (size_t q = 0; q < static_cast<size_t>(nq_); ++q) offsets[q + 1] += offsets[q];
    std::vector<Interval>& intervals = rows_.intervals;
    intervals.resize(unordered_.size());
    for (const Emitted& e : unordered_) {
      intervals[static_cast<size_t>(offsets[static_cast<size_t>(e.q)]++)] = {e.lo, e.hi};
    }
    // offsets[q] now holds the end of row q; row q starts at the end of row q - 1.
    size_t written = 0, begin = 0;
    Interval* data = intervals.data();
    for (size_t q = 0; q < static_cast<size_t>(nq_); ++q) {
      const auto end = static_cast<size_t>(offsets[q]);
      offsets[q] = static_cast<int64_t>(written);
      if (end - begin == 1) {  // the common single interval
        data[written++] = data[begin];
      } else if (end > begin) {
        if (written != begin) std::copy(data + begin, data + end, data + written);
        written += normalize(data + written, end - begin);
      }
      begin = end;
    }
    offsets[static_cast<size_t>(nq_)] = static_cast<int64_t>(written);
    intervals.resize(written);
    return std::move(rows_);
  }

 private:
  // Sorts and merges the open row (the intervals after offsets[open_]), then closes it and the
  // empty rows after it, up to row q.
  [[gnu::always_inline]] void close_rows_before(int32_t q) {
    const auto first = static_cast<size_t>(rows_.offsets.back());
    const size_t count = rows_.intervals.size() - first;
    if (count > 1) {
      const size_t kept = normalize(rows_.intervals.data() + first, count);
      if (kept != count) rows_.intervals.resize(first + kept);
    }
    const auto end = static_cast<int64_t>(rows_.intervals.size());
    if (q == open_ + 1) {
      rows_.offsets.push_back(end);
    } else {
      rows_.offsets.resize(static_cast<size_t>(q) + 1, end);
    }
    open_ = q;
  }

  void spill() {
    // Rows listed so far are usually a fraction of the total: leave room for the rest.
    unordered_.reserve(std::max(rows_.intervals.size(), rows_.intervals.capacity()) * 2);
    for (int32_t q = 0; q <= open_; ++q) {
      const int64_t end = q < open_ ? rows_.offsets[static_cast<size_t>(q) + 1]
                                    : static_cast<int64_t>(rows_.intervals.size());
      for (int64_t i = rows_.offsets[static_cast<size_t>(q)]; i < end; ++i) {
        const Interval& iv = rows_.intervals[static_cast<size_t>(i)];
        unordered_.push_back({q, iv.lo, iv.hi});
      }
    }
    rows_.intervals.clear();
    ordered_ = false;
  }

  int32_t nq_, nk_;
  RowIntervals rows_;
  int32_t open_ = 0;  // the row being listed: its intervals follow offsets[open_]
  bool ordered_ = true;
  std::vector<Emitted> unordered_;
};

class RowEvaluator {
 public:
  RowEvaluator(const ir::Program& program, const Bindings& bindings, const Dims& dims)
      : program_(program),
        machine_(program, bindings),
        bindings_(bindings),
        nq_(static_cast<int32_t>(dims.nq)),
        nk_(static_cast<int32_t>(dims.nk)),
        lister_(nq_, nk_) {}

  InstanceRows run(const ProgramCode& code, int32_t b, int32_t h) {
    machine_.set_slot(ir::kSlotB, b);
    machine_.set_slot(ir::kSlotH, h);
    machine_.set_slot(ir::kSlotNq, nq_);
    machine_.set_slot(ir::kSlotNk, nk_);
    for (const RequirementCode& r : code.requirements) {
      walk_loops(r.loops, 0, [&] { check(r); });
    }
    for (const RegionCode& r : code.regions) {
      walk_loops(r.loops, 0, [&] { evaluate_binding(r); });
    }
    return assemble();
  }

 private:
  // Calls leaf() for every binding of the loop variables.
  template <class Leaf>
  void walk_loops(const std::vector<ir::Loop>& loops, size_t depth, Leaf&& leaf) {
    if (depth == loops.size()) {
      leaf();
      return;
    }
    const ir::Loop& loop = loops[depth];
    const size_t count = bindings_.segments[static_cast<size_t>(loop.segments_param)].size();
    for (size_t i = 0; i < count; ++i) {
      machine_.set_slot(loop.slot, static_cast<int64_t>(i));
      walk_loops(loops, depth + 1, leaf);
    }
  }

  // Throws cm::Error naming the statement and the bindings where its condition is false.
  void check(const RequirementCode& r) {
    machine_.run(r.block);
    if (machine_.result(r.cond) != 0) return;
    std::string at;
    if (program_.uses_batch) at += machine_.slot_text(ir::kSlotB);
    if (program_.uses_head) at += machine_.slot_text(ir::kSlotH);
    for (const ir::Loop& loop : r.loops) {  // each loop variable with its segment's range
      const Segments& list = bindings_.segments[static_cast<size_t>(loop.segments_param)];
      const auto i = static_cast<size_t>(machine_.slot(loop.slot));
      at += machine_.slot_text(loop.slot) + ": [" + std::to_string(list.starts[i]) + ", " +
            std::to_string(list.ends[i]) + ")";
    }
    throw Error(passes::located(program_, r.loc,
                                "requirement not met: '" +
                                    passes::source_between(program_, r.loc, r.end) + "'" +
                                    (at.empty() ? "" : " (at" + at + ")")));
  }

  // Calls f(lo, hi) for every assignment of the term's iterators.
  template <class F>
  void enumerate(const TermCode& t, size_t level, F&& f) {
    if (level == t.iterator_slots.size()) {
      f(machine_.result(t.lo), machine_.result(t.hi));
      return;
    }
    const int64_t lo = machine_.result(t.iterator_lo[level]);
    const int64_t hi = machine_.result(t.iterator_hi[level]);
    for (int64_t v = lo; v < hi; ++v) {
      machine_.set_slot(t.iterator_slots[level], v);
      machine_.run(t.levels[level]);
      enumerate(t, level + 1, f);
    }
  }

  // A GridFormula for a neighbourhood term evaluated over query rows [q_lo, q_hi), or -1 when
  // its grid leaves [0, nk) or its radii do not suit the closed form.
  int32_t make_formula(const RegionCode& r, int32_t grid, int32_t q_lo, int32_t q_hi) {
    const std::vector<int32_t>& regs = r.grid_params[static_cast<size_t>(grid)];
    int64_t v[9];
    for (size_t i = 0; i < 9; ++i) v[i] = machine_.result(regs[i]);
    const int64_t start = v[0], center_start = v[1], frames = v[2], rows = v[3], cols = v[4];
    const int64_t strip = v[5], rt = v[6], ry = v[7], rx = v[8];
    const bool ellipse = program_.grids[static_cast<size_t>(grid)].shape == ir::GridShape::kEllipse;
    const int64_t min_radius = ellipse ? 1 : 0;
    const bool radii_ok = rt >= min_radius && ry >= min_radius && rx >= min_radius &&
                          rt <= desc::kMaxGridRadius && ry <= desc::kMaxGridRadius &&
                          rx <= desc::kMaxGridRadius;
    const bool extent_ok = frames >= 1 && rows >= 1 && cols >= 1 && frames <= kInt32Max &&
                           rows <= kInt32Max && cols <= kInt32Max &&
                           frames * rows <= kInt32Max / cols && strip >= 1 && strip <= cols;
    if (!radii_ok || !extent_ok || start < 0 || center_start < 0 ||
        start + frames * rows * cols > nk_ || center_start > kInt32Max) {
      return -1;
    }
    desc::GridFormula f{};
    f.q_lo = q_lo;
    f.q_hi = q_hi;
    f.start = static_cast<int32_t>(start);
    f.center_start = static_cast<int32_t>(center_start);
    f.frames = static_cast<int32_t>(frames);
    f.rows = static_cast<int32_t>(rows);
    f.cols = static_cast<int32_t>(cols);
    f.strip = static_cast<int32_t>(strip);
    f.shape = ellipse ? desc::kShapeEllipse : desc::kShapeBox;
    f.rt = static_cast<int32_t>(rt);
    f.ry = static_cast<int32_t>(ry);
    f.rx = static_cast<int32_t>(rx);
    formulas_.push_back(f);
    return static_cast<int32_t>(formulas_.size() - 1);
  }

  void evaluate_binding(const RegionCode& r) {
    machine_.run(r.outer);
    std::vector<Interval> query_rows;
    for (const TermCode& t : r.queries) {
      enumerate(t, 0, [&](int64_t lo, int64_t hi) {
        lo = std::max<int64_t>(lo, 0);
        hi = std::min<int64_t>(hi, nq_);
        if (lo < hi) query_rows.push_back({static_cast<int32_t>(lo), static_cast<int32_t>(hi)});
      });
    }
    std::vector<const TermCode*> interpreted;
    for (const Interval& rows : query_rows) {
      interpreted.clear();
      affine_pieces_.clear();
      affine_terms_.assign(1, 0);
      std::optional<AffineRows> affine;
      for (const TermCode& term : r.keys) {
        const int32_t formula =
            term.grid != ir::kNone ? make_formula(r, term.grid, rows.lo, rows.hi) : -1;
        if (formula >= 0) {
          assign_formula(formula);
          continue;
        }
        if (term.iterator_slots.empty()) {
          if (!affine) affine.emplace(r.row, machine_, machine_.registers(), rows.lo, rows.hi);
          // Copied: form() reuses one scratch for every constant it returns.
          const Affine* lo_form = affine->form(term.lo);
          const Affine lo = lo_form != nullptr ? *lo_form : Affine{};
          const Affine* hi = lo_form != nullptr ? affine->form(term.hi) : nullptr;
          if (hi != nullptr) {
            add_affine_term(lo, *hi, rows.hi);
            continue;
          }
        }
        interpreted.push_back(&term);
      }
      // Row by row, so that rows usually arrive in order and need no sorting; in steps over
      // which every affine term stays on one piece (`active` holds those pieces).
      std::vector<size_t>& piece = affine_cursor_;
      piece.assign(affine_terms_.begin(), affine_terms_.end() - 1);
      std::vector<RowPiece>& active = active_pieces_;
      for (int32_t q = rows.lo; q < rows.hi;) {
        int64_t step_end = rows.hi;
        active.clear();
        for (size_t& at : piece) {
          while (affine_pieces_[at].end <= q) ++at;
          active.push_back(affine_pieces_[at]);
          step_end = std::min(step_end, affine_pieces_[at].end);
        }
        for (; q < step_end; ++q) {
          for (const RowPiece& p : active) {
            emit(q, p.lo_slope * q + p.lo_offset, p.hi_slope * q + p.hi_offset);
          }
          if (interpreted.empty()) continue;
          machine_.set_slot(ir::kSlotQ, q);
          machine_.run(r.row);
          for (const TermCode* term : interpreted) {
            enumerate(*term, 0, [&](int64_t lo, int64_t hi) { emit(q, lo, hi); });
          }
        }
      }
    }
  }

  [[gnu::always_inline]] void emit(int32_t q, int64_t lo, int64_t hi) { lister_.add(q, lo, hi); }

  // Records the pieces of a term whose bounds are piecewise affine in q, so its rows are
  // emitted without interpretation.
  void add_affine_term(const Affine& lo, const Affine& hi, int64_t end) {
    refine<2>({&lo, &hi}, end, [&](int64_t, int64_t e, const auto& p) {
      affine_pieces_.push_back({e, p[0].slope, p[0].offset, p[1].slope, p[1].offset});
    });
    affine_terms_.push_back(affine_pieces_.size());
  }

  // A neighbourhood term with a closed form: each row whose centre lies on the grid carries
  // the formula instead of its intervals. A row that already carries another formula lists
  // this one's intervals explicitly.
  void assign_formula(int32_t index) {
    const desc::GridFormula& f = formulas_[static_cast<size_t>(index)];
    if (row_formula_.empty()) row_formula_.assign(static_cast<size_t>(nq_), -1);
    const int64_t extent = int64_t{f.frames} * f.rows * f.cols;
    const int64_t first = std::max<int64_t>(f.q_lo, f.center_start);
    const int64_t end = std::min<int64_t>(f.q_hi, f.center_start + extent);
    for (int64_t q = first; q < end; ++q) {
      int32_t& carried = row_formula_[static_cast<size_t>(q)];
      if (carried < 0) {
        carried = index;
        continue;
      }
      desc::for_each_grid_interval(f, static_cast<int32_t>(q), 0, nk_,
                                   [&](int lo, int hi) { emit(static_cast<int32_t>(q), lo, hi); });
    }
  }

  InstanceRows assemble() {
    InstanceRows out;
    if (formulas_.empty()) {
      out.all = lister_.finish();
      return out;
    }
    out.residual = lister_.finish();
    out.formulas = std::move(formulas_);
    out.row_formula = std::move(row_formula_);
    return out;
  }

 private:
  const ir::Program& program_;
  Machine machine_;
  const Bindings& bindings_;
  int32_t nq_, nk_;
  RowLister lister_;
  // The affine key terms of the current query range: term t owns affine_pieces_
  // [affine_terms_[t], affine_terms_[t + 1]); affine_cursor_ walks them row by row.
  std::vector<RowPiece> affine_pieces_;
  std::vector<size_t> affine_terms_;
  std::vector<size_t> affine_cursor_;
  std::vector<RowPiece> active_pieces_;  // per affine term, its piece over the current rows
  std::vector<desc::GridFormula> formulas_;
  std::vector<int32_t> row_formula_;  // nq entries once a formula exists
};

}  // namespace

int64_t RowIntervals::visible_pairs() const {
  int64_t total = 0;
  for (const Interval& i : intervals) total += i.hi - i.lo;
  return total;
}

InstanceRows evaluate_rows(const ir::Program& program, const ProgramCode& code,
                           const Bindings& bindings, const Dims& dims, int32_t b, int32_t h) {
  return RowEvaluator(program, bindings, dims).run(code, b, h);
}

}  // namespace cm
