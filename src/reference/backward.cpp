// Reference attention, backward pass. dQ: one work item per (b, h, query tile) over the forward
// form. dK and dV: one work item per (b, kv head, key tile) over the transposed form, summing
// the query heads of the kv group, so every output row has exactly one writer.
#include <compilemask/compilemask.h>
#include <compilemask/reference.h>

#include "parallel/parallel_for.h"
#include "reference/problem.h"
#include "reference/row_math.h"
#include "reference/visible_columns.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace cm {

namespace {

using reference::Problem;

struct BackwardTensors {
  const float* q;
  const float* k;
  const float* v;
  const float* out;
  const float* dout;
  const float* lse;
  const float* dlse;  // may be null
  float* dq;
  float* dk;
  float* dv;
  float* dsinks;  // may be null
};

// Per query row: its tensors and the softmax statistics the gradients need.
template <class Acc>
struct Row {
  const float* q;
  const float* dout;
  Acc lse;
  // dO · O - dLSE: the row term of the softmax Jacobian. The LSE's gradient joins it because
  // d lse / d s_j = P_j, so it adds dLSE · P_j to every dS_j = P_j (dP_j - dO · O).
  Acc delta;
  int head, index;  // query head and row
};

template <class Acc>
Row<Acc> row_at(const Problem& p, const BackwardTensors& t, int b, int h, int q) {
  const int64_t q_at = p.q_offset(b, h) + static_cast<int64_t>(q) * p.shape.head_dim;
  const int64_t out_at = p.out_offset(b, h) + static_cast<int64_t>(q) * p.shape.head_dim_v;
  const int64_t lse_at = p.lse_offset(b, h) + q;
  const Acc dlse = t.dlse != nullptr ? static_cast<Acc>(t.dlse[lse_at]) : Acc{0};
  return {t.q + q_at,
          t.dout + out_at,
          static_cast<Acc>(t.lse[lse_at]),
          reference::dot<Acc>(t.dout + out_at, t.out + out_at, p.shape.head_dim_v) - dlse,
          h,
          q};
}

template <class Acc>
class BackwardWorker {
 public:
  BackwardWorker(const Problem& p, const BackwardTensors& t)
      : p_(p),
        t_(t),
        columns_(p.blob),
        dq_acc_(static_cast<size_t>(p.shape.head_dim)),
        dk_acc_(static_cast<size_t>(p.tile_n) * p.shape.head_dim),
        dv_acc_(static_cast<size_t>(p.tile_n) * p.shape.head_dim_v) {}

  // Postcondition: rows of query tile m of dQ for (b, h) are written.
  void run_dq(int b, int h, int m) {
    const desc::Instance& inst = desc::mask_of(p_.blob, b, h);
    const desc::TileRow& tile_row = desc::q_tile(p_.blob, inst, m);
    const auto [q0, q1] = desc::q_tile_span(p_.blob, m);
    for (int q = q0; q < q1; ++q) dq_row(b, h, q, columns_.row(tile_row, m, q));
  }

  // Postcondition: rows of key tile n of dK and dV for (b, hkv) are written.
  void run_dkv(int b, int hkv, int n) {
    std::fill(dk_acc_.begin(), dk_acc_.end(), Acc{0});
    std::fill(dv_acc_.begin(), dv_acc_.end(), Acc{0});
    const auto [k0, k1] = desc::k_tile_span(p_.blob, n);
    for (int h = hkv * p_.group; h < (hkv + 1) * p_.group; ++h) {
      const desc::Instance& inst = desc::mask_of(p_.blob, b, h);
      const desc::TileRow& tile_col = desc::k_tile(p_.blob, inst, n);
      const desc::FullRun* full = desc::full_runs(p_.blob, tile_col);
      for (int i = 0; i < tile_col.full_count; ++i) {
        for (int m = full[i].first; m < full[i].first + full[i].count; ++m) {
          dkv_query_tile(b, h, m, nullptr, n, k0);
        }
      }
      const desc::PartialRun* partial = desc::partial_runs(p_.blob, tile_col);
      for (int i = 0; i < tile_col.partial_count; ++i) {
        const desc::Pattern& pattern = desc::pattern(p_.blob, partial[i].pattern);
        for (int m = partial[i].first; m < partial[i].first + partial[i].count; ++m) {
          // Sparse grid runs bridge empty tiles: skip them as a kernel does.
          if (desc::partial_tile_nonempty(p_.blob, pattern, m, n)) {
            dkv_query_tile(b, h, m, &pattern, n, k0);
          }
        }
      }
    }
    const int d = p_.shape.head_dim, dv = p_.shape.head_dim_v;
    float* dk = t_.dk + p_.k_offset(b, hkv) + static_cast<int64_t>(k0) * d;
    for (int64_t i = 0; i < static_cast<int64_t>(k1 - k0) * d; ++i) {
      dk[i] = static_cast<float>(static_cast<Acc>(p_.scale) * dk_acc_[i]);
    }
    float* dv_out = t_.dv + p_.v_offset(b, hkv) + static_cast<int64_t>(k0) * dv;
    for (int64_t i = 0; i < static_cast<int64_t>(k1 - k0) * dv; ++i) {
      dv_out[i] = static_cast<float>(dv_acc_[i]);
    }
  }

 private:
  // P and dS = P * (dP - delta) * slope (the gradient by scale * q·k) of row `row` against
  // key j, whose rows of K and V are k_row and v_row.
  void probabilities(const Row<Acc>& row, int j, const float* k_row, const float* v_row, Acc& prob,
                     Acc& dscore) const {
    const auto logit =
        p_.logit(reference::dot<Acc>(row.q, k_row, p_.shape.head_dim), row.head, row.index, j);
    prob = std::exp(logit.value - row.lse);
    dscore = prob * (reference::dot<Acc>(row.dout, v_row, p_.shape.head_dim_v) - row.delta) *
             logit.slope;
  }

  void dq_row(int b, int h, int q, const std::vector<Interval>& visible) {
    const int d = p_.shape.head_dim;
    float* dq_out = t_.dq + p_.q_offset(b, h) + static_cast<int64_t>(q) * d;
    if (visible.empty()) {  // fully masked: lse is -inf, so never form P
      std::fill(dq_out, dq_out + d, 0.0f);
      return;
    }
    const Row<Acc> row = row_at<Acc>(p_, t_, b, h, q);
    const float* k_head = t_.k + p_.k_offset(b, h / p_.group);
    const float* v_head = t_.v + p_.v_offset(b, h / p_.group);
    std::fill(dq_acc_.begin(), dq_acc_.end(), Acc{0});
    for (const Interval& iv : visible) {
      for (int j = iv.lo; j < iv.hi; ++j) {
        Acc prob, dscore;
        probabilities(row, j, k_head + static_cast<int64_t>(j) * d,
                      v_head + static_cast<int64_t>(j) * p_.shape.head_dim_v, prob, dscore);
        reference::add_scaled(dq_acc_.data(), dscore, k_head + static_cast<int64_t>(j) * d, d);
      }
    }
    for (int i = 0; i < d; ++i)
      dq_out[i] = static_cast<float>(static_cast<Acc>(p_.scale) * dq_acc_[i]);
  }

  // Adds the contributions of the rows of query tile m (query head h) to key tile n, which
  // starts at column k0.
  void dkv_query_tile(int b, int h, int m, const desc::Pattern* pattern, int n, int k0) {
    const int d = p_.shape.head_dim, dv = p_.shape.head_dim_v;
    const int hkv = h / p_.group;
    const float* k_head = t_.k + p_.k_offset(b, hkv);
    const float* v_head = t_.v + p_.v_offset(b, hkv);
    const auto [q0, q1] = desc::q_tile_span(p_.blob, m);
    for (int q = q0; q < q1; ++q) {
      const std::vector<Interval>& visible = columns_.tile(pattern, m, n, q);
      if (visible.empty()) continue;
      const Row<Acc> row = row_at<Acc>(p_, t_, b, h, q);
      for (const Interval& iv : visible) {
        for (int j = iv.lo; j < iv.hi; ++j) {
          Acc prob, dscore;
          probabilities(row, j, k_head + static_cast<int64_t>(j) * d,
                        v_head + static_cast<int64_t>(j) * dv, prob, dscore);
          const auto local = static_cast<size_t>(j - k0);
          reference::add_scaled(dv_acc_.data() + local * dv, prob, row.dout, dv);
          reference::add_scaled(dk_acc_.data() + local * d, dscore, row.q, d);
        }
      }
    }
  }

  const Problem& p_;
  BackwardTensors t_;
  reference::VisibleColumns columns_;
  std::vector<Acc> dq_acc_;
  std::vector<Acc> dk_acc_;  // one key tile, tile_n x head_dim
  std::vector<Acc> dv_acc_;  // tile_n x head_dim_v
};

// d loss / d sink of query head h: the sink is a logit whose value row is 0, so its dP is 0 and
// its dS = P_sink (0 - delta), summed over the rows of every batch row.
template <class Acc>
float sink_gradient(const Problem& p, const BackwardTensors& t, int h) {
  const Acc sink = static_cast<Acc>(p.sink(h));
  if (std::isinf(sink)) return 0.0f;  // -inf: no sink, and e^{sink - lse} could be NaN
  Acc sum = 0;
  for (int b = 0; b < p.shape.batch; ++b) {
    for (int q = 0; q < p.shape.nq; ++q) {
      const Row<Acc> row = row_at<Acc>(p, t, b, h, q);
      sum -= std::exp(sink - row.lse) * row.delta;
    }
  }
  return static_cast<float>(sum);
}

template <class Acc>
void backward(const Problem& p, const BackwardTensors& t, const ReferenceOptions& options) {
  // Items [0, dq_count) are (query tile, b, h); the rest are (key tile, b, kv head). Tile index
  // outermost so the heads of one tile spread over the workers.
  const int64_t q_heads = static_cast<int64_t>(p.shape.batch) * p.shape.heads_q;
  const int64_t kv_heads = static_cast<int64_t>(p.shape.batch) * p.shape.heads_kv;
  const int64_t dq_count = q_heads * p.num_q_tiles;
  const int64_t count = dq_count + kv_heads * p.num_k_tiles;
  const int workers = parallel::resolve_workers(options.threads, count);
  std::vector<BackwardWorker<Acc>> state(static_cast<size_t>(workers), BackwardWorker<Acc>(p, t));
  parallel::parallel_for(count, workers, options.progress, [&](int64_t item, int worker) {
    BackwardWorker<Acc>& w = state[static_cast<size_t>(worker)];
    if (item < dq_count) {
      const int64_t bh = item % q_heads;
      w.run_dq(static_cast<int>(bh / p.shape.heads_q), static_cast<int>(bh % p.shape.heads_q),
               static_cast<int>(item / q_heads));
    } else {
      const int64_t rest = item - dq_count;
      const int64_t bh = rest % kv_heads;
      w.run_dkv(static_cast<int>(bh / p.shape.heads_kv), static_cast<int>(bh % p.shape.heads_kv),
                static_cast<int>(rest / kv_heads));
    }
  });
  if (t.dsinks != nullptr) {
    const int sink_workers = parallel::resolve_workers(options.threads, p.shape.heads_q);
    parallel::parallel_for(p.shape.heads_q, sink_workers, {}, [&](int64_t h, int) {
      t.dsinks[h] = sink_gradient<Acc>(p, t, static_cast<int>(h));
    });
  }
}

}  // namespace

void reference_backward(const void* descriptor, const AttentionShape& shape, const float* q,
                        const float* k, const float* v, const float* out, const float* dout,
                        const float* lse, const float* dlse, float* dq, float* dk, float* dv,
                        float* dsinks, const ReferenceOptions& options) {
  const Problem p = reference::make_problem(descriptor, shape, options);
  const void* tensors[] = {q, k, v, out, dout, lse, dq, dk, dv};
  const char* names[] = {"q", "k", "v", "out", "dout", "lse", "dq", "dk", "dv"};
  for (int i = 0; i < 9; ++i) reference::require_tensor(tensors[i], names[i]);
  if (dsinks != nullptr && options.sinks == nullptr) {
    throw Error("reference attention: dsinks needs options.sinks (the gradient of which sinks?)");
  }
  const BackwardTensors t{q, k, v, out, dout, lse, dlse, dq, dk, dv, dsinks};
  if (options.accumulate == Accumulate::kFloat64) {
    backward<double>(p, t, options);
  } else {
    backward<float>(p, t, options);
  }
}

}  // namespace cm
