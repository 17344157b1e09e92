// cm::cuda::permute_rows: its argument checks (host only), and on a Hopper GPU the gather of
// random rows in both layouts, bit for bit, with NaN rows for order entries out of range.
#include "gpu_test_support.h"

#include <compilemask/cuda_token_order.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using cm::cuda::TensorRef;
using cm::gpu_test::DeviceBuffer;

constexpr int32_t kBatch = 2, kHeads = 3, kRows = 37, kDim = 40;

// A [B, S, H, D] (heads_first false) or [B, H, S, D] tensor's element strides, as a TensorRef.
TensorRef layout(const void* data, bool heads_first) {
  if (heads_first) return {data, int64_t{kHeads} * kRows * kDim, kDim, int64_t{kRows} * kDim};
  return {data, int64_t{kRows} * kHeads * kDim, int64_t{kHeads} * kDim, kDim};
}

int64_t offset(const TensorRef& t, int b, int s, int h) {
  return b * t.stride_b + s * t.stride_s + h * t.stride_h;
}

void expect_rejected(const TensorRef& src, const TensorRef& dst, int32_t rows, int32_t head_dim,
                     const int32_t* order, const std::string& rule) {
  try {
    cm::cuda::permute_rows(src, dst, kBatch, kHeads, rows, head_dim, order, nullptr);
    ADD_FAILURE() << "accepted; wanted: " << rule;
  } catch (const cm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cm::cuda::permute_rows: " + rule), std::string::npos)
        << e.what();
  }
}

TEST(PermuteRows, RejectsBadArgumentsBeforeAnyCudaCall) {
  alignas(16) static uint16_t a[16], b[16];
  static const int32_t order[1] = {0};
  const TensorRef src = layout(a, false), dst = layout(b, false);
  expect_rejected(src, dst, 0, kDim, order, "batch, heads and rows must be >= 1");
  expect_rejected(src, dst, kRows, 12, order, "head_dim must be a positive multiple of 8");
  expect_rejected({a + 1, src.stride_b, src.stride_s, src.stride_h}, dst, kRows, kDim, order,
                  "src.data must be 16-byte aligned");
  expect_rejected(src, {b, dst.stride_b, 12, dst.stride_h}, kRows, kDim, order,
                  "dst.stride_s must be a positive multiple of 8 elements");
  expect_rejected(src, dst, kRows, kDim, nullptr, "order is null");
  expect_rejected(src, src, kRows, kDim, order, "src and dst must not overlap");
}

TEST(PermuteRows, GathersEveryRowInBothLayouts) {
  SKIP_WITHOUT_HOPPER();
  const size_t count = size_t{kBatch} * kHeads * kRows * kDim;
  std::mt19937 rng(11);
  std::vector<uint16_t> host(count);
  for (uint16_t& x : host) x = static_cast<uint16_t>(rng() & 0x7fffu);  // finite, varied bits
  std::vector<int32_t> order(kRows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  order[5] = kRows;  // out of range: that row becomes NaN
  DeviceBuffer src(count * 2), dst(count * 2), dev_order(kRows * 4);
  ASSERT_TRUE(src.ptr && dst.ptr && dev_order.ptr);
  CUDA_OK(cudaMemcpy(src.ptr, host.data(), count * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dev_order.ptr, order.data(), kRows * 4, cudaMemcpyHostToDevice));
  for (const bool src_heads_first : {false, true}) {
    for (const bool dst_heads_first : {false, true}) {
      const TensorRef in = layout(src.ptr, src_heads_first);
      const TensorRef out = layout(dst.ptr, dst_heads_first);
      CUDA_OK(cudaMemset(dst.ptr, 0, count * 2));
      cm::cuda::permute_rows(in, out, kBatch, kHeads, kRows, kDim,
                             static_cast<const int32_t*>(dev_order.ptr), nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      std::vector<uint16_t> got(count);
      CUDA_OK(cudaMemcpy(got.data(), dst.ptr, count * 2, cudaMemcpyDeviceToHost));
      for (int b = 0; b < kBatch; ++b) {
        for (int s = 0; s < kRows; ++s) {
          for (int h = 0; h < kHeads; ++h) {
            for (int d = 0; d < kDim; ++d) {
              const uint16_t want =
                  order[s] < kRows
                      ? host[offset(layout(nullptr, src_heads_first), b, order[s], h) + d]
                      : uint16_t{0xffff};
              ASSERT_EQ(got[offset(layout(nullptr, dst_heads_first), b, s, h) + d], want)
                  << "layouts " << src_heads_first << dst_heads_first << " b " << b << " s " << s
                  << " h " << h << " d " << d;
            }
          }
        }
      }
    }
  }
}

}  // namespace
