// The sm90 forward kernel against the float64 CPU reference driven by the same descriptor
// (include/compilemask/reference.h), for every example mask at small odd shapes, with GQA,
// both head dims, both dtypes and both mainloops; plus the launcher's input validation. Skips
// without a Hopper GPU.
#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>
#include <compilemask/reference.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

bool have_hopper() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return false;
  cudaDeviceProp prop{};
  return cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major == 9 && prop.minor == 0;
}

#define SKIP_WITHOUT_HOPPER() \
  if (!have_hopper()) GTEST_SKIP() << "no compute capability 9.0 GPU: sm90 kernel tests skipped"

void cuda_ok(cudaError_t status) {
  ASSERT_EQ(status, cudaSuccess) << cudaGetErrorString(status);
}

std::string read_example(const std::string& name) {
  std::ifstream in(std::string(CM_SOURCE_DIR) + "/examples/" + name + ".mask");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

cm::Plan make_plan(const std::string& example, const cm::Params& params, int nq, int nk, int batch,
                   int heads) {
  cm::CompileResult compiled = cm::compile(read_example(example), example + ".mask");
  if (!compiled) throw std::runtime_error("example " + example + " does not compile");
  return compiled.mask->specialize(params, {.nq = nq, .nk = nk, .batch = batch, .heads = heads},
                                   {128, 128});
}

// Values rounded to the kernel's input precision, as floats (the reference reads these) and
// as the 16-bit device encoding.
struct Rounded {
  std::vector<float> values;
  std::vector<uint16_t> bits;
};

Rounded random_rounded(size_t n, cm::cuda::DType dtype, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  Rounded r{std::vector<float>(n), std::vector<uint16_t>(n)};
  for (size_t i = 0; i < n; ++i) {
    const float x = normal(rng);
    if (dtype == cm::cuda::DType::kBFloat16) {
      const __nv_bfloat16 b = __float2bfloat16(x);
      r.values[i] = __bfloat162float(b);
      r.bits[i] = static_cast<__nv_bfloat16_raw>(b).x;
    } else {
      const __half h = __float2half(x);
      r.values[i] = __half2float(h);
      r.bits[i] = static_cast<__half_raw>(h).x;
    }
  }
  return r;
}

float decode(uint16_t bits, cm::cuda::DType dtype) {
  if (dtype == cm::cuda::DType::kBFloat16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// Device buffer freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { cudaMalloc(&ptr, bytes); }
  ~DeviceBuffer() { cudaFree(ptr); }
};

struct Case {
  std::string example;
  cm::Params params;
  int nq, nk;
  int head_dim;
  int heads_q, heads_kv;
  cm::cuda::DType dtype;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.example << " nq=" << c.nq << " nk=" << c.nk << " d=" << c.head_dim;
}

class ForwardMatchesReference
    : public testing::TestWithParam<std::tuple<Case, cm::cuda::Mainloop>> {};

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
  cm::reference_forward(plan.blob(), shape, q.values.data(), k.values.data(), v.values.data(),
                        ref_out.data(), ref_lse.data(), options);

  DeviceBuffer dq(nq_elems * 2), dk(nk_elems * 2), dv(nk_elems * 2), dout(nq_elems * 2);
  DeviceBuffer dlse(lse_elems * 4), workspace(cm::cuda::forward_workspace_bytes());
  cuda_ok(cudaMemcpy(dq.ptr, q.bits.data(), nq_elems * 2, cudaMemcpyHostToDevice));
  cuda_ok(cudaMemcpy(dk.ptr, k.bits.data(), nk_elems * 2, cudaMemcpyHostToDevice));
  cuda_ok(cudaMemcpy(dv.ptr, v.bits.data(), nk_elems * 2, cudaMemcpyHostToDevice));
  cuda_ok(cudaMemset(dout.ptr, 0xff, nq_elems * 2));   // NaN in both 16-bit formats
  cuda_ok(cudaMemset(dlse.ptr, 0xff, lse_elems * 4));  // NaN

  // [B, H, S, D] dense, as the reference lays its tensors out.
  const auto bhsd = [&](const void* data, int heads, int rows) {
    const int64_t d = c.head_dim;
    return cm::cuda::TensorRef{data, heads * rows * d, d, rows * d};
  };
  cm::cuda::ForwardArgs args;
  args.dtype = c.dtype;
  args.batch = batch;
  args.heads_q = c.heads_q;
  args.heads_kv = c.heads_kv;
  args.nq = c.nq;
  args.nk = c.nk;
  args.head_dim = c.head_dim;
  args.mainloop = std::get<1>(GetParam());
  args.q = bhsd(dq.ptr, c.heads_q, c.nq);
  args.k = bhsd(dk.ptr, c.heads_kv, c.nk);
  args.v = bhsd(dv.ptr, c.heads_kv, c.nk);
  args.out = bhsd(dout.ptr, c.heads_q, c.nq);
  args.lse = static_cast<float*>(dlse.ptr);
  args.lse_stride_b = int64_t{c.heads_q} * c.nq;
  args.lse_stride_h = c.nq;
  const cm::cuda::DeviceDescriptor descriptor(plan.blob());
  cm::cuda::forward(descriptor.view(), args, workspace.ptr, cm::cuda::forward_workspace_bytes(),
                    nullptr);
  cuda_ok(cudaDeviceSynchronize());

  std::vector<uint16_t> out_bits(nq_elems);
  std::vector<float> lse(lse_elems);
  cuda_ok(cudaMemcpy(out_bits.data(), dout.ptr, nq_elems * 2, cudaMemcpyDeviceToHost));
  cuda_ok(cudaMemcpy(lse.data(), dlse.ptr, lse_elems * 4, cudaMemcpyDeviceToHost));

  // Tolerance: a few units of the output format's rounding (P is rounded to it too).
  const double eps = c.dtype == cm::cuda::DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  double max_err = 0, max_lse_err = 0;
  for (size_t i = 0; i < nq_elems; ++i) {
    const float o = decode(out_bits[i], c.dtype);
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
        ASSERT_EQ(decode(out_bits[row + d], c.dtype), 0.f)
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

std::vector<Case> example_cases() {
  using cm::Segments;
  using B = cm::cuda::DType;
  const auto segs = [](std::vector<int64_t> lengths) { return Segments::from_lengths(lengths); };
  const auto one = [](int64_t a, int64_t b) { return Segments{{a}, {b}}; };
  return {
      {"causal", {}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"causal", {}, 129, 385, 64, 4, 4, B::kFloat16},
      {"sliding_window", {{"W", int64_t{77}}}, 300, 300, 64, 4, 1, B::kBFloat16},
      {"chunked_causal", {{"C", int64_t{100}}}, 300, 300, 128, 4, 2, B::kFloat16},
      {"prefix_lm", {{"P", int64_t{50}}}, 257, 257, 128, 4, 4, B::kBFloat16},
      {"sinks_window", {{"S", int64_t{4}}, {"W", int64_t{60}}}, 300, 300, 64, 4, 2, B::kBFloat16},
      {"block_causal_video", {{"F", int64_t{64}}}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"per_head_window",
       {{"windows", std::vector<int64_t>{10, 50, 130, 300}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      {"doc_causal", {{"docs", segs({90, 1, 150, 59})}}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"shared_prefix",
       {{"prompt", one(0, 60)}, {"responses", Segments::from_boundaries({60, 140, 220, 300})}},
       300,
       300,
       64,
       4,
       4,
       B::kFloat16},
      {"hstu",
       {{"seqs", segs({100, 120, 80})},
        {"ctx", std::vector<int64_t>{4, 8, 2}},
        {"targets", std::vector<int64_t>{10, 15, 8}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      {"clear",
       {{"text", int64_t{44}}, {"s", int64_t{16}}, {"r", int64_t{5}}},
       300,
       300,
       128,
       4,
       2,
       B::kBFloat16},
      {"neighbourhood_2d",
       {{"rows", int64_t{15}},
        {"cols", int64_t{20}},
        {"ry", int64_t{3}},
        {"rx", int64_t{4}},
        {"shape", int64_t{0}}},
       300,
       300,
       64,
       4,
       2,
       B::kBFloat16},
      {"neighbourhood_2d",
       {{"rows", int64_t{15}},
        {"cols", int64_t{20}},
        {"ry", int64_t{3}},
        {"rx", int64_t{4}},
        {"shape", int64_t{1}}},
       300,
       300,
       128,
       4,
       2,
       B::kFloat16},
      // Query rows [120, 130) belong to no query sequence: they see no key.
      {"cross_attention",
       {{"queries", Segments{{0, 50, 130}, {50, 120, 200}}},
        {"keys", Segments{{0, 100, 180}, {100, 180, 300}}}},
       200,
       300,
       128,
       4,
       2,
       B::kBFloat16},
  };
}

INSTANTIATE_TEST_SUITE_P(Examples, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(example_cases()),
                                          testing::Values(cm::cuda::Mainloop::kSerial,
                                                          cm::cuda::Mainloop::kPingpong)));

// Problems that do not fit the descriptor are rejected before any launch.
TEST(ForwardValidation, RejectsMismatchedProblems) {
  SKIP_WITHOUT_HOPPER();
  const cm::Plan plan = make_plan("causal", {}, 256, 256, 1, 1);
  const cm::cuda::DeviceDescriptor descriptor(plan.blob());
  DeviceBuffer buffer(4 * 256 * 128 * 2), workspace(cm::cuda::forward_workspace_bytes());
  cm::cuda::ForwardArgs good;
  good.nq = good.nk = 256;
  good.head_dim = 128;
  good.heads_q = good.heads_kv = 1;
  const cm::cuda::TensorRef t{buffer.ptr, 256 * 128, 128, 256 * 128};
  good.q = good.k = good.v = good.out = t;
  good.lse = static_cast<float*>(buffer.ptr);
  good.lse_stride_h = 256;
  const auto run = [&](const cm::cuda::ForwardArgs& a) {
    cm::cuda::forward(descriptor.view(), a, workspace.ptr, cm::cuda::forward_workspace_bytes(),
                      nullptr);
  };
  EXPECT_NO_THROW(run(good));
  cm::cuda::ForwardArgs bad = good;
  bad.nq = 255;
  EXPECT_THROW(run(bad), cm::Error);
  bad = good;
  bad.head_dim = 96;
  EXPECT_THROW(run(bad), cm::Error);
  bad = good;
  bad.heads_q = 3;
  bad.heads_kv = 2;
  EXPECT_THROW(run(bad), cm::Error);
  bad = good;
  bad.q.stride_s = 100;  // not a multiple of 16 bytes
  EXPECT_THROW(run(bad), cm::Error);
  bad = good;
  bad.out.data = static_cast<char*>(buffer.ptr) + 2;
  EXPECT_THROW(run(bad), cm::Error);
  EXPECT_THROW(cm::cuda::forward(descriptor.view(), good, workspace.ptr, 1, nullptr), cm::Error);
  cuda_ok(cudaDeviceSynchronize());
}

}  // namespace
