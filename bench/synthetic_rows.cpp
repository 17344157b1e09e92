// Benchmark inputs for the descriptor builder (see synthetic_rows.h).
#include "synthetic_rows.h"

#include "workload_params.h"

#include <algorithm>
#include <stdexcept>

namespace cm::bench {
namespace {

// Appends rows one by one; adjacent intervals of one row are merged.
class RowsBuilder {
 public:
  explicit RowsBuilder(int64_t n) {
    rows_.nq = rows_.nk = static_cast<int32_t>(n);
    rows_.offsets.reserve(static_cast<size_t>(n) + 1);
    rows_.offsets.push_back(0);
  }
  void add(int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    if (rows_.intervals.size() > static_cast<size_t>(rows_.offsets.back()) &&
        rows_.intervals.back().hi == lo) {
      rows_.intervals.back().hi = static_cast<int32_t>(hi);
      return;
    }
    rows_.intervals.push_back({static_cast<int32_t>(lo), static_cast<int32_t>(hi)});
  }
  void end_row() { rows_.offsets.push_back(static_cast<int64_t>(rows_.intervals.size())); }
  RowIntervals take() { return std::move(rows_); }

 private:
  RowIntervals rows_;
};

RowIntervals segmented(int64_t n, const std::vector<int64_t>& lens,
                       void (*row)(RowsBuilder&, int64_t q, int64_t start, int64_t end, size_t i,
                                   const void* extra),
                       const void* extra) {
  RowsBuilder out(n);
  int64_t start = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    for (int64_t q = start; q < start + lens[i]; ++q) {
      row(out, q, start, start + lens[i], i, extra);
      out.end_row();
    }
    start += lens[i];
  }
  return out.take();
}

InstanceRows clear_rows(int64_t n) {
  const int64_t text = 512, s = clear_side(n, text), r = 16, total = text + s * s;
  desc::GridFormula disk{};
  disk.q_lo = disk.start = disk.center_start = static_cast<int32_t>(text);
  disk.q_hi = static_cast<int32_t>(total);
  disk.frames = disk.rt = 1;
  disk.rows = disk.cols = disk.strip = static_cast<int32_t>(s);
  disk.shape = desc::kShapeEllipse;
  disk.ry = disk.rx = static_cast<int32_t>(r);
  RowsBuilder residual(total);
  InstanceRows out;
  out.row_formula.assign(static_cast<size_t>(total), -1);
  for (int64_t q = 0; q < total; ++q) {
    if (q < text) {
      residual.add(0, total);
    } else {
      out.row_formula[static_cast<size_t>(q)] = 0;
      residual.add(0, text);
    }
    residual.end_row();
  }
  out.residual = residual.take();
  out.formulas = {disk};
  return out;
}

}  // namespace

const std::vector<std::string>& synthetic_workloads() {
  static const std::vector<std::string> names = {"causal",        "sliding_window", "doc_causal",
                                                 "shared_prefix", "hstu",           "clear"};
  return names;
}

InstanceRows synthetic_rows(const std::string& workload, int64_t n) {
  InstanceRows out;
  if (workload == "causal" || workload == "sliding_window") {
    const int64_t w = workload == "causal" ? n : 4096;
    RowsBuilder rows(n);
    for (int64_t q = 0; q < n; ++q) {
      rows.add(std::max<int64_t>(0, q - w + 1), q + 1);
      rows.end_row();
    }
    out.all = rows.take();
  } else if (workload == "doc_causal") {
    out.all = segmented(
        n, doc_causal_lengths(n),
        [](RowsBuilder& b, int64_t q, int64_t start, int64_t, size_t, const void*) {
          b.add(start, q + 1);
        },
        nullptr);
  } else if (workload == "shared_prefix") {
    const SharedPrefixParams p = shared_prefix_params(n);
    std::vector<int64_t> lens = {p.prompt};
    lens.insert(lens.end(), p.responses.begin(), p.responses.end());
    out.all = segmented(
        n, lens,
        [](RowsBuilder& b, int64_t q, int64_t start, int64_t, size_t, const void* prompt) {
          if (start > 0) b.add(0, *static_cast<const int64_t*>(prompt));  // responses
          b.add(start, q + 1);
        },
        &p.prompt);
  } else if (workload == "hstu") {
    const HstuParams p = hstu_params(n);
    out.all = segmented(
        n, p.lens,
        [](RowsBuilder& b, int64_t q, int64_t start, int64_t end, size_t i, const void* extra) {
          const auto& h = *static_cast<const HstuParams*>(extra);
          const int64_t history = start + h.ctx[i], first_target = end - h.targets[i];
          if (q < history) {
            b.add(start, first_target);
          } else if (q < first_target) {
            b.add(start, q + 1);
          } else {
            b.add(start, first_target);
            b.add(q, q + 1);
          }
        },
        &p);
  } else if (workload == "clear") {
    out = clear_rows(n);
  } else {
    throw std::invalid_argument("unknown synthetic workload " + workload);
  }
  return out;
}

}  // namespace cm::bench
