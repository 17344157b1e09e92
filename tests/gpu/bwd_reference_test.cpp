// The sm90 backward kernel against the float64 CPU reference driven by the same descriptor
// (include/compilemask/reference.h), for every example mask at small odd shapes, with GQA,
// head dims 64, 128 and 256 and padded ones, both dtypes and both dQ modes, some of them with a
// gradient of the LSE too, some with soft-capped logits, ALiBi or attention sinks (and their
// gradient), some in the packed layout with NaN between the sequences; bitwise determinism; CUDA
// graph capture; and the launcher's input validation. Skips without a Hopper GPU.
#include <compilemask/compilemask.h>
#include <compilemask/cuda_backward.h>
#include <compilemask/reference.h>

#include "gpu_test_support.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using cm::cuda::dense_bhsd;
using cm::cuda::DType;
using cm::gpu_test::Case;
using cm::gpu_test::DeviceBuffer;
using cm::gpu_test::make_plan;
using cm::gpu_test::random_rounded;
using cm::gpu_test::Rounded;
using cm::gpu_test::rounded;

constexpr uint16_t kNaNBits = 0xffff;  // NaN in both 16-bit formats

// One problem on the device: inputs uploaded, outputs and workspace filled with NaN bytes so
// that unwritten memory shows. The tensors are [B, H, S, D], or with gap > 0 [B, H, S + gap, D]
// with NaN in the gap rows, read as the packed layout [T, H, D]: sequence b of head h starts at
// row b * H * (S + gap) of a view whose head stride is S + gap rows, so every row a load takes
// past a sequence's end (up to 127) is NaN. The host copies stay [B, H, S, D].
class Problem {
 public:
  static constexpr int kBatch = 2;

  // deterministic and head_splits: BackwardArgs's (head splits 0: automatic, for the mode).
  explicit Problem(const Case& c, bool deterministic, int gap = 0, int head_splits = 0)
      : sinks(c.sinks ? cm::gpu_test::sink_logits(c.heads_q) : std::vector<float>{}),
        slopes(c.alibi ? cm::gpu_test::alibi_slopes(c.heads_q) : std::vector<float>{}),
        c_(c),
        gap_(gap),
        deterministic_(deterministic),
        head_splits_(head_splits),
        plan_(make_plan(c.example, c.params, c.nq, c.nk, kBatch, c.heads_q)),
        descriptor_(plan_.blob()),
        dv_cols_(cm::value_head_dim(shape())),
        nq_elems_(size_t(kBatch) * c.heads_q * c.nq * c.head_dim),
        nk_elems_(size_t(kBatch) * c.heads_kv * c.nk * c.head_dim),
        out_elems_(size_t(kBatch) * c.heads_q * c.nq * dv_cols_),
        v_elems_(size_t(kBatch) * c.heads_kv * c.nk * dv_cols_),
        lse_elems_(size_t(kBatch) * c.heads_q * c.nq),
        workspace_bytes_(cm::cuda::backward_workspace_bytes(descriptor_.view(), sizes())),
        q_(stored(nq_elems_, c.nq) * 2),
        k_(stored(nk_elems_, c.nk) * 2),
        v_(stored(v_elems_, c.nk) * 2),
        out_(stored(out_elems_, c.nq) * 2),
        dout_(stored(out_elems_, c.nq) * 2),
        lse_(stored(lse_elems_, c.nq) * 4),
        dlse_(stored(lse_elems_, c.nq) * 4),
        dq_(stored(nq_elems_, c.nq) * 2),
        dk_(stored(nk_elems_, c.nk) * 2),
        dv_(stored(v_elems_, c.nk) * 2),
        offsets_(2 * kBatch * sizeof(int32_t)),
        sinks_(std::max<size_t>(sinks.size(), 1) * 4),
        dsinks_(std::max<size_t>(sinks.size(), 1) * 4),
        slopes_(std::max<size_t>(slopes.size(), 1) * 4),
        workspace_(workspace_bytes_) {
    std::vector<int32_t> offsets;  // q_offsets, then k_offsets
    for (int b = 0; b < kBatch; ++b) offsets.push_back(b * c.heads_q * (c.nq + gap));
    for (int b = 0; b < kBatch; ++b) offsets.push_back(b * c.heads_kv * (c.nk + gap));
    EXPECT_EQ(cudaMemcpy(offsets_.ptr, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice),
              cudaSuccess);
  }

  // Random inputs (with a random gradient of the LSE if lse_gradient), the float64 reference
  // forward and backward; uploads everything.
  void prepare(unsigned seed, bool lse_gradient = false) {
    std::mt19937 rng(seed);
    q = random_rounded(nq_elems_, c_.dtype, rng);
    k = random_rounded(nk_elems_, c_.dtype, rng);
    v = random_rounded(v_elems_, c_.dtype, rng);
    dout = random_rounded(out_elems_, c_.dtype, rng);
    dlse.clear();
    if (lse_gradient) {
      std::normal_distribution<float> normal;
      for (size_t i = 0; i < lse_elems_; ++i) dlse.push_back(normal(rng));
    }
    const cm::AttentionShape shape = this->shape();
    cm::ReferenceOptions options;
    options.accumulate = cm::Accumulate::kFloat64;
    options.softcap = c_.softcap;
    options.sinks = c_.sinks ? sinks.data() : nullptr;
    options.alibi_slopes = c_.alibi ? slopes.data() : nullptr;
    std::vector<float> out_exact(out_elems_);
    lse.assign(lse_elems_, 0.f);
    cm::reference_forward(plan_.blob(), shape, q.values.data(), k.values.data(), v.values.data(),
                          out_exact.data(), lse.data(), options);
    out = rounded(out_exact, c_.dtype);  // the kernel sees O in its own precision
    ref_dq.assign(nq_elems_, 0.f);
    ref_dk.assign(nk_elems_, 0.f);
    ref_dv.assign(v_elems_, 0.f);
    ref_dsinks.assign(sinks.size(), 0.f);
    cm::reference_backward(plan_.blob(), shape, q.values.data(), k.values.data(), v.values.data(),
                           out.values.data(), dout.values.data(), lse.data(),
                           dlse.empty() ? nullptr : dlse.data(), ref_dq.data(), ref_dk.data(),
                           ref_dv.data(), c_.sinks ? ref_dsinks.data() : nullptr, options);
    if (c_.sinks) {
      sink_terms = sink_term_magnitudes(shape);
      upload(sinks_, sinks);
    }
    if (c_.alibi) upload(slopes_, slopes);
    upload(q_, with_gaps(q.bits, c_.heads_q, c_.nq, c_.head_dim, kNaNBits));
    upload(k_, with_gaps(k.bits, c_.heads_kv, c_.nk, c_.head_dim, kNaNBits));
    upload(v_, with_gaps(v.bits, c_.heads_kv, c_.nk, dv_cols_, kNaNBits));
    upload(out_, with_gaps(out.bits, c_.heads_q, c_.nq, dv_cols_, kNaNBits));
    upload(dout_, with_gaps(dout.bits, c_.heads_q, c_.nq, dv_cols_, kNaNBits));
    upload(lse_, with_gaps(lse, c_.heads_q, c_.nq, 1, std::nanf("")));
    if (!dlse.empty()) upload(dlse_, with_gaps(dlse, c_.heads_q, c_.nq, 1, std::nanf("")));
  }

  cm::AttentionShape shape() const {
    return {kBatch, c_.heads_q, c_.heads_kv, c_.nq, c_.nk, c_.head_dim, c_.head_dim_v};
  }

  void poison() const {
    for (const auto& [b, bytes] : {std::pair{&dq_, stored(nq_elems_, c_.nq) * 2},
                                   std::pair{&dk_, stored(nk_elems_, c_.nk) * 2},
                                   std::pair{&dv_, stored(v_elems_, c_.nk) * 2}}) {
      ASSERT_EQ(cudaMemset(b->ptr, 0xff, bytes), cudaSuccess);
    }
    ASSERT_EQ(cudaMemset(dsinks_.ptr, 0xff, sinks.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(workspace_.ptr, 0xff, workspace_bytes_), cudaSuccess);
  }

  cm::cuda::BackwardArgs args() const {
    const int q_rows = c_.nq + gap_, k_rows = c_.nk + gap_, d = c_.head_dim, dv = dv_cols_;
    cm::cuda::BackwardArgs a;
    static_cast<cm::cuda::Problem&>(a) = cm::cuda::dense_problem(
        c_.dtype, shape(), q_.ptr, k_.ptr, v_.ptr, out_.ptr, static_cast<const float*>(lse_.ptr));
    a.softcap = c_.softcap;
    a.sinks = c_.sinks ? static_cast<const float*>(sinks_.ptr) : nullptr;
    a.dsinks = c_.sinks ? static_cast<float*>(dsinks_.ptr) : nullptr;
    a.alibi_slopes = c_.alibi ? static_cast<const float*>(slopes_.ptr) : nullptr;
    a.dout = dense_bhsd(dout_.ptr, c_.heads_q, q_rows, dv);
    a.dlse = dlse.empty() ? nullptr : static_cast<const float*>(dlse_.ptr);
    a.dq = dense_bhsd(dq_.ptr, c_.heads_q, q_rows, d);
    a.dk = dense_bhsd(dk_.ptr, c_.heads_kv, k_rows, d);
    a.dv = dense_bhsd(dv_.ptr, c_.heads_kv, k_rows, dv);
    a.deterministic = deterministic_;
    a.head_splits = head_splits_;
    if (gap_ > 0) {
      a.q = dense_bhsd(q_.ptr, c_.heads_q, q_rows, d);
      a.out = dense_bhsd(out_.ptr, c_.heads_q, q_rows, dv);
      a.k = dense_bhsd(k_.ptr, c_.heads_kv, k_rows, d);
      a.v = dense_bhsd(v_.ptr, c_.heads_kv, k_rows, dv);
      a.lse_stride_h = q_rows;
      a.q_offsets = static_cast<const int32_t*>(offsets_.ptr);
      a.k_offsets = a.q_offsets + kBatch;
      // So that no head's rows reach past the buffers: the last sequence's gap ends the view.
      a.total_q = int64_t{kBatch - 1} * c_.heads_q * q_rows + q_rows;
      a.total_k = int64_t{kBatch - 1} * c_.heads_kv * k_rows + k_rows;
    }
    return a;
  }

  void run(cudaStream_t stream) const {
    cm::cuda::backward(descriptor_.view(), args(), workspace_.ptr, workspace_bytes_, stream);
  }

  // The 16-bit results dq, dk, dv as [B, H, S, D]; with gaps, checks that the gap rows still
  // hold the poison (the backward writes only the sequences' rows).
  std::vector<std::vector<uint16_t>> results() const {
    std::vector<std::vector<uint16_t>> r;
    for (const DeviceBuffer* b : {&dq_, &dk_, &dv_}) {
      const int heads = b == &dq_ ? c_.heads_q : c_.heads_kv;
      const int rows = b == &dq_ ? c_.nq : c_.nk;
      const int width = b == &dv_ ? dv_cols_ : c_.head_dim;
      std::vector<uint16_t> bits(stored(size_t(kBatch) * heads * rows * width, rows));
      EXPECT_EQ(cudaMemcpy(bits.data(), b->ptr, bits.size() * 2, cudaMemcpyDeviceToHost),
                cudaSuccess);
      r.push_back(without_gaps(bits, heads, rows, width, kNaNBits));
    }
    return r;
  }

  // The sinks' gradient as the kernel wrote it.
  std::vector<float> sink_gradient() const {
    std::vector<float> got(sinks.size());
    EXPECT_EQ(cudaMemcpy(got.data(), dsinks_.ptr, got.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    return got;
  }

  const Case& spec() const { return c_; }
  const cm::cuda::DeviceDescriptor& descriptor() const { return descriptor_; }
  void* workspace() const { return workspace_.ptr; }
  size_t workspace_bytes() const { return workspace_bytes_; }

  Rounded q, k, v, dout, out;
  std::vector<float> lse, dlse, ref_dq, ref_dk, ref_dv;  // dlse is empty without an LSE gradient
  // With sinks: their logits, the reference gradient and, per head, the sum of its terms'
  // magnitudes |e^{sink - lse} (dO · O - dLSE)|, the scale of a float32 sum's rounding.
  const std::vector<float> sinks;
  std::vector<float> ref_dsinks;
  std::vector<double> sink_terms;
  const std::vector<float> slopes;  // ALiBi's, with alibi

 private:
  std::vector<double> sink_term_magnitudes(const cm::AttentionShape& s) const {
    std::vector<double> sums(sinks.size(), 0.0);
    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.heads_q; ++h) {
        for (int i = 0; i < s.nq; ++i) {
          const size_t row = (size_t(b) * s.heads_q + h) * s.nq + i;
          double delta = dlse.empty() ? 0.0 : -double(dlse[row]);
          for (int d = 0; d < dv_cols_; ++d) {
            delta += double(dout.values[row * dv_cols_ + d]) * out.values[row * dv_cols_ + d];
          }
          // A head without a sink (-inf) has no terms; its rows' LSE may be -inf too.
          if (!std::isinf(sinks[h]))
            sums[h] += std::abs(std::exp(double(sinks[h]) - lse[row]) * delta);
        }
      }
    }
    return sums;
  }

  // Elements of a [B, H, rows, width] tensor of `elems` elements as stored, gaps included.
  size_t stored(size_t elems, int rows) const { return elems / rows * (rows + gap_); }

  // [B, H, rows, width] values spread to [B, H, rows + gap, width] with `fill` in the gaps.
  template <class T>
  std::vector<T> with_gaps(const std::vector<T>& dense, int heads, int rows, int width,
                           T fill) const {
    const size_t run = size_t(rows) * width, stride = size_t(rows + gap_) * width;
    std::vector<T> spread(size_t(kBatch) * heads * stride, fill);
    for (size_t s = 0; s < size_t(kBatch) * heads; ++s) {
      std::copy_n(dense.begin() + s * run, run, spread.begin() + s * stride);
    }
    return spread;
  }

  // The inverse of with_gaps; the gap rows must hold `fill`'s bits.
  std::vector<uint16_t> without_gaps(const std::vector<uint16_t>& bits, int heads, int rows,
                                     int width, uint16_t fill) const {
    const size_t run = size_t(rows) * width, stride = size_t(rows + gap_) * width;
    std::vector<uint16_t> dense;
    for (size_t s = 0; s < size_t(kBatch) * heads; ++s) {
      dense.insert(dense.end(), bits.begin() + s * stride, bits.begin() + s * stride + run);
      const bool untouched =
          std::all_of(bits.begin() + s * stride + run, bits.begin() + (s + 1) * stride,
                      [&](uint16_t x) { return x == fill; });
      EXPECT_TRUE(untouched) << "a gap row after sequence-head " << s << " was written";
    }
    return dense;
  }

  template <class T>
  static void upload(const DeviceBuffer& b, const std::vector<T>& values) {
    ASSERT_EQ(cudaMemcpy(b.ptr, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }

  // The sizes and mode backward_workspace_bytes reads.
  cm::cuda::BackwardArgs sizes() const {
    cm::cuda::BackwardArgs a;
    a.batch = kBatch;
    a.heads_q = c_.heads_q;
    a.heads_kv = c_.heads_kv;
    a.head_dim = c_.head_dim;
    a.head_dim_v = c_.head_dim_v;
    a.deterministic = deterministic_;
    a.head_splits = head_splits_;
    return a;
  }

  Case c_;
  int gap_;
  bool deterministic_;
  int head_splits_;
  cm::Plan plan_;
  cm::cuda::DeviceDescriptor descriptor_;
  int dv_cols_;  // the columns of V, O, dO and dV
  size_t nq_elems_, nk_elems_, out_elems_, v_elems_, lse_elems_, workspace_bytes_;
  DeviceBuffer q_, k_, v_, out_, dout_, lse_, dlse_, dq_, dk_, dv_, offsets_, sinks_, dsinks_,
      slopes_, workspace_;
};

// max |got - ref| <= 8 eps max|ref| + 1e-3: the kernel rounds P, dS and the results to the
// input precision once each (a mask or indexing error costs O(max|ref|)); nothing is NaN.
void expect_close(const std::vector<uint16_t>& got, const std::vector<float>& ref, DType dtype,
                  const char* name) {
  const double eps = dtype == DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  double max_ref = 0, max_err = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const float g = cm::cuda::from_storage_bits(got[i], dtype);
    ASSERT_FALSE(std::isnan(g)) << name << " element " << i << " is NaN (unwritten or NaN)";
    max_ref = std::max(max_ref, std::abs(double(ref[i])));
    max_err = std::max(max_err, std::abs(double(g) - ref[i]));
  }
  EXPECT_LE(max_err, 8 * eps * max_ref + 1e-3)
      << name << ": max |got - ref| (max |ref| " << max_ref << ")";
}

// Runs case c's backward on NaN-poisoned outputs and compares it with the float64 reference;
// gap > 0: in the packed layout with that many NaN rows after every sequence (Problem);
// head_splits as BackwardArgs's.
void check_gradients(const Case& c, bool deterministic, bool lse_gradient, int gap = 0,
                     int head_splits = 0) {
  Problem problem(c, deterministic, gap, head_splits);
  problem.prepare(static_cast<unsigned>(std::hash<std::string>{}(c.example) + c.nq), lse_gradient);
  problem.poison();
  problem.run(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  const auto r = problem.results();
  expect_close(r[0], problem.ref_dq, c.dtype, "dq");
  expect_close(r[1], problem.ref_dk, c.dtype, "dk");
  expect_close(r[2], problem.ref_dv, c.dtype, "dv");
  // The sinks' gradient is a float32 sum of the preprocess's rows: its error is the sum's
  // rounding, small against its terms' magnitudes.
  const std::vector<float> dsinks = problem.sink_gradient();
  for (size_t h = 0; h < dsinks.size(); ++h) {
    EXPECT_NEAR(dsinks[h], problem.ref_dsinks[h], 1e-4 * problem.sink_terms[h] + 1e-6)
        << "dsinks[" << h << "]";
  }
  // Rows that see no key get dQ = 0 exactly.
  for (size_t row = 0; row < problem.lse.size(); ++row) {
    if (!std::isinf(problem.lse[row])) continue;
    for (int d = 0; d < c.head_dim; ++d) {
      ASSERT_EQ(cm::cuda::from_storage_bits(r[0][row * c.head_dim + d], c.dtype), 0.f)
          << "row " << row;
    }
  }
}

class BackwardMatchesReference : public testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(BackwardMatchesReference, Gradients) {
  SKIP_WITHOUT_HOPPER();
  check_gradients(std::get<0>(GetParam()), std::get<1>(GetParam()), false);
}

// The same with a gradient of the LSE as well, which the preprocess folds into rowsum(dO O).
class LseGradientMatchesReference : public testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(LseGradientMatchesReference, Gradients) {
  SKIP_WITHOUT_HOPPER();
  check_gradients(std::get<0>(GetParam()), std::get<1>(GetParam()), true);
}

// The forward's example cases plus Nq > Nk with MQA, at index 2 (scripts/gpu/bwd_checks.sh's
// sanitizer filter addresses the cases by index).
std::vector<Case> example_cases() {
  std::vector<Case> cases = cm::gpu_test::example_cases();
  cases.insert(cases.begin() + 2, {"causal", {}, 385, 129, 128, 2, 1, DType::kBFloat16});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Examples, BackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(example_cases()), testing::Bool()));

// Every third case: both dtypes, head dims 64 and 128 and a padded one (8), rows that see no
// key (doc_causal at 700 rows).
std::vector<Case> every_third_case() {
  std::vector<Case> cases;
  const std::vector<Case> all = example_cases();
  for (size_t i = 0; i < all.size(); i += 3) cases.push_back(all[i]);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Examples, LseGradientMatchesReference,
                         testing::Combine(testing::ValuesIn(every_third_case()), testing::Bool()));

// Head dims above 128 run on the kernel for 256 (64-key items, the warpgroups splitting the
// step's rows and then the head dim, Pᵀ and dS through shared memory).
INSTANTIATE_TEST_SUITE_P(HeadDim256, BackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::wide_head_cases()),
                                          testing::Bool()));

// Soft-capped logits: P from the capped scores, dS through the cap's slope 1 - tanh².
INSTANTIATE_TEST_SUITE_P(Softcap, BackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::softcap_cases()),
                                          testing::Bool()));
// Attention sinks: the LSE that includes them, and their gradient (bwd_sink_gradient.cu) from
// the preprocess's rows, without and with a gradient of the LSE, and packed between NaN rows.
INSTANTIATE_TEST_SUITE_P(Sinks, BackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::sink_cases()),
                                          testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Sinks, LseGradientMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::sink_cases()),
                                          testing::Bool()));
// ALiBi: P from the biased scores (the bias adds nothing to dS's slope), without and with a
// gradient of the LSE, and packed between NaN rows (positions from each sequence's first row).
INSTANTIATE_TEST_SUITE_P(Alibi, BackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::alibi_cases()),
                                          testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Alibi, LseGradientMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::alibi_cases()),
                                          testing::Bool()));

// V, O, dO and dV with a head dim of their own (MLA), without and with a gradient of the LSE,
// and packed between NaN rows.
INSTANTIATE_TEST_SUITE_P(ValueHeadDim, BackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::value_head_dim_cases()),
                                          testing::Bool()));
INSTANTIATE_TEST_SUITE_P(ValueHeadDim, LseGradientMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::value_head_dim_cases()),
                                          testing::Bool()));

// The default mode's dispatch over all the kv slices at once (BwdShape::slice_group), which the
// automatic schedule takes for this grid of a few waves on the H200's 132 SMs
// (bwd_head_splits_test's AutomaticSchedule); deterministic mode keeps its own order.
INSTANTIATE_TEST_SUITE_P(InterleavedSlices, BackwardMatchesReference,
                         testing::Combine(testing::Values(Case{
                                              "causal", {}, 640, 640, 64, 16, 8, DType::kBFloat16}),
                                          testing::Bool()));

INSTANTIATE_TEST_SUITE_P(Softcap, LseGradientMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::softcap_cases()),
                                          testing::Bool()));

// The packed layout with NaN rows after every sequence (Problem), more than any load takes past
// a sequence's end (a key tile's 127): the rows past the end are zeroed before any product
// multiplies with them (bwd_tails.cuh), at every head dim, both dQ modes, with a gradient of the
// LSE (whose gap rows are NaN too).
constexpr int kGapRows = 130;

class PackedBackwardMatchesReference : public testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(PackedBackwardMatchesReference, Gradients) {
  SKIP_WITHOUT_HOPPER();
  check_gradients(std::get<0>(GetParam()), std::get<1>(GetParam()), true, kGapRows);
}

INSTANTIATE_TEST_SUITE_P(Examples, PackedBackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(every_third_case()), testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Sinks, PackedBackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::sink_cases()),
                                          testing::Bool()));
INSTANTIATE_TEST_SUITE_P(Alibi, PackedBackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::alibi_cases()),
                                          testing::Bool()));
INSTANTIATE_TEST_SUITE_P(ValueHeadDim, PackedBackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::value_head_dim_cases()),
                                          testing::Bool()));
INSTANTIATE_TEST_SUITE_P(HeadDim256, PackedBackwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::wide_head_cases()),
                                          testing::Bool()));

// Head splits (BackwardArgs::head_splits) forced, where the automatic choice at these small
// shapes splits every group: the group's heads in one CTA (1), in parts of one head, and in
// uneven parts (3 of a group of 4: 1, 1 and 2 heads); strided and packed, both dQ modes, with a
// gradient of the LSE.
struct SplitCase {
  Case c;
  int head_splits, gap;
};

void PrintTo(const SplitCase& s, std::ostream* os) {
  cm::gpu_test::PrintTo(s.c, os);
  *os << " head_splits " << s.head_splits << " gap " << s.gap;
}

class HeadSplitsMatchReference : public testing::TestWithParam<std::tuple<SplitCase, bool>> {};

TEST_P(HeadSplitsMatchReference, Gradients) {
  SKIP_WITHOUT_HOPPER();
  const SplitCase& s = std::get<0>(GetParam());
  check_gradients(s.c, std::get<1>(GetParam()), true, s.gap, s.head_splits);
}

std::vector<SplitCase> split_cases() {
  using B = DType;
  const Case mqa{"causal", {}, 385, 129, 128, 4, 1, B::kBFloat16};  // a group of 4
  const Case doc{
      "doc_causal", {{"docs", cm::Segments::from_lengths({90, 1, 150, 59})}}, 300, 300, 64, 4, 2,
      B::kFloat16};
  const Case wide{"causal", {}, 129, 300, 200, 4, 2, B::kFloat16};  // the kernel for 256
  Case mla = mqa;  // the split sums of dK and dV, each with its own columns
  mla.head_dim = 192;
  mla.head_dim_v = 128;
  return {{mqa, 1, 0},  {mqa, 3, 0},         {mqa, 4, 0},        {doc, 1, 0},
          {doc, 2, 0},  {doc, 2, kGapRows},  {doc, 1, kGapRows}, {wide, 1, 0},
          {wide, 2, 0}, {wide, 2, kGapRows}, {mla, 3, 0},        {mla, 2, kGapRows}};
}

INSTANTIATE_TEST_SUITE_P(Forced, HeadSplitsMatchReference,
                         testing::Combine(testing::ValuesIn(split_cases()), testing::Bool()));

// Deterministic mode: bitwise-identical results over 10 runs, also when captured in a graph, at
// head dims 128 and 256 (whose two items per key tile add to dQ in their own order); with
// attention sinks, whose gradient must repeat too.
class BackwardDeterminism : public testing::TestWithParam<int> {};

TEST_P(BackwardDeterminism, BitwiseOverRunsAndGraphReplays) {
  SKIP_WITHOUT_HOPPER();
  Case c{"causal", {}, 1000, 1000, GetParam(), 4, 2, DType::kBFloat16};
  c.sinks = true;
  Problem problem(c, true);
  problem.prepare(7);
  problem.poison();
  problem.run(nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  const auto first = problem.results();
  const std::vector<float> first_dsinks = problem.sink_gradient();
  expect_close(first[0], problem.ref_dq, DType::kBFloat16, "dq");
  for (int run = 1; run < 10; ++run) {
    problem.poison();
    problem.run(nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    ASSERT_EQ(problem.results(), first) << "run " << run << " differs";
    ASSERT_EQ(problem.sink_gradient(), first_dsinks) << "run " << run << "'s dsinks differ";
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  problem.run(stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    problem.poison();
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    ASSERT_EQ(problem.results(), first) << "graph replay " << replay << " differs";
    ASSERT_EQ(problem.sink_gradient(), first_dsinks) << "graph replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(HeadDims, BackwardDeterminism, testing::Values(128, 256));

}  // namespace
