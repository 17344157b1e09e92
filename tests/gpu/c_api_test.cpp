// The C entry points of libcompilemask_cuda.so (include/compilemask/cuda_c.h), on the host: the
// size queries answer what the C++ API answers for the same sizes and counts, and 0 for what it
// rejects; the entry points turn a rejected problem into return code 1 and the C++ API's
// message, cut to the caller's buffer. Everything here fails before any CUDA call or reads no
// device, so this suite needs no GPU; the tensors are host memory and nothing is launched.
#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>
#include <compilemask/cuda_backward.h>
#include <compilemask/cuda_c.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

constexpr int kN = 256, kHeads = 4, kDim = 128;

// A causal plan of kN rows and one mask for every head, in the kernels' 128x128 tiles.
cm::Plan causal_plan() {
  const cm::CompileResult compiled =
      cm::compile("mask causal() {\n  q in all: k in [0, diag]\n}\n", "causal.mask");
  if (!compiled) throw std::runtime_error("the causal mask does not compile");
  return compiled.mask->specialize({}, {.nq = kN, .nk = kN}, {128, 128});
}

class CApi : public testing::Test {
 protected:
  CApi() : plan_(causal_plan()), tensors_(std::aligned_alloc(256, 4 * kTensorBytes), &std::free) {}

  static constexpr size_t kTensorBytes = size_t{kHeads} * kN * kDim * 2;

  // The descriptor's host copy, standing in for the device copy too: no case reads it there.
  const void* descriptor() const { return plan_.blob(); }

  char* tensor(int i) const { return static_cast<char*>(tensors_.get()) + i * kTensorBytes; }

  // cm_cuda_forward on [1, kHeads, kN, kDim] tensors (strides {batch, row, head}) with these
  // head dims; the message in error_.
  int forward(int dtype, int head_dim, size_t error_len, int head_dim_v = 0) {
    const int64_t strides[3] = {int64_t{kHeads} * kN * kDim, kDim, int64_t{kN} * kDim};
    const int64_t lse_strides[2] = {int64_t{kHeads} * kN, kN};
    return cm_cuda_forward(descriptor(), descriptor(), dtype, 1, kHeads, kHeads, kN, kN, head_dim,
                           head_dim_v, 0.f, 0.f, nullptr, nullptr, 0, 1, nullptr, 0, 0, 0,
                           tensor(0), strides, tensor(1), strides, tensor(2), strides, tensor(3),
                           strides, reinterpret_cast<float*>(tensor(3)), lse_strides, nullptr,
                           nullptr, 0, 0, 0, nullptr, 0, nullptr, error_len == 0 ? nullptr : error_,
                           error_len);
  }

  // cm_cuda_backward on the same tensors (dO, dQ, dK and dV alias them: only checked), without
  // sinks and ALiBi; dsinks: where their gradient would go.
  int backward(int dtype, int head_splits, float* dsinks = nullptr) {
    const int64_t strides[3] = {int64_t{kHeads} * kN * kDim, kDim, int64_t{kN} * kDim};
    const int64_t lse_strides[2] = {int64_t{kHeads} * kN, kN};
    return cm_cuda_backward(
        descriptor(), descriptor(), dtype, 1, kHeads, 1, kN, kN, kDim, 0, 0.f, 0.f, nullptr,
        nullptr, tensor(0), strides, tensor(1), strides, tensor(2), strides, tensor(3), strides,
        tensor(0), strides, reinterpret_cast<const float*>(tensor(3)), lse_strides, nullptr, dsinks,
        tensor(0), strides, tensor(1), strides, tensor(2), strides, nullptr, nullptr, 0, 0, 0, 0,
        head_splits, nullptr, 0, nullptr, error_, sizeof(error_));
  }

  cm::Plan plan_;
  std::unique_ptr<void, decltype(&std::free)> tensors_;
  char error_[512] = {};
};

TEST_F(CApi, TheLibraryAnswersTheHeadersVersion) {
  EXPECT_EQ(cm_cuda_abi_version(), CM_CUDA_ABI_VERSION);
}

// Each size argument lands where the C++ API reads it: the answers differ with each one (the
// forward's split parts with head_dim_v, the backward's accumulators with the wider head dim).
TEST_F(CApi, SizeQueriesAnswerAsTheCppApi) {
  const cm::cuda::DescriptorView view{descriptor(), descriptor()};
  const std::pair<int, int> head_dims[] = {{64, 0}, {128, 0}, {256, 0}, {192, 128}, {64, 128}};
  for (const int heads_kv : {1, 2, 4}) {
    for (const auto& [head_dim, head_dim_v] : head_dims) {
      SCOPED_TRACE("heads_kv " + std::to_string(heads_kv) + " head_dim " +
                   std::to_string(head_dim) + " head_dim_v " + std::to_string(head_dim_v));
      cm::cuda::ForwardArgs f;
      f.batch = 3;
      f.heads_q = kHeads;
      f.heads_kv = heads_kv;
      f.head_dim = head_dim;
      f.head_dim_v = head_dim_v;
      for (const int num_splits : {1, 5}) {
        f.num_splits = num_splits;
        EXPECT_EQ(cm_cuda_forward_workspace_bytes_for(descriptor(), descriptor(), 3, kHeads,
                                                      heads_kv, head_dim, head_dim_v, num_splits),
                  cm::cuda::forward_workspace_bytes(view, f));
        EXPECT_EQ(cm_cuda_forward_num_splits(descriptor(), descriptor(), 3, kHeads, heads_kv,
                                             head_dim, head_dim_v, num_splits),
                  num_splits);
      }
      cm::cuda::BackwardArgs b;
      static_cast<cm::cuda::Problem&>(b) = f;
      for (int head_splits = 1; head_splits <= kHeads / heads_kv; ++head_splits) {
        for (const int deterministic : {0, 1}) {
          b.head_splits = head_splits;
          b.deterministic = deterministic != 0;
          EXPECT_EQ(cm_cuda_backward_workspace_bytes_for(descriptor(), descriptor(), 3, kHeads,
                                                         heads_kv, head_dim, head_dim_v,
                                                         head_splits, deterministic),
                    cm::cuda::backward_workspace_bytes(view, b));
          EXPECT_EQ(cm_cuda_backward_head_splits(descriptor(), descriptor(), 3, kHeads, heads_kv,
                                                 head_dim, head_dim_v, head_splits, deterministic),
                    head_splits);
        }
      }
    }
  }
  // A kv group of one head never splits, so the automatic count needs no device.
  EXPECT_EQ(
      cm_cuda_backward_head_splits(descriptor(), descriptor(), 1, kHeads, kHeads, kDim, 0, 0, 1),
      1);
}

TEST_F(CApi, SizeQueriesAnswerZeroForWhatTheEntryPointsReject) {
  const void* d = descriptor();
  EXPECT_EQ(cm_cuda_forward_workspace_bytes_for(nullptr, nullptr, 1, kHeads, 1, kDim, 0, 1), 0u);
  EXPECT_EQ(cm_cuda_forward_workspace_bytes_for(d, d, 1, kHeads, 1, 4, 0, 1), 0u);  // head dim
  EXPECT_EQ(cm_cuda_forward_workspace_bytes_for(d, d, 1, kHeads, 1, kDim, 264, 1), 0u);
  EXPECT_EQ(cm_cuda_forward_workspace_bytes_for(d, d, 1, kHeads, 1, kDim, 0, 300), 0u);
  EXPECT_EQ(cm_cuda_forward_num_splits(d, d, 1, kHeads, 3, kDim, 0, 1), 0);  // 4 on 3 kv heads
  EXPECT_EQ(cm_cuda_backward_workspace_bytes_for(d, d, 65536, kHeads, 1, kDim, 0, 1, 0), 0u);
  EXPECT_EQ(cm_cuda_backward_workspace_bytes_for(d, d, 1, kHeads, 1, kDim, 0, kHeads + 1, 0), 0u);
  EXPECT_EQ(cm_cuda_backward_workspace_bytes_for(d, d, 1, kHeads, 1, kDim, -8, 1, 0), 0u);
  EXPECT_EQ(cm_cuda_backward_head_splits(d, d, 1, kHeads, 1, kDim, 0, -1, 1), 0);
}

TEST_F(CApi, RejectedProblemsReturnOneWithTheMessage) {
  EXPECT_EQ(forward(0, 100, sizeof(error_)), 1);
  EXPECT_STREQ(error_,
               "cm::cuda::forward: head_dim 100 is not supported (a multiple of 8 from "
               "8 to 256)");
  EXPECT_EQ(forward(0, kDim, sizeof(error_), 12), 1);
  EXPECT_STREQ(error_,
               "cm::cuda::forward: head_dim_v 12 is not supported (0 means head_dim, else a "
               "multiple of 8 from 8 to 256)");
  EXPECT_EQ(backward(7, 1), 1);
  EXPECT_NE(std::strstr(error_, "cm::cuda::backward"), nullptr) << error_;
  EXPECT_NE(std::strstr(error_, "dtype must be bf16 or fp16"), nullptr) << error_;
  EXPECT_EQ(backward(0, kHeads + 1), 1);
  EXPECT_NE(std::strstr(error_, "head_splits must be 0 (automatic)"), nullptr) << error_;
  EXPECT_EQ(backward(0, 1, reinterpret_cast<float*>(tensor(3))), 1);
  EXPECT_NE(std::strstr(error_, "dsinks needs sinks"), nullptr) << error_;
  const int64_t strides[3] = {kN * kDim, kDim, kN * kDim};
  const int32_t order[1] = {0};
  EXPECT_EQ(cm_cuda_permute_rows(tensor(0), strides, tensor(1), strides, 0, 1, kN, kDim, order,
                                 nullptr, error_, sizeof(error_)),
            1);
  EXPECT_NE(std::strstr(error_, "batch, heads and rows must be >= 1"), nullptr) << error_;
}

TEST_F(CApi, MessagesAreCutToTheCallersBuffer) {
  ASSERT_EQ(forward(0, 100, sizeof(error_)), 1);
  const std::string whole = error_;
  std::memset(error_, 'x', sizeof(error_));
  EXPECT_EQ(forward(0, 100, 12), 1);
  EXPECT_EQ(std::string(error_), whole.substr(0, 11));  // 11 characters and the terminator
  EXPECT_EQ(error_[12], 'x') << "a byte past error_len was written";
  EXPECT_EQ(forward(0, 100, 0), 1);  // no buffer: the code alone
}

}  // namespace
