// Naive dense attention in float64: scores for every (q, k) pair, masked by the dense mask.
// The backward uses D = sum_j P_ij dP_ij, not dO . O, to stay independent of the forward output.
// With a cap c the logit is c tanh(x / c) of x = scale q·k, whose derivative is 1 - tanh².
// A sink is one more key, of logit sinks[h] and value 0: its P enters the sum, its dP is 0.
// The ALiBi bias is added to the logit and does not depend on q·k.
#include "dense_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cm::test {

DenseResult dense_attention(
    const AttentionShape& shape, double scale, double softcap, const std::vector<float>& sinks,
    const std::vector<float>& alibi_slopes,
    const std::function<const std::vector<uint8_t>&(int32_t b, int32_t h)>& mask_of,
    const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
    const std::vector<float>& dout) {
  const int64_t nq = shape.nq, nk = shape.nk, d = shape.head_dim, dv = value_head_dim(shape);
  DenseResult r;
  r.out.assign(dout.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.lse.assign(static_cast<size_t>(shape.batch * shape.heads_q * nq), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  r.dsinks.assign(sinks.size(), 0.0);
  constexpr double kNone = -std::numeric_limits<double>::infinity();
  const int32_t group = shape.heads_q / shape.heads_kv;
  std::vector<double> p(static_cast<size_t>(nk)), dp(static_cast<size_t>(nk));
  std::vector<double> slope(static_cast<size_t>(nk));  // d logit / d (scale q·k)

  for (int32_t b = 0; b < shape.batch; ++b) {
    for (int32_t h = 0; h < shape.heads_q; ++h) {
      const std::vector<uint8_t>& mask = mask_of(b, h);
      const double sink = sinks.empty() ? kNone : double{sinks[static_cast<size_t>(h)]};
      const double alibi =
          alibi_slopes.empty() ? 0.0 : double{alibi_slopes[static_cast<size_t>(h)]};
      const int64_t qh = (static_cast<int64_t>(b) * shape.heads_q + h) * nq;
      const int64_t kh = (static_cast<int64_t>(b) * shape.heads_kv + h / group) * nk;
      const auto at = [d](int64_t row, int64_t i) { return static_cast<size_t>(row * d + i); };
      const auto at_v = [dv](int64_t row, int64_t i) { return static_cast<size_t>(row * dv + i); };
      for (int64_t i = 0; i < nq; ++i) {
        const auto visible = [&](int64_t j) { return mask[static_cast<size_t>(i * nk + j)] != 0; };
        double max_score = sink;
        for (int64_t j = 0; j < nk; ++j) {
          if (!visible(j)) continue;
          double s = 0;
          for (int64_t c = 0; c < d; ++c) s += double{q[at(qh + i, c)]} * k[at(kh + j, c)];
          double logit = s * scale;
          slope[static_cast<size_t>(j)] = 1;
          if (softcap > 0) {
            const double t = std::tanh(logit / softcap);
            logit = softcap * t;
            slope[static_cast<size_t>(j)] = 1 - t * t;
          }
          logit -= alibi * static_cast<double>(std::abs(i + nk - nq - j));
          p[static_cast<size_t>(j)] = logit;
          max_score = std::max(max_score, logit);
        }
        double& lse = r.lse[static_cast<size_t>(qh + i)];
        if (max_score == kNone) {
          lse = max_score;
          continue;
        }
        double sum = std::exp(sink - max_score);
        for (int64_t j = 0; j < nk; ++j) {
          if (visible(j)) sum += std::exp(p[static_cast<size_t>(j)] - max_score);
        }
        lse = max_score + std::log(sum);
        // P, O, dP and D = sum_j P dP.
        double delta = 0;
        for (int64_t j = 0; j < nk; ++j) {
          if (!visible(j)) continue;
          double& pj = p[static_cast<size_t>(j)];
          pj = std::exp(pj - lse);
          double dpj = 0;
          for (int64_t c = 0; c < dv; ++c) {
            r.out[at_v(qh + i, c)] += pj * v[at_v(kh + j, c)];
            dpj += double{dout[at_v(qh + i, c)]} * v[at_v(kh + j, c)];
          }
          dp[static_cast<size_t>(j)] = dpj;
          delta += pj * dpj;
        }
        if (sink != kNone) r.dsinks[static_cast<size_t>(h)] -= std::exp(sink - lse) * delta;
        for (int64_t j = 0; j < nk; ++j) {
          if (!visible(j)) continue;
          const double pj = p[static_cast<size_t>(j)];
          const double ds =
              pj * (dp[static_cast<size_t>(j)] - delta) * slope[static_cast<size_t>(j)];
          for (int64_t c = 0; c < d; ++c) {
            r.dq[at(qh + i, c)] += scale * ds * k[at(kh + j, c)];
            r.dk[at(kh + j, c)] += scale * ds * q[at(qh + i, c)];
          }
          for (int64_t c = 0; c < dv; ++c) r.dv[at_v(kh + j, c)] += pj * dout[at_v(qh + i, c)];
        }
      }
    }
  }
  return r;
}

}  // namespace cm::test
