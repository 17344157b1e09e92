// Reference attention, forward pass: O and LSE, one work item per (b, h, query tile), reading
// the forward form of the descriptor.
#include <compilemask/reference.h>

#include "parallel/parallel_for.h"
#include "reference/problem.h"
#include "reference/row_math.h"
#include "reference/visible_columns.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cm {

namespace {

using reference::Problem;

struct ForwardTensors {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  float* lse;
};

template <class Acc>
class ForwardWorker {
 public:
  ForwardWorker(const Problem& p, const ForwardTensors& t)
      : p_(p), t_(t), columns_(p.blob), out_acc_(static_cast<size_t>(p.shape.head_dim_v)) {}

  // Postcondition: rows of query tile m of (b, h) hold their O and LSE.
  void run(int b, int h, int m) {
    const desc::Instance& inst = desc::mask_of(p_.blob, b, h);
    const desc::TileRow& tile_row = desc::q_tile(p_.blob, inst, m);
    const auto [q0, q1] = desc::q_tile_span(p_.blob, m);
    for (int q = q0; q < q1; ++q) run_row(b, h, q, columns_.row(tile_row, m, q));
  }

 private:
  void run_row(int b, int h, int q, const std::vector<Interval>& visible) {
    const int d = p_.shape.head_dim, dv = p_.shape.head_dim_v;
    const float* q_row = t_.q + p_.q_offset(b, h) + static_cast<int64_t>(q) * d;
    const float* k_head = t_.k + p_.k_offset(b, h / p_.group);
    const float* v_head = t_.v + p_.v_offset(b, h / p_.group);
    float* out_row = t_.out + p_.out_offset(b, h) + static_cast<int64_t>(q) * dv;
    float& lse = t_.lse[p_.lse_offset(b, h) + q];

    // Scores of all visible columns, in column order, then a max-shifted softmax.
    scores_.clear();
    Acc max_score = -std::numeric_limits<Acc>::infinity();
    for (const Interval& iv : visible) {
      for (int j = iv.lo; j < iv.hi; ++j) {
        const Acc s =
            p_.logit(reference::dot<Acc>(q_row, k_head + static_cast<int64_t>(j) * d, d), h, q, j)
                .value;
        scores_.push_back(s);
        max_score = std::max(max_score, s);
      }
    }
    // The sink is one more logit, of a key whose value is 0: it adds to the sum only.
    const auto sink = static_cast<Acc>(p_.sink(h));
    if (scores_.empty()) {  // fully masked row: the sink alone, if any
      std::fill(out_row, out_row + dv, 0.0f);
      lse = static_cast<float>(sink);
      return;
    }
    max_score = std::max(max_score, sink);
    std::fill(out_acc_.begin(), out_acc_.end(), Acc{0});
    Acc sum = std::exp(sink - max_score);  // 0 without a sink
    size_t index = 0;
    for (const Interval& iv : visible) {
      for (int j = iv.lo; j < iv.hi; ++j) {
        const Acc weight = std::exp(scores_[index++] - max_score);
        sum += weight;
        reference::add_scaled(out_acc_.data(), weight, v_head + static_cast<int64_t>(j) * dv, dv);
      }
    }
    for (int i = 0; i < dv; ++i) out_row[i] = static_cast<float>(out_acc_[i] / sum);
    lse = static_cast<float>(max_score + std::log(sum));
  }

  const Problem& p_;
  ForwardTensors t_;
  reference::VisibleColumns columns_;
  std::vector<Acc> scores_;
  std::vector<Acc> out_acc_;
};

template <class Acc>
void forward(const Problem& p, const ForwardTensors& t, const ReferenceOptions& options) {
  // Item order: query tile outermost, so the heads of one tile spread over the workers.
  const int64_t heads = static_cast<int64_t>(p.shape.batch) * p.shape.heads_q;
  const int64_t count = heads * p.num_q_tiles;
  const int workers = parallel::resolve_workers(options.threads, count);
  std::vector<ForwardWorker<Acc>> state(static_cast<size_t>(workers), ForwardWorker<Acc>(p, t));
  parallel::parallel_for(count, workers, options.progress, [&](int64_t item, int worker) {
    const int64_t bh = item % heads;
    state[static_cast<size_t>(worker)].run(static_cast<int>(bh / p.shape.heads_q),
                                           static_cast<int>(bh % p.shape.heads_q),
                                           static_cast<int>(item / heads));
  });
}

}  // namespace

void reference_forward(const void* descriptor, const AttentionShape& shape, const float* q,
                       const float* k, const float* v, float* out, float* lse,
                       const ReferenceOptions& options) {
  const Problem p = reference::make_problem(descriptor, shape, options);
  reference::require_tensor(q, "q");
  reference::require_tensor(k, "k");
  reference::require_tensor(v, "v");
  reference::require_tensor(out, "out");
  reference::require_tensor(lse, "lse");
  const ForwardTensors t{q, k, v, out, lse};
  if (options.accumulate == Accumulate::kFloat64) {
    forward<double>(p, t, options);
  } else {
    forward<float>(p, t, options);
  }
}

}  // namespace cm
