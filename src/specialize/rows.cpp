// Row evaluation (see rows.h).
#include "specialize/rows.h"

#include "specialize/affine.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace cm {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

struct Emitted {
  int32_t q, lo, hi, formula;
};

// Sorts intervals by lo and merges overlapping or adjacent ones into `out`.
void merge_into(std::vector<Interval>& scratch, std::vector<Interval>& out) {
  if (scratch.size() < 16) {
    for (size_t i = 1; i < scratch.size(); ++i) {  // rows usually hold a handful of intervals
      const Interval x = scratch[i];
      size_t j = i;
      for (; j > 0 && scratch[j - 1].lo > x.lo; --j) scratch[j] = scratch[j - 1];
      scratch[j] = x;
    }
  } else {
    std::sort(scratch.begin(), scratch.end(),
              [](const Interval& a, const Interval& b) { return a.lo < b.lo; });
  }
  const size_t first = out.size();
  for (const Interval& x : scratch) {
    if (out.size() > first && x.lo <= out.back().hi) {
      out.back().hi = std::max(out.back().hi, x.hi);
    } else {
      out.push_back(x);
    }
  }
}

class RowEvaluator {
 public:
  RowEvaluator(const ir::Program& program, const Bindings& bindings, const Dims& dims,
               bool use_formulas)
      : program_(program),
        machine_(program, bindings),
        bindings_(bindings),
        nq_(static_cast<int32_t>(dims.nq)),
        nk_(static_cast<int32_t>(dims.nk)),
        use_formulas_(use_formulas) {}

  InstanceRows run(const std::vector<RegionCode>& regions, int32_t b, int32_t h) {
    machine_.set_slot(ir::kSlotB, b);
    machine_.set_slot(ir::kSlotH, h);
    machine_.set_slot(ir::kSlotNq, nq_);
    machine_.set_slot(ir::kSlotNk, nk_);
    for (const RegionCode& r : regions) walk_loops(r, 0);
    return assemble();
  }

 private:
  void walk_loops(const RegionCode& r, size_t depth) {
    if (depth == r.loops.size()) {
      evaluate_binding(r);
      return;
    }
    const ir::Loop& loop = r.loops[depth];
    const size_t count = bindings_.segments[static_cast<size_t>(loop.segments_param)].size();
    for (size_t i = 0; i < count; ++i) {
      machine_.set_slot(loop.slot, static_cast<int64_t>(i));
      walk_loops(r, depth + 1);
    }
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
    int64_t v[8];
    for (size_t i = 0; i < 8; ++i) v[i] = machine_.result(regs[i]);
    const int64_t start = v[0], center_start = v[1], frames = v[2], rows = v[3], cols = v[4];
    const int64_t rt = v[5], ry = v[6], rx = v[7];
    const bool ellipse = program_.grids[static_cast<size_t>(grid)].shape == ir::GridShape::kEllipse;
    const int64_t min_radius = ellipse ? 1 : 0;
    const bool radii_ok = rt >= min_radius && ry >= min_radius && rx >= min_radius &&
                          rt <= 1024 && ry <= 1024 && rx <= 1024;
    const bool extent_ok = frames >= 1 && rows >= 1 && cols >= 1 && frames <= kInt32Max &&
                           rows <= kInt32Max && cols <= kInt32Max &&
                           frames * rows <= kInt32Max / cols;
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
    std::vector<int32_t> term_formula(r.keys.size(), -1);
    std::vector<const TermCode*> interpreted;
    for (const Interval& rows : query_rows) {
      interpreted.clear();
      std::optional<AffineRows> affine;
      for (size_t i = 0; i < r.keys.size(); ++i) {
        const TermCode& term = r.keys[i];
        const int32_t grid = term.grid;
        term_formula[i] =
            use_formulas_ && grid != ir::kNone ? make_formula(r, grid, rows.lo, rows.hi) : -1;
        if (term_formula[i] >= 0) {
          emit_formula(formulas_[static_cast<size_t>(term_formula[i])], term_formula[i]);
          continue;
        }
        if (term.iterator_slots.empty()) {
          if (!affine) affine.emplace(r.row, machine_, machine_.registers(), rows.lo, rows.hi);
          // Copied: form() reuses one scratch for every constant it returns.
          const Affine* lo_form = affine->form(term.lo);
          const Affine lo = lo_form != nullptr ? *lo_form : Affine{};
          const Affine* hi = lo_form != nullptr ? affine->form(term.hi) : nullptr;
          if (hi != nullptr) {
            emit_affine(lo, *hi, rows.hi);
            continue;
          }
        }
        interpreted.push_back(&term);
      }
      if (interpreted.empty()) continue;
      for (int32_t q = rows.lo; q < rows.hi; ++q) {
        machine_.set_slot(ir::kSlotQ, q);
        machine_.run(r.row);
        for (const TermCode* term : interpreted) {
          enumerate(*term, 0, [&](int64_t lo, int64_t hi) { emit(q, lo, hi, -1); });
        }
      }
    }
  }

  void emit(int32_t q, int64_t lo, int64_t hi, int32_t formula) {
    lo = std::max<int64_t>(lo, 0);
    hi = std::min<int64_t>(hi, nk_);
    if (lo < hi) emitted_.push_back({q, static_cast<int32_t>(lo), static_cast<int32_t>(hi), formula});
  }

  // Rows of a term whose bounds are piecewise affine in q, without interpretation.
  void emit_affine(const Affine& lo, const Affine& hi, int64_t end) {
    refine<2>({&lo, &hi}, end, [&](int64_t b, int64_t e, const auto& p) {
      for (int64_t q = b; q < e; ++q) {
        emit(static_cast<int32_t>(q), p[0].slope * q + p[0].offset, p[1].slope * q + p[1].offset,
             -1);
      }
    });
  }

  // Rows of a neighbourhood term, straight from its closed-form formula.
  void emit_formula(const desc::GridFormula& f, int32_t formula) {
    for (int32_t q = f.q_lo; q < f.q_hi; ++q) {
      desc::for_each_grid_interval(f, q, 0, nk_, [&](int lo, int hi) { emit(q, lo, hi, formula); });
    }
  }

  InstanceRows assemble() {
    // Counting sort of the emitted intervals by row.
    std::vector<int64_t> start(static_cast<size_t>(nq_) + 1, 0);
    for (const Emitted& e : emitted_) ++start[static_cast<size_t>(e.q) + 1];
    for (size_t q = 0; q < static_cast<size_t>(nq_); ++q) start[q + 1] += start[q];
    std::vector<Emitted> by_row(emitted_.size());
    {
      std::vector<int64_t> next(start.begin(), start.end() - 1);
      for (const Emitted& e : emitted_) by_row[static_cast<size_t>(next[static_cast<size_t>(e.q)]++)] = e;
    }
    InstanceRows out;
    out.all.nq = out.residual.nq = nq_;
    out.all.nk = out.residual.nk = nk_;
    out.all.offsets.assign(1, 0);
    out.all.intervals.reserve(emitted_.size());
    const bool formulas = !formulas_.empty();
    if (formulas) {
      out.formulas = formulas_;
      out.row_formula.assign(static_cast<size_t>(nq_), -1);
      out.residual.offsets.assign(1, 0);
    }
    std::vector<Interval> scratch;
    for (int32_t q = 0; q < nq_; ++q) {
      const auto first = by_row.begin() + start[static_cast<size_t>(q)];
      const auto last = by_row.begin() + start[static_cast<size_t>(q) + 1];
      scratch.clear();
      int32_t formula = -1;
      bool conflict = false;
      for (auto it = first; it != last; ++it) {
        scratch.push_back({it->lo, it->hi});
        if (it->formula >= 0) {
          conflict = conflict || (formula >= 0 && formula != it->formula);
          formula = it->formula;
        }
      }
      merge_into(scratch, out.all.intervals);
      out.all.offsets.push_back(static_cast<int64_t>(out.all.intervals.size()));
      if (!formulas) continue;
      if (conflict) formula = -1;
      out.row_formula[static_cast<size_t>(q)] = formula;
      scratch.clear();
      for (auto it = first; it != last; ++it) {
        if (formula < 0 || it->formula != formula) scratch.push_back({it->lo, it->hi});
      }
      merge_into(scratch, out.residual.intervals);
      out.residual.offsets.push_back(static_cast<int64_t>(out.residual.intervals.size()));
    }
    return out;
  }

 private:
  const ir::Program& program_;
  Machine machine_;
  const Bindings& bindings_;
  int32_t nq_, nk_;
  bool use_formulas_;
  std::vector<Emitted> emitted_;
  std::vector<desc::GridFormula> formulas_;
};

}  // namespace

int64_t RowIntervals::visible_pairs() const {
  int64_t total = 0;
  for (const Interval& i : intervals) total += i.hi - i.lo;
  return total;
}

InstanceRows evaluate_rows(const ir::Program& program, const std::vector<RegionCode>& regions,
                           const Bindings& bindings, const Dims& dims, int32_t b, int32_t h,
                           bool use_formulas) {
  return RowEvaluator(program, bindings, dims, use_formulas).run(regions, b, h);
}

}  // namespace cm
