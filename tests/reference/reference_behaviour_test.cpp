// Reference attention behaviour beyond the numbers: identical results for any thread count,
// progress reporting, a descriptor of one (b, h) serving them all, and a mask with no visible
// pair at all.
#include <compilemask/reference.h>

#include "descriptor/build.h"
#include "mask_cases.h"
#include "tensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace cm::test {
namespace {

constexpr AttentionShape kShape{2, 4, 2, 113, 255, 16};

struct Results {
  std::vector<float> out, lse, dq, dk, dv;
};

struct Fixture {
  MaskSet set;
  std::vector<float> q, k, v, dout;
};

Fixture make_fixture(MaskKind kind) {
  std::mt19937 rng(20240611);
  Fixture f{make_mask_set(kind, kShape.nq, kShape.nk, kShape.batch, kShape.heads_q, {16, 32}, rng),
            {},
            {},
            {},
            {}};
  const size_t q_size = static_cast<size_t>(kShape.batch * kShape.heads_q * kShape.nq) * 16;
  const size_t k_size = static_cast<size_t>(kShape.batch * kShape.heads_kv * kShape.nk) * 16;
  f.q = random_tensor(q_size, rng);
  f.k = random_tensor(k_size, rng);
  f.v = random_tensor(k_size, rng);
  f.dout = random_tensor(q_size, rng);
  return f;
}

Results run(const void* blob, const Fixture& f, const ReferenceOptions& options) {
  Results r{poisoned(f.q.size()),
            poisoned(static_cast<size_t>(kShape.batch * kShape.heads_q * kShape.nq)),
            poisoned(f.q.size()), poisoned(f.k.size()), poisoned(f.v.size())};
  reference_forward(blob, kShape, f.q.data(), f.k.data(), f.v.data(), r.out.data(), r.lse.data(),
                    options);
  reference_backward(blob, kShape, f.q.data(), f.k.data(), f.v.data(), r.out.data(), f.dout.data(),
                     r.lse.data(), nullptr, r.dq.data(), r.dk.data(), r.dv.data(), nullptr,
                     options);
  return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::memcmp(&x, &y, sizeof(float)) == 0;
         });
}

TEST(ReferenceBehaviour, ResultsDoNotDependOnThreadCount) {
  const Fixture f = make_fixture(MaskKind::kMixed);
  for (Accumulate accumulate : {Accumulate::kFloat32, Accumulate::kFloat64}) {
    ReferenceOptions one, many;
    one.accumulate = many.accumulate = accumulate;
    one.threads = 1;
    many.threads = 5;
    const Results a = run(f.set.blob.data(), f, one);
    const Results b = run(f.set.blob.data(), f, many);
    EXPECT_TRUE(bitwise_equal(a.out, b.out));
    EXPECT_TRUE(bitwise_equal(a.lse, b.lse));
    EXPECT_TRUE(bitwise_equal(a.dq, b.dq));
    EXPECT_TRUE(bitwise_equal(a.dk, b.dk));
    EXPECT_TRUE(bitwise_equal(a.dv, b.dv));
  }
}

TEST(ReferenceBehaviour, ReportsProgressAtMostTwentyTimesEndingAtOne) {
  const Fixture f = make_fixture(MaskKind::kCausal);
  std::vector<double> reports;
  ReferenceOptions options;
  options.threads = 3;
  options.progress = [&](double fraction) { reports.push_back(fraction); };
  const Results r = run(f.set.blob.data(), f, options);  // forward then backward
  ASSERT_GE(reports.size(), 2u);
  EXPECT_LE(reports.size(), 40u);  // two calls
  int ends = 0;
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_GT(reports[i], 0.0);
    EXPECT_LE(reports[i], 1.0);
    if (reports[i] == 1.0) ++ends;
    if (i > 0 && reports[i - 1] != 1.0) {
      EXPECT_GT(reports[i], reports[i - 1]);
    }
  }
  EXPECT_EQ(ends, 2);
  EXPECT_EQ(reports.back(), 1.0);
}

// As in the kernels: a descriptor made for batch 1 and heads 1 serves every (b, h) of the call,
// with the results of a descriptor that maps each (b, h) to that one mask.
TEST(ReferenceBehaviour, ADescriptorOfOneMaskServesEveryBatchRowAndHead) {
  const Fixture f = make_fixture(MaskKind::kMixed);
  const InstanceRows& mask = f.set.instances.front();
  PlanStats stats;
  const std::vector<uint64_t> one = build_descriptor({mask}, {0}, 1, 1, {16, 32}, stats);
  const std::vector<uint64_t> all = build_descriptor(
      {mask}, std::vector<int32_t>(static_cast<size_t>(kShape.batch * kShape.heads_q), 0),
      kShape.batch, kShape.heads_q, {16, 32}, stats);
  const Results a = run(one.data(), f, {});
  const Results b = run(all.data(), f, {});
  EXPECT_TRUE(bitwise_equal(a.out, b.out));
  EXPECT_TRUE(bitwise_equal(a.lse, b.lse));
  EXPECT_TRUE(bitwise_equal(a.dq, b.dq));
  EXPECT_TRUE(bitwise_equal(a.dk, b.dk));
  EXPECT_TRUE(bitwise_equal(a.dv, b.dv));
  EXPECT_TRUE(std::none_of(a.out.begin(), a.out.end(), [](float x) { return std::isnan(x); }));
}

TEST(ReferenceBehaviour, MaskWithNoVisiblePairGivesZerosAndMinusInfinity) {
  RowIntervals empty;
  empty.nq = kShape.nq;
  empty.nk = kShape.nk;
  empty.offsets.assign(static_cast<size_t>(kShape.nq) + 1, 0);
  Fixture f = make_fixture(MaskKind::kRandom);
  PlanStats stats;
  const std::vector<uint64_t> blob =
      build_descriptor({InstanceRows{empty, {}, {}, {}}},
                       std::vector<int32_t>(static_cast<size_t>(kShape.batch * kShape.heads_q), 0),
                       kShape.batch, kShape.heads_q, {32, 32}, stats);
  const Results r = run(blob.data(), f, {});
  for (float x : r.lse) ASSERT_EQ(x, -std::numeric_limits<float>::infinity());
  for (const std::vector<float>* t : {&r.out, &r.dq, &r.dk, &r.dv}) {
    for (float x : *t) ASSERT_EQ(x, 0.0f);
  }
}

}  // namespace
}  // namespace cm::test
