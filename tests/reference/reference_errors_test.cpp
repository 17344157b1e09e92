// Bad arguments to the reference attention: each gets a cm::Error naming the argument and rule.
#include <compilemask/reference.h>

#include "mask_cases.h"
#include "tensors.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace cm::test {
namespace {

class ReferenceErrors : public testing::Test {
 protected:
  ReferenceErrors()
      : rng_(7), set_(make_mask_set(MaskKind::kCausal, 17, 33, 2, 4, {16, 16}, rng_)) {
    buffer_ = random_tensor(size_t{1} << 16, rng_);
  }

  // Runs forward and backward with `shape` and expects both to throw a cm::Error whose message
  // contains `expected`.
  void expect_rejected(const AttentionShape& shape, const std::string& expected,
                       const ReferenceOptions& options = {}, const void* blob = nullptr) {
    const void* descriptor = blob ? blob : set_.blob.data();
    float* t = buffer_.data();
    for (int pass = 0; pass < 2; ++pass) {
      try {
        if (pass == 0) {
          reference_forward(descriptor, shape, t, t, t, t, t, options);
        } else {
          reference_backward(descriptor, shape, t, t, t, t, t, t, nullptr, t, t, t, nullptr,
                             options);
        }
        ADD_FAILURE() << (pass == 0 ? "forward" : "backward") << " accepted a bad call; expected "
                      << expected;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
            << "message: " << e.what() << "\nexpected to contain: " << expected;
      }
    }
  }

  static constexpr AttentionShape kGood{2, 4, 2, 17, 33, 8};
  std::mt19937 rng_;
  MaskSet set_;
  std::vector<float> buffer_;  // large enough for every tensor of kGood
};

TEST_F(ReferenceErrors, ShapeMustMatchTheDescriptor) {
  AttentionShape s = kGood;
  s.nq = 18;
  expect_rejected(s, "shape.nq = 18 must equal the descriptor's nq = 17");
  s = kGood;
  s.nk = 32;
  expect_rejected(s, "shape.nk = 32 must equal the descriptor's nk = 33");
  s = kGood;
  s.batch = 1;
  expect_rejected(s, "shape.batch = 1 must equal the descriptor's batch = 2");
  s = kGood;
  s.heads_q = 2;
  expect_rejected(s, "shape.heads_q = 2 must equal the descriptor's heads = 4");
  s = kGood;
  s.batch = 0;
  expect_rejected(s, "shape.batch = 0 must be > 0");
}

TEST_F(ReferenceErrors, HeadsAndHeadDimMustBeValid) {
  AttentionShape s = kGood;
  s.heads_kv = 3;
  expect_rejected(s, "shape.heads_q = 4 must be a multiple of shape.heads_kv = 3");
  s.heads_kv = 0;
  expect_rejected(s, "shape.heads_kv = 0 must be > 0");
  s = kGood;
  s.head_dim = 0;
  expect_rejected(s, "shape.head_dim = 0 must be > 0");
  s = kGood;
  s.head_dim_v = -8;
  expect_rejected(s, "shape.head_dim_v = -8 must be >= 0 (0 means head_dim)");
}

TEST_F(ReferenceErrors, OptionsMustBeValid) {
  ReferenceOptions options;
  options.threads = -1;
  expect_rejected(kGood, "options.threads = -1 must be >= 0", options);
  options = {};
  options.scale = -1.0f;
  expect_rejected(kGood, "options.scale must be finite and >= 0", options);
  for (const float softcap :
       {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    options = {};
    options.softcap = softcap;
    expect_rejected(kGood, "options.softcap must be finite and >= 0", options);
  }
}

TEST_F(ReferenceErrors, SinksMustBeFiniteOrMinusInfinity) {
  std::vector<float> sinks = {0.5f, -std::numeric_limits<float>::infinity(), 1.0f, 2.0f};
  ReferenceOptions options;
  options.sinks = sinks.data();
  for (const float bad :
       {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    sinks[2] = bad;
    expect_rejected(
        kGood, "options.sinks[2] = " + std::to_string(bad) + " must be finite or -inf (no sink)",
        options);
  }
}

TEST_F(ReferenceErrors, AlibiSlopesMustBeFinite) {
  std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  ReferenceOptions options;
  options.alibi_slopes = slopes.data();
  for (const float bad :
       {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::quiet_NaN()}) {
    slopes[3] = bad;
    expect_rejected(kGood, "options.alibi_slopes[3] = " + std::to_string(bad) + " must be finite",
                    options);
  }
}

TEST_F(ReferenceErrors, SinkGradientNeedsSinks) {
  float* t = buffer_.data();
  try {
    reference_backward(set_.blob.data(), kGood, t, t, t, t, t, t, nullptr, t, t, t, t);
    ADD_FAILURE() << "dsinks without sinks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dsinks needs options.sinks"), std::string::npos)
        << e.what();
  }
}

TEST_F(ReferenceErrors, DescriptorMustBeACompileMaskBlob) {
  std::vector<uint64_t> garbage(set_.blob.size(), 0);
  expect_rejected(kGood, "descriptor does not start with the CMSK magic number", {},
                  garbage.data());
}

TEST_F(ReferenceErrors, TensorsMustNotBeNull) {
  float* t = buffer_.data();
  EXPECT_THROW(reference_forward(set_.blob.data(), kGood, t, nullptr, t, t, t), Error);
  try {
    reference_backward(set_.blob.data(), kGood, t, t, t, t, t, t, nullptr, t, nullptr, t, nullptr);
    ADD_FAILURE() << "a null dk was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dk must not be null"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cm::test
