// The sm90 forward kernel against the float64 CPU reference driven by the same descriptor
// (include/compilemask/reference.h), for every example mask at small odd shapes, with GQA,
// head dims 64 and 128 (and padded ones), both dtypes and both mainloops, on one CTA per SM and
// on two CTAs, a selection at head dims above 128 (the kernel for 256), one with soft-capped
// logits, and split keys: forced on every example, automatic and forced on few query rows
// against many keys. Skips without a Hopper GPU.
#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>
#include <compilemask/reference.h>

#include "gpu_test_support.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

using cm::gpu_test::Case;
using cm::gpu_test::DeviceBuffer;
using cm::gpu_test::example_cases;
using cm::gpu_test::make_plan;
using cm::gpu_test::random_rounded;
using cm::gpu_test::Rounded;

// (case, mainloop, max_ctas, num_splits)
class ForwardMatchesReference
    : public testing::TestWithParam<std::tuple<Case, cm::cuda::Mainloop, int, int>> {};

TEST_P(ForwardMatchesReference, OutputAndLse) {
  SKIP_WITHOUT_HOPPER();
  const Case& c = std::get<0>(GetParam());
  const int batch = 2;
  // The reference needs the full (batch, head) instance map; the kernel reads it as well.
  const cm::Plan plan = make_plan(c.example, c.params, c.nq, c.nk, batch, c.heads_q);
  const cm::AttentionShape shape{batch, c.heads_q, c.heads_kv, c.nq, c.nk, c.head_dim};
  const size_t nq_elems = size_t(batch) * c.heads_q * c.nq * c.head_dim;
  const size_t nk_elems = size_t(batch) * c.heads_kv * c.nk * c.head_dim;
  const size_t lse_elems = size_t(batch) * c.heads_q * c.nq;

  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(c.example) + c.nq));
  const Rounded q = random_rounded(nq_elems, c.dtype, rng);
  const Rounded k = random_rounded(nk_elems, c.dtype, rng);
  const Rounded v = random_rounded(nk_elems, c.dtype, rng);
  std::vector<float> ref_out(nq_elems), ref_lse(lse_elems);
  cm::ReferenceOptions options;
  options.accumulate = cm::Accumulate::kFloat64;
  options.softcap = c.softcap;
  cm::reference_forward(plan.blob(), shape, q.values.data(), k.values.data(), v.values.data(),
                        ref_out.data(), ref_lse.data(), options);

  DeviceBuffer dq(nq_elems * 2), dk(nk_elems * 2), dv(nk_elems * 2), dout(nq_elems * 2);
  DeviceBuffer dlse(lse_elems * 4);
  CUDA_OK(cudaMemcpy(dq.ptr, q.bits.data(), nq_elems * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk.ptr, k.bits.data(), nk_elems * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv.ptr, v.bits.data(), nk_elems * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout.ptr, 0xff, nq_elems * 2));   // NaN in both 16-bit formats
  CUDA_OK(cudaMemset(dlse.ptr, 0xff, lse_elems * 4));  // NaN

  cm::cuda::ForwardArgs args;
  static_cast<cm::cuda::Problem&>(args) = cm::cuda::dense_problem(
      c.dtype, shape, dq.ptr, dk.ptr, dv.ptr, dout.ptr, static_cast<float*>(dlse.ptr));
  args.softcap = c.softcap;
  args.mainloop = std::get<1>(GetParam());
  args.max_ctas = std::get<2>(GetParam());
  args.num_splits = std::get<3>(GetParam());
  const cm::cuda::DeviceDescriptor descriptor(plan.blob());
  const size_t workspace_bytes = cm::cuda::forward_workspace_bytes(descriptor.view(), args);
  DeviceBuffer workspace(workspace_bytes);
  CUDA_OK(cudaMemset(workspace.ptr, 0xff, workspace_bytes));  // forward() must not read it
  cm::cuda::forward(descriptor.view(), args, workspace.ptr, workspace_bytes, nullptr);
  CUDA_OK(cudaDeviceSynchronize());

  std::vector<uint16_t> out_bits(nq_elems);
  std::vector<float> lse(lse_elems);
  CUDA_OK(cudaMemcpy(out_bits.data(), dout.ptr, nq_elems * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(lse.data(), dlse.ptr, lse_elems * 4, cudaMemcpyDeviceToHost));

  // Tolerance: a few units of the output format's rounding (P is rounded to it too).
  const double eps = c.dtype == cm::cuda::DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  double max_err = 0, max_lse_err = 0;
  for (size_t i = 0; i < nq_elems; ++i) {
    const float o = cm::cuda::from_storage_bits(out_bits[i], c.dtype);
    ASSERT_FALSE(std::isnan(o)) << "output element " << i << " is NaN (unwritten or NaN)";
    max_err = std::max(max_err, std::abs(double(o) - ref_out[i]));
  }
  for (size_t i = 0; i < lse_elems; ++i) {
    ASSERT_FALSE(std::isnan(lse[i])) << "LSE element " << i << " is NaN";
    if (std::isinf(ref_lse[i])) {
      ASSERT_TRUE(std::isinf(lse[i]) && lse[i] < 0)
          << "row " << i << " sees no key: LSE must be -inf";
      const size_t row = i * c.head_dim;
      for (int d = 0; d < c.head_dim; ++d) {
        ASSERT_EQ(cm::cuda::from_storage_bits(out_bits[row + d], c.dtype), 0.f)
            << "row " << i << " sees no key: O must be 0";
      }
    } else {
      max_lse_err = std::max(max_lse_err, std::abs(double(lse[i]) - ref_lse[i]) /
                                              std::max(1.0, std::abs(double(ref_lse[i]))));
    }
  }
  EXPECT_LE(max_err, 8 * eps) << "max |O - O_ref|";
  EXPECT_LE(max_lse_err, 1e-3) << "max relative LSE error";
}

const auto kMainloops = testing::Values(cm::cuda::Mainloop::kSerial, cm::cuda::Mainloop::kPingpong);
const auto kAutomatic = testing::Values(0);  // num_splits: split keys when the SMs are not filled
const auto kUnsplit = testing::Values(1);

// One CTA per SM: about one work item each at these shapes (some of them split by the
// automatic choice).
INSTANTIATE_TEST_SUITE_P(Examples, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(example_cases()), kMainloops,
                                          testing::Values(0), kAutomatic));

// Two CTAs take every work item: each runs its consumers' tile stream across many items,
// fully masked ones included.
INSTANTIATE_TEST_SUITE_P(TwoCtas, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(example_cases()), kMainloops,
                                          testing::Values(2), kUnsplit));

// Every example with its key tiles in three parts: parts that start inside runs, end on
// partial tiles, hold no tile (rows of two key tiles) or only masked ones.
INSTANTIATE_TEST_SUITE_P(SplitKeys, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(example_cases()), kMainloops,
                                          testing::Values(0), testing::Values(3)));

// Few query rows against many keys: split automatically, not at all, and into more parts
// (256) than the rows have key tiles, on all SMs and on two CTAs.
INSTANTIATE_TEST_SUITE_P(Decode, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::decode_cases()),
                                          kMainloops, testing::Values(0, 2),
                                          testing::Values(0, 1, 256)));

// Head dims above 128 run on the kernel for 256 (64-key K/V stages, one Q buffer that also
// stages O).
INSTANTIATE_TEST_SUITE_P(HeadDim256, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::wide_head_cases()),
                                          kMainloops, testing::Values(0, 2), kAutomatic));

// Soft-capped logits (the kernels' tanh before masking), in both mainloops, keys whole and in
// two parts.
INSTANTIATE_TEST_SUITE_P(Softcap, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::softcap_cases()),
                                          kMainloops, testing::Values(0), testing::Values(1, 2)));

}  // namespace
