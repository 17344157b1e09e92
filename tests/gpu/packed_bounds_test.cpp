// Packed offsets that put a sequence outside its tensors, which the host cannot see without
// reading device memory (cm::cuda::Problem::q_offsets). Both passes must write nothing outside
// the tensors, NaN on every row of such a sequence that lies inside them (O, LSE, dQ, dK, dV),
// and the other sequences' results bit for bit as in a launch without the bad sequences. The
// rows inside the tensors that lie in no sequence keep what they held, or with
// Problem::write_rows_outside_sequences read as rows that see no key (0; the LSE -inf). Every
// buffer has margin rows before and after its tensor, and every row that nothing may write
// holds a canary. Skips without a Hopper GPU.
#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>
#include <compilemask/cuda_backward.h>

#include "gpu_test_support.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using cm::gpu_test::Case;
using cm::gpu_test::DeviceBuffer;

constexpr int kGap = 20;              // rows between the sequences
constexpr int64_t kMargin = 64;       // rows of each buffer before and after its tensor
constexpr uint16_t kCanary = 0x3c00;  // 16-bit rows that nothing may write
constexpr float kLseCanary = 12345.f;
constexpr int kSequences = 3;

// Sequence 0 fits; sequence 1's query rows run past total_q (half of them inside); sequence 2's
// key rows start at -7. No two sequences share a row.
struct Layout {
  int32_t q_offsets[kSequences], k_offsets[kSequences];
  int64_t total_q, total_k;
  int nq, nk;

  Layout(int nq_, int nk_) : nq(nq_), nk(nk_) {
    q_offsets[0] = kGap;
    q_offsets[2] = nq + 2 * kGap;
    q_offsets[1] = 2 * nq + 3 * kGap;
    total_q = q_offsets[1] + nq / 2;
    k_offsets[2] = -7;
    k_offsets[0] = nk + kGap;
    k_offsets[1] = 2 * nk + 2 * kGap;
    total_k = k_offsets[1] + nk;
  }

  // What may be in row r of a tensor of the queries (or the keys) after the launch.
  enum class Row { kGood, kNaN, kOutside, kUntouched };
  Row row(int64_t r, bool keys, bool write_outside) const {
    const int32_t* offsets = keys ? k_offsets : q_offsets;
    const int n = keys ? nk : nq;
    const int64_t total = keys ? total_k : total_q;
    if (r >= offsets[0] && r < offsets[0] + n) return Row::kGood;
    for (int b = 1; b < kSequences; ++b) {
      if (r >= offsets[b] && r < offsets[b] + n && r >= 0 && r < total) return Row::kNaN;
    }
    return write_outside && r >= 0 && r < total ? Row::kOutside : Row::kUntouched;
  }
};

// A packed [rows, heads, width] tensor of T in a buffer with kMargin rows before and after it,
// or, with heads_first, [heads, rows] (the LSE's layout: width 1, row stride 1).
template <class T>
class PaddedTensor {
 public:
  PaddedTensor(int64_t rows, int heads, int width, bool heads_first = false)
      : rows_(rows),
        heads_(heads),
        width_(width),
        heads_first_(heads_first),
        buffer_(elements() * sizeof(T)) {}

  size_t elements() const { return size_t(rows_ + 2 * kMargin) * heads_ * width_; }
  // Element e of head h of row r, r in [-kMargin, rows + kMargin).
  size_t at(int64_t r, int h, int e) const {
    const int64_t row = r + kMargin;
    return heads_first_ ? size_t(h) * (rows_ + 2 * kMargin) + row
                        : (size_t(row) * heads_ + h) * width_ + e;
  }
  void* data() const { return static_cast<T*>(buffer_.ptr) + at(0, 0, 0); }
  cm::cuda::TensorRef ref() const { return {data(), 0, int64_t{heads_} * width_, width_}; }
  int64_t head_stride() const { return rows_ + 2 * kMargin; }  // heads_first

  void upload(const std::vector<T>& values) const {
    ASSERT_EQ(values.size(), elements());
    ASSERT_EQ(
        cudaMemcpy(buffer_.ptr, values.data(), elements() * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  void fill(T value) const { upload(std::vector<T>(elements(), value)); }
  std::vector<T> download() const {
    std::vector<T> values(elements());
    EXPECT_EQ(
        cudaMemcpy(values.data(), buffer_.ptr, elements() * sizeof(T), cudaMemcpyDeviceToHost),
        cudaSuccess);
    return values;
  }

  // Checks every element of `got` (this tensor after the launch with the bad sequences): the
  // good sequence's rows equal `clean`'s (after the launch without them) and are finite, the
  // bad ones' rows inside the tensor are NaN, with write_outside the rows inside it that lie in
  // no sequence hold `outside`, and every other row holds `canary`.
  template <class IsNaN>
  void check(const char* name, const std::vector<T>& got, const std::vector<T>& clean,
             const Layout& layout, bool keys, bool write_outside, T outside, T canary,
             IsNaN is_nan) const {
    for (int64_t r = -kMargin; r < rows_ + kMargin; ++r) {
      const Layout::Row expected = layout.row(r, keys, write_outside);
      for (int h = 0; h < heads_; ++h) {
        for (int e = 0; e < width_; ++e) {
          const size_t i = at(r, h, e);
          const auto where = [&] {  // streamed only on failure
            return std::string(name) + " row " + std::to_string(r) + " head " + std::to_string(h) +
                   " element " + std::to_string(e);
          };
          if (expected == Layout::Row::kGood) {
            ASSERT_FALSE(is_nan(clean[i])) << where() << ": the launch without bad sequences";
            ASSERT_EQ(got[i], clean[i]) << where() << " differs from the launch without bad ones";
          } else if (expected == Layout::Row::kNaN) {
            ASSERT_TRUE(is_nan(got[i])) << where() << " of a sequence outside its tensors";
          } else if (expected == Layout::Row::kOutside) {
            ASSERT_EQ(got[i], outside) << where() << " of no sequence";
          } else {
            ASSERT_EQ(got[i], canary) << where() << " was written";
          }
        }
      }
    }
  }

 private:
  int64_t rows_;
  int heads_, width_;
  bool heads_first_;
  DeviceBuffer buffer_;
};

// (case, num_splits of the forward, Problem::write_rows_outside_sequences)
class PackedBounds : public testing::TestWithParam<std::tuple<Case, int, bool>> {};

TEST_P(PackedBounds, NothingOutsideNaNInsideOthersUnchanged) {
  SKIP_WITHOUT_HOPPER();
  const auto& [c, num_splits, write_outside] = GetParam();
  const Layout layout(c.nq, c.nk);
  const cm::Plan plan = cm::gpu_test::make_plan(c.example, c.params, c.nq, c.nk, 1, c.heads_q);
  const cm::cuda::DeviceDescriptor descriptor(plan.blob());
  const auto is_nan16 = [&](uint16_t bits) {
    return std::isnan(cm::cuda::from_storage_bits(bits, c.dtype));
  };
  const auto is_nan32 = [](float x) { return std::isnan(x); };

  std::mt19937 rng(static_cast<unsigned>(c.nq * 31 + c.nk));
  const auto random = [&](const PaddedTensor<uint16_t>& t) {
    t.upload(cm::gpu_test::random_rounded(t.elements(), c.dtype, rng).bits);
  };
  const PaddedTensor<uint16_t> q(layout.total_q, c.heads_q, c.head_dim),
      k(layout.total_k, c.heads_kv, c.head_dim), v(layout.total_k, c.heads_kv, c.head_dim),
      dout(layout.total_q, c.heads_q, c.head_dim);
  for (const auto* t : {&q, &k, &v, &dout}) random(*t);
  DeviceBuffer offsets(2 * kSequences * sizeof(int32_t));
  CUDA_OK(
      cudaMemcpy(offsets.ptr, layout.q_offsets, sizeof(layout.q_offsets), cudaMemcpyHostToDevice));
  const auto* q_offsets = static_cast<const int32_t*>(offsets.ptr);
  const int32_t* k_offsets = q_offsets + kSequences;
  CUDA_OK(cudaMemcpy(const_cast<int32_t*>(k_offsets), layout.k_offsets, sizeof(layout.k_offsets),
                     cudaMemcpyHostToDevice));

  // The problem of all three sequences (batch 3) or of the good one alone (batch 1).
  const auto problem = [&](int batch, const PaddedTensor<uint16_t>& out,
                           const PaddedTensor<float>& lse) {
    const cm::AttentionShape shape{batch, c.heads_q, c.heads_kv, c.nq, c.nk, c.head_dim};
    cm::cuda::Problem a =
        cm::cuda::dense_problem(c.dtype, shape, q.data(), k.data(), v.data(), out.data(),
                                static_cast<const float*>(lse.data()));
    a.q = q.ref();  // the packed layout's strides
    a.k = k.ref();
    a.v = v.ref();
    a.out = out.ref();
    a.lse_stride_b = 0;
    a.lse_stride_h = lse.head_stride();
    a.q_offsets = q_offsets;
    a.k_offsets = k_offsets;
    a.total_q = layout.total_q;
    a.total_k = layout.total_k;
    a.write_rows_outside_sequences = write_outside;
    return a;
  };
  const auto new_out = [&] {
    return std::make_unique<PaddedTensor<uint16_t>>(layout.total_q, c.heads_q, c.head_dim);
  };
  const auto new_lse = [&] {
    return std::make_unique<PaddedTensor<float>>(layout.total_q, c.heads_q, 1, true);
  };

  // Forward, with all three sequences and with the good one alone.
  const auto bad_out = new_out(), clean_out = new_out();
  const auto bad_lse = new_lse(), clean_lse = new_lse();
  for (const int batch : {kSequences, 1}) {
    const auto& out = batch == 1 ? *clean_out : *bad_out;
    const auto& lse = batch == 1 ? *clean_lse : *bad_lse;
    out.fill(kCanary);
    lse.fill(kLseCanary);
    cm::cuda::ForwardArgs args;
    static_cast<cm::cuda::Problem&>(args) = problem(batch, out, lse);
    args.num_splits = num_splits;
    const size_t bytes = cm::cuda::forward_workspace_bytes(descriptor.view(), args);
    DeviceBuffer workspace(bytes);
    CUDA_OK(cudaMemset(workspace.ptr, 0xff, bytes));
    cm::cuda::forward(descriptor.view(), args, workspace.ptr, bytes, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
  }
  constexpr uint16_t kZero = 0;
  bad_out->check("O", bad_out->download(), clean_out->download(), layout, false, write_outside,
                 kZero, kCanary, is_nan16);
  bad_lse->check("LSE", bad_lse->download(), clean_lse->download(), layout, false, write_outside,
                 -INFINITY, kLseCanary, is_nan32);

  // Backward from the forward with the bad sequences (the good one's O and LSE are the same), in
  // both modes, with the kv group's heads in one CTA and split over as many (the kv postprocess
  // then writes dK and dV).
  const int group = c.heads_q / c.heads_kv;
  for (const auto& [deterministic, head_splits] :
       std::vector<std::pair<bool, int>>{{true, 1}, {false, 1}, {true, group}, {false, group}}) {
    if (head_splits == group && group == 1) continue;
    SCOPED_TRACE(std::string(deterministic ? "deterministic" : "default mode") + ", head splits " +
                 std::to_string(head_splits));
    std::vector<std::vector<uint16_t>> bad, clean;
    const PaddedTensor<uint16_t> dq(layout.total_q, c.heads_q, c.head_dim),
        dk(layout.total_k, c.heads_kv, c.head_dim), dv(layout.total_k, c.heads_kv, c.head_dim);
    for (const int batch : {kSequences, 1}) {
      for (const auto* t : {&dq, &dk, &dv}) t->fill(kCanary);
      cm::cuda::BackwardArgs args;
      static_cast<cm::cuda::Problem&>(args) = problem(batch, *bad_out, *bad_lse);
      args.dout = dout.ref();
      args.dq = dq.ref();
      args.dk = dk.ref();
      args.dv = dv.ref();
      args.deterministic = deterministic;
      args.head_splits = head_splits;
      const size_t bytes = cm::cuda::backward_workspace_bytes(descriptor.view(), args);
      DeviceBuffer workspace(bytes);
      CUDA_OK(cudaMemset(workspace.ptr, 0xff, bytes));
      cm::cuda::backward(descriptor.view(), args, workspace.ptr, bytes, nullptr);
      CUDA_OK(cudaDeviceSynchronize());
      auto& results = batch == 1 ? clean : bad;
      for (const auto* t : {&dq, &dk, &dv}) results.push_back(t->download());
    }
    // By default the good sequence's dQ adds may come in another order: its dQ rows are
    // checked against themselves (finite), dK and dV bit for bit (no adds across CTAs, or the
    // head splits' sums added in split order).
    if (!deterministic) clean[0] = bad[0];
    dq.check("dQ", bad[0], clean[0], layout, false, write_outside, kZero, kCanary, is_nan16);
    dk.check("dK", bad[1], clean[1], layout, true, write_outside, kZero, kCanary, is_nan16);
    dv.check("dV", bad[2], clean[2], layout, true, write_outside, kZero, kCanary, is_nan16);
  }
}

std::vector<Case> bounds_cases() {
  using B = cm::cuda::DType;
  return {
      {"causal", {}, 300, 300, 128, 4, 2, B::kBFloat16},
      {"sliding_window", {{"W", int64_t{77}}}, 129, 385, 64, 4, 4, B::kFloat16},
      // 17 rows of four query heads share a tile (packed heads): the forward's parts go through
      // the combine kernel.
      {"causal", {}, 17, 385, 128, 4, 1, B::kBFloat16},
  };
}

// Unsplit and in three parts (through the combine kernel), the rows of no sequence kept and
// written.
INSTANTIATE_TEST_SUITE_P(Sequences, PackedBounds,
                         testing::Combine(testing::ValuesIn(bounds_cases()), testing::Values(1, 3),
                                          testing::Bool()));

}  // namespace
