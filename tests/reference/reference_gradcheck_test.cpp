// The reference backward against central finite differences of the reference forward, on a
// tiny GQA case with a fully masked row and V narrower than Q and K, in float64 accumulation,
// for a loss of O alone and of O and the LSE, without and with a logit cap, attention sinks and
// ALiBi.
#include <compilemask/reference.h>

#include "descriptor/build.h"
#include "tensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

namespace cm::test {
namespace {

// V and O have 3 columns against Q's and K's 4, so that any mix-up of the two head dims shows.
constexpr AttentionShape kShape{1, 2, 1, 5, 7, 4, 3};

struct Tensors {
  // loss = sum(weight * O) + sum(lse_weight * LSE) over the rows whose LSE is finite;
  // lse_weight is empty for a loss of O alone. sinks and alibi_slopes: one per query head, or
  // empty for none.
  std::vector<float> q, k, v, weight, lse_weight, sinks, alibi_slopes;
  float softcap;
};

ReferenceOptions float64_options(const Tensors& t) {
  ReferenceOptions options;
  options.accumulate = Accumulate::kFloat64;
  options.threads = 1;
  options.softcap = t.softcap;
  options.sinks = t.sinks.empty() ? nullptr : t.sinks.data();
  options.alibi_slopes = t.alibi_slopes.empty() ? nullptr : t.alibi_slopes.data();
  return options;
}

// Per-row intervals for nq = 5, nk = 7: bands, a gap, and row 3 fully masked.
InstanceRows tiny_instance(const std::vector<std::vector<Interval>>& rows) {
  InstanceRows inst;
  inst.all.nq = kShape.nq;
  inst.all.nk = kShape.nk;
  inst.all.offsets.push_back(0);
  for (const std::vector<Interval>& row : rows) {
    inst.all.intervals.insert(inst.all.intervals.end(), row.begin(), row.end());
    inst.all.offsets.push_back(static_cast<int64_t>(inst.all.intervals.size()));
  }
  return inst;
}

double loss(const void* blob, const Tensors& t) {
  std::vector<float> out(t.weight.size()), lse(static_cast<size_t>(kShape.heads_q * kShape.nq));
  reference_forward(blob, kShape, t.q.data(), t.k.data(), t.v.data(), out.data(), lse.data(),
                    float64_options(t));
  double sum = 0;
  for (size_t i = 0; i < out.size(); ++i) sum += double{t.weight[i]} * out[i];
  for (size_t i = 0; i < t.lse_weight.size(); ++i) {
    if (!std::isinf(lse[i])) sum += double{t.lse_weight[i]} * lse[i];
  }
  return sum;
}

// Central difference of the loss with respect to x[i]; the step is measured after rounding x.
double numeric_gradient(const void* blob, Tensors& t, std::vector<float>& x, size_t i) {
  constexpr float kStep = 1e-2f;
  const float original = x[i];
  x[i] = original + kStep;
  const double up = loss(blob, t);
  const double up_x = x[i];
  x[i] = original - kStep;
  const double down = loss(blob, t);
  const double down_x = x[i];
  x[i] = original;
  return (up - down) / (up_x - down_x);
}

// (LSE in the loss, softcap, sinks, ALiBi); scale q·k has a standard deviation of about 1.3
// here, so a cap of 0.7 bends it.
using Loss = std::tuple<bool, float, bool, bool>;
class ReferenceGradcheck : public testing::TestWithParam<Loss> {};

TEST_P(ReferenceGradcheck, BackwardMatchesFiniteDifferences) {
  const auto [lse_in_loss, softcap, with_sinks, with_alibi] = GetParam();
  const InstanceRows head0 = tiny_instance({{{0, 1}}, {{0, 2}}, {{1, 3}, {5, 7}}, {}, {{0, 7}}});
  const InstanceRows head1 = tiny_instance({{{6, 7}}, {{2, 5}}, {}, {{0, 4}}, {{3, 4}, {5, 6}}});
  PlanStats stats;
  const std::vector<uint64_t> blob =
      build_descriptor({head0, head1}, {0, 1}, kShape.batch, kShape.heads_q, {16, 16}, stats);

  std::mt19937 rng(99);
  Tensors t{
      random_tensor(static_cast<size_t>(kShape.heads_q * kShape.nq * kShape.head_dim), rng),
      random_tensor(static_cast<size_t>(kShape.heads_kv * kShape.nk * kShape.head_dim), rng),
      random_tensor(static_cast<size_t>(kShape.heads_kv * kShape.nk * kShape.head_dim_v), rng),
      {},
      {},
      {},
      {},
      softcap};
  t.weight =
      random_tensor(static_cast<size_t>(kShape.heads_q * kShape.nq * kShape.head_dim_v), rng);
  if (lse_in_loss)
    t.lse_weight = random_tensor(static_cast<size_t>(kShape.heads_q * kShape.nq), rng);
  // About the rows' logits, so that both the sinks' and the keys' terms weigh.
  if (with_sinks) t.sinks = {0.8f, -0.3f};
  // With nk - nq = 2, distances 0 to 6: the bias moves the logits by up to 1.8 and 4.2.
  if (with_alibi) t.alibi_slopes = {0.3f, 0.7f};

  std::vector<float> out = poisoned(t.weight.size()), lse = poisoned(kShape.heads_q * kShape.nq);
  std::vector<float> dq = poisoned(t.q.size()), dk = poisoned(t.k.size()),
                     dv = poisoned(t.v.size()), dsinks = poisoned(t.sinks.size());
  reference_forward(blob.data(), kShape, t.q.data(), t.k.data(), t.v.data(), out.data(), lse.data(),
                    float64_options(t));
  reference_backward(blob.data(), kShape, t.q.data(), t.k.data(), t.v.data(), out.data(),
                     t.weight.data(), lse.data(), lse_in_loss ? t.lse_weight.data() : nullptr,
                     dq.data(), dk.data(), dv.data(), with_sinks ? dsinks.data() : nullptr,
                     float64_options(t));

  const struct {
    const char* name;
    std::vector<float>* input;
    const std::vector<float>* analytic;
  } checks[] = {
      {"dq", &t.q, &dq}, {"dk", &t.k, &dk}, {"dv", &t.v, &dv}, {"dsinks", &t.sinks, &dsinks}};
  for (const auto& check : checks) {
    for (size_t i = 0; i < check.input->size(); ++i) {
      const double numeric = numeric_gradient(blob.data(), t, *check.input, i);
      const double analytic = (*check.analytic)[i];
      EXPECT_NEAR(analytic, numeric, 2e-3 * std::max(1.0, std::fabs(numeric)))
          << check.name << "[" << i << "]";
    }
  }
  // Row 3 of head 0 sees nothing: its gradient is exactly zero, not merely small.
  for (int c = 0; c < kShape.head_dim; ++c) EXPECT_EQ(dq[3 * kShape.head_dim + c], 0.0f);
}

std::string case_name(const testing::TestParamInfo<Loss>& info) {
  const auto [lse_in_loss, softcap, with_sinks, with_alibi] = info.param;
  return std::string(lse_in_loss ? "OutputAndLse" : "Output") + (softcap > 0 ? "Softcap" : "") +
         (with_sinks ? "Sinks" : "") + (with_alibi ? "Alibi" : "");
}

INSTANTIATE_TEST_SUITE_P(Loss, ReferenceGradcheck,
                         testing::Combine(testing::Values(false, true), testing::Values(0.0f, 0.7f),
                                          testing::Values(false, true),
                                          testing::Values(false, true)),
                         case_name);

}  // namespace
}  // namespace cm::test
