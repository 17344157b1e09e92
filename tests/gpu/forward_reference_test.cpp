// The sm90 forward kernel against the float64 CPU reference driven by the same descriptor
// (include/compilemask/reference.h), for every example mask at small odd shapes, with GQA,
// head dims 64 and 128 (and padded ones), both dtypes and both mainloops, on one CTA per SM and
// on two CTAs, a selection at head dims above 128 (the kernel for 256), one with soft-capped
// logits, ALiBi, attention sinks, V and O with a head dim of their own, and split keys: forced on
// every example, automatic and forced on few query rows against many keys; K and V in pages of a
// shuffled pool and packed between NaN rows. Skips without a Hopper GPU.
#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>
#include <compilemask/reference.h>

#include "gpu_test_support.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
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

// Where the test puts K and V: [B, H, S, D] (dense_problem), in pages of a pool (the rows of a
// page first, [pages, page_size, H, D], or its heads first, [pages, H, page_size, D]), or packed
// [T, H, D] with NaN rows between the sequences. Pages are placed in a shuffled order, and every
// slot of the pool that holds no key row is NaN; so is, in both, every key that no query row
// sees (a shorter sequence's keys below nk): the kernel must never let one reach O.
enum class KeyStorage { kDense, kPagedRowsFirst, kPagedHeadsFirst, kPackedWithGaps };

// K and V on the device in their storage, and what forward() needs to read them.
struct DeviceKeys {
  std::vector<uint16_t> k_bits, v_bits;  // host copies in the storage's layout
  std::vector<int32_t> table;            // the page table (paged) or the key offsets (packed)
  cm::cuda::TensorRef k, v;
  cm::cuda::PagedKV paged;
  int64_t total_k = 0;
};

constexpr uint16_t kNaNBits = 0xffff;  // NaN in both 16-bit formats
constexpr int kGapRows = 37;           // NaN rows after each packed sequence

// Whether no query row of any head of KV head group (b, h) sees key s, as [B, H_kv, nk].
std::vector<bool> unseen_keys(const cm::Plan& plan, const cm::AttentionShape& shape) {
  const int group = shape.heads_q / shape.heads_kv;
  std::vector<bool> unseen(size_t(shape.batch) * shape.heads_kv * shape.nk, true);
  for (int b = 0; b < shape.batch; ++b) {
    for (int h = 0; h < shape.heads_q; ++h) {
      const std::vector<uint8_t> visible = plan.dense(b, h);
      for (int q = 0; q < shape.nq; ++q) {
        for (int s = 0; s < shape.nk; ++s) {
          if (visible[size_t(q) * shape.nk + s] != 0) {
            unseen[(size_t(b) * shape.heads_kv + h / group) * shape.nk + s] = false;
          }
        }
      }
    }
  }
  return unseen;
}

// Lays out [B, H, nk, D] host bits `k` and [B, H, nk, Dv] `v` in `storage` (page_size rows per
// page), with NaN for the keys that are `unseen` ([B, H, nk]).
DeviceKeys lay_out_keys(const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                        const std::vector<bool>& unseen, const cm::AttentionShape& shape,
                        KeyStorage storage, int page_size) {
  const int b_count = shape.batch, heads = shape.heads_kv, nk = shape.nk;
  DeviceKeys keys;
  // Where key s of (b, h) goes in a tensor of d columns, as an element offset, and the
  // tensor's element count and strides {batch or page, row, head}.
  std::function<size_t(int, int, int, int)> slot;
  std::function<size_t(int)> elements;
  std::function<cm::cuda::TensorRef(int)> strides;
  if (storage == KeyStorage::kPackedWithGaps) {
    const int64_t stride = nk + kGapRows;  // rows from one sequence's start to the next's
    keys.total_k = b_count * stride;
    for (int b = 0; b < b_count; ++b) keys.table.push_back(static_cast<int32_t>(b * stride));
    slot = [=](int b, int h, int s, int d) { return ((b * stride + s) * heads + h) * size_t(d); };
    elements = [=](int d) { return size_t(b_count * stride) * heads * d; };
    strides = [=](int d) { return cm::cuda::TensorRef{nullptr, 0, int64_t{heads} * d, d}; };
  } else {
    const int pages_per_sequence = (nk + page_size - 1) / page_size;
    const int num_pages = b_count * pages_per_sequence + 3;  // three pages nobody uses
    std::vector<int32_t> order(num_pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(page_size + nk));
    const int table_stride = pages_per_sequence + 1;  // longer rows than needed
    keys.table.assign(size_t(b_count) * table_stride, -1);
    for (int b = 0; b < b_count; ++b) {
      for (int j = 0; j < pages_per_sequence; ++j) {
        keys.table[b * table_stride + j] = order[b * pages_per_sequence + j];
      }
    }
    const bool rows_first = storage == KeyStorage::kPagedRowsFirst;
    strides = [=](int d) {
      const int64_t page_elems = int64_t{page_size} * heads * d;
      return cm::cuda::TensorRef{nullptr, page_elems, rows_first ? int64_t{heads} * d : d,
                                 rows_first ? d : int64_t{page_size} * d};
    };
    slot = [=, table = keys.table](int b, int h, int s, int d) {
      const cm::cuda::TensorRef t = strides(d);
      const int page = table[b * table_stride + s / page_size];
      return size_t(page * t.stride_b + (s % page_size) * t.stride_s + h * t.stride_h);
    };
    elements = [=](int d) { return size_t(num_pages) * page_size * heads * d; };
    keys.paged.page_table_stride = table_stride;
    keys.paged.page_size = page_size;
    keys.paged.num_pages = num_pages;
  }
  const int d_k = shape.head_dim, d_v = cm::value_head_dim(shape);
  for (auto [dense, stored, ref, d] :
       {std::tuple{&k, &keys.k_bits, &keys.k, d_k}, std::tuple{&v, &keys.v_bits, &keys.v, d_v}}) {
    stored->assign(elements(d), kNaNBits);
    *ref = strides(d);
    for (int b = 0; b < b_count; ++b) {
      for (int h = 0; h < heads; ++h) {
        for (int s = 0; s < nk; ++s) {
          if (unseen[(size_t(b) * heads + h) * nk + s]) continue;  // the storage is NaN already
          std::copy_n(dense->begin() + ((size_t(b) * heads + h) * nk + s) * d, d,
                      stored->begin() + slot(b, h, s, d));
        }
      }
    }
  }
  return keys;
}

// Runs the forward on case c with K and V in `storage` and checks O and the LSE against the
// float64 reference on NaN-filled outputs and workspace.
void check_forward(const Case& c, cm::cuda::Mainloop mainloop, int max_ctas, int num_splits,
                   KeyStorage storage = KeyStorage::kDense, int page_size = 0) {
  const int batch = 2;
  // The reference needs the full (batch, head) instance map; the kernel reads it as well.
  const cm::Plan plan = make_plan(c.example, c.params, c.nq, c.nk, batch, c.heads_q);
  const cm::AttentionShape shape{batch, c.heads_q,  c.heads_kv,  c.nq,
                                 c.nk,  c.head_dim, c.head_dim_v};
  const int dv_cols = cm::value_head_dim(shape);
  const size_t nq_elems = size_t(batch) * c.heads_q * c.nq * c.head_dim;
  const size_t nk_elems = size_t(batch) * c.heads_kv * c.nk * c.head_dim;
  const size_t out_elems = size_t(batch) * c.heads_q * c.nq * dv_cols;
  const size_t v_elems = size_t(batch) * c.heads_kv * c.nk * dv_cols;
  const size_t lse_elems = size_t(batch) * c.heads_q * c.nq;

  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(c.example) + c.nq));
  const Rounded q = random_rounded(nq_elems, c.dtype, rng);
  const Rounded k = random_rounded(nk_elems, c.dtype, rng);
  const Rounded v = random_rounded(v_elems, c.dtype, rng);
  std::vector<float> ref_out(out_elems), ref_lse(lse_elems);
  cm::ReferenceOptions options;
  options.accumulate = cm::Accumulate::kFloat64;
  options.softcap = c.softcap;
  const std::vector<float> sinks =
      c.sinks ? cm::gpu_test::sink_logits(c.heads_q) : std::vector<float>{};
  options.sinks = c.sinks ? sinks.data() : nullptr;
  const std::vector<float> slopes =
      c.alibi ? cm::gpu_test::alibi_slopes(c.heads_q) : std::vector<float>{};
  options.alibi_slopes = c.alibi ? slopes.data() : nullptr;
  cm::reference_forward(plan.blob(), shape, q.values.data(), k.values.data(), v.values.data(),
                        ref_out.data(), ref_lse.data(), options);

  DeviceKeys keys;
  if (storage == KeyStorage::kDense) {
    keys.k_bits = k.bits;
    keys.v_bits = v.bits;
  } else {
    keys = lay_out_keys(k.bits, v.bits, unseen_keys(plan, shape), shape, storage, page_size);
  }
  DeviceBuffer dq(nq_elems * 2), dk(keys.k_bits.size() * 2), dv(keys.v_bits.size() * 2);
  DeviceBuffer dout(out_elems * 2), dlse(lse_elems * 4);
  DeviceBuffer dtable(std::max<size_t>(keys.table.size(), 1) * 4);
  DeviceBuffer dsinks(std::max<size_t>(sinks.size(), 1) * 4);
  CUDA_OK(cudaMemcpy(dsinks.ptr, sinks.data(), sinks.size() * 4, cudaMemcpyHostToDevice));
  DeviceBuffer dslopes(std::max<size_t>(slopes.size(), 1) * 4);
  CUDA_OK(cudaMemcpy(dslopes.ptr, slopes.data(), slopes.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dq.ptr, q.bits.data(), nq_elems * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk.ptr, keys.k_bits.data(), keys.k_bits.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv.ptr, keys.v_bits.data(), keys.v_bits.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dtable.ptr, keys.table.data(), keys.table.size() * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout.ptr, 0xff, out_elems * 2));  // NaN in both 16-bit formats
  CUDA_OK(cudaMemset(dlse.ptr, 0xff, lse_elems * 4));  // NaN

  cm::cuda::ForwardArgs args;
  static_cast<cm::cuda::Problem&>(args) = cm::cuda::dense_problem(
      c.dtype, shape, dq.ptr, dk.ptr, dv.ptr, dout.ptr, static_cast<float*>(dlse.ptr));
  const auto* table = static_cast<const int32_t*>(dtable.ptr);
  DeviceBuffer dq_offsets(batch * 4);
  if (storage == KeyStorage::kPackedWithGaps) {
    // Q, O and the LSE stay [B, H, S, D] and [B, H, S], read as packed: sequence b's rows start
    // at row b * H * nq of a [T, H, D] view whose head stride is nq rows.
    std::vector<int32_t> q_offsets;
    for (int b = 0; b < batch; ++b) q_offsets.push_back(b * c.heads_q * c.nq);
    CUDA_OK(cudaMemcpy(dq_offsets.ptr, q_offsets.data(), batch * 4, cudaMemcpyHostToDevice));
    args.q_offsets = static_cast<const int32_t*>(dq_offsets.ptr);
    args.k_offsets = table;
    // So that no head's rows reach past the buffer: the last sequence ends the view.
    args.total_q = int64_t{batch - 1} * c.heads_q * c.nq + c.nq;
    args.total_k = keys.total_k;
    args.lse_stride_h = c.nq;
    args.q.stride_h = int64_t{c.nq} * c.head_dim;
    args.out.stride_h = int64_t{c.nq} * dv_cols;
  } else if (storage != KeyStorage::kDense) {
    args.paged = keys.paged;
    args.paged.page_table = table;
  }
  if (storage != KeyStorage::kDense) {
    args.k = {dk.ptr, keys.k.stride_b, keys.k.stride_s, keys.k.stride_h};
    args.v = {dv.ptr, keys.v.stride_b, keys.v.stride_s, keys.v.stride_h};
  }
  args.softcap = c.softcap;
  args.sinks = c.sinks ? static_cast<const float*>(dsinks.ptr) : nullptr;
  args.alibi_slopes = c.alibi ? static_cast<const float*>(dslopes.ptr) : nullptr;
  args.mainloop = mainloop;
  args.max_ctas = max_ctas;
  args.num_splits = num_splits;
  const cm::cuda::DeviceDescriptor descriptor(plan.blob());
  const size_t workspace_bytes = cm::cuda::forward_workspace_bytes(descriptor.view(), args);
  DeviceBuffer workspace(workspace_bytes);
  CUDA_OK(cudaMemset(workspace.ptr, 0xff, workspace_bytes));  // forward() must not read it
  cm::cuda::forward(descriptor.view(), args, workspace.ptr, workspace_bytes, nullptr);
  CUDA_OK(cudaDeviceSynchronize());

  std::vector<uint16_t> out_bits(out_elems);
  std::vector<float> lse(lse_elems);
  CUDA_OK(cudaMemcpy(out_bits.data(), dout.ptr, out_elems * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(lse.data(), dlse.ptr, lse_elems * 4, cudaMemcpyDeviceToHost));

  // Tolerance: a few units of the output format's rounding (P is rounded to it too).
  const double eps = c.dtype == cm::cuda::DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
  double max_err = 0, max_lse_err = 0;
  for (size_t i = 0; i < out_elems; ++i) {
    const float o = cm::cuda::from_storage_bits(out_bits[i], c.dtype);
    ASSERT_FALSE(std::isnan(o)) << "output element " << i << " is NaN (unwritten or NaN)";
    max_err = std::max(max_err, std::abs(double(o) - ref_out[i]));
  }
  for (size_t i = 0; i < lse_elems; ++i) {
    ASSERT_FALSE(std::isnan(lse[i])) << "LSE element " << i << " is NaN";
    if (std::isinf(ref_lse[i])) {
      ASSERT_TRUE(std::isinf(lse[i]) && lse[i] < 0)
          << "row " << i << " sees no key: LSE must be -inf";
      const size_t row = i * dv_cols;
      for (int d = 0; d < dv_cols; ++d) {
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

// (case, mainloop, max_ctas, num_splits)
class ForwardMatchesReference
    : public testing::TestWithParam<std::tuple<Case, cm::cuda::Mainloop, int, int>> {};

TEST_P(ForwardMatchesReference, OutputAndLse) {
  SKIP_WITHOUT_HOPPER();
  const auto& [c, mainloop, max_ctas, num_splits] = GetParam();
  check_forward(c, mainloop, max_ctas, num_splits);
}

// (case, mainloop, num_splits, storage, page_size)
class ForwardReadsKeysWhereTheyAre
    : public testing::TestWithParam<std::tuple<Case, cm::cuda::Mainloop, int, KeyStorage, int>> {};

TEST_P(ForwardReadsKeysWhereTheyAre, OutputAndLse) {
  SKIP_WITHOUT_HOPPER();
  const auto& [c, mainloop, num_splits, storage, page_size] = GetParam();
  check_forward(c, mainloop, 0, num_splits, storage, page_size);
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

// Attention sinks, added by the epilogue (keys whole) or by fwd_combine (keys in parts, and the
// decoding cases' packed heads), in both mainloops.
INSTANTIATE_TEST_SUITE_P(Sinks, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::sink_cases()), kMainloops,
                                          testing::Values(0), testing::Values(1, 3)));

// ALiBi, in both mainloops, keys whole and in three parts (the decoding cases' packed heads
// give one tile rows of several heads, each with its own slope).
INSTANTIATE_TEST_SUITE_P(Alibi, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::alibi_cases()),
                                          kMainloops, testing::Values(0), testing::Values(1, 3)));

// V and O with a head dim of their own (MLA), in both mainloops, on all SMs and on two CTAs,
// keys whole and in three parts; packed between NaN rows and in pages.
INSTANTIATE_TEST_SUITE_P(ValueHeadDim, ForwardMatchesReference,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::value_head_dim_cases()),
                                          kMainloops, testing::Values(0, 2),
                                          testing::Values(0, 3)));
INSTANTIATE_TEST_SUITE_P(PackedKeysValueHeadDim, ForwardReadsKeysWhereTheyAre,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::value_head_dim_cases()),
                                          kMainloops, testing::Values(0),
                                          testing::Values(KeyStorage::kPackedWithGaps),
                                          testing::Values(0)));
INSTANTIATE_TEST_SUITE_P(
    PagedKeysValueHeadDim, ForwardReadsKeysWhereTheyAre,
    testing::Combine(testing::ValuesIn(cm::gpu_test::paged_value_head_dim_cases()), kMainloops,
                     testing::Values(0, 1),
                     testing::Values(KeyStorage::kPagedRowsFirst, KeyStorage::kPagedHeadsFirst),
                     testing::Values(16, 128)));

// Keys in pages of a pool (decoding against a paged cache): pages smaller than a stage's keys,
// as large as a tile and larger, both page layouts, keys whole and split automatically.
INSTANTIATE_TEST_SUITE_P(PagedKeys, ForwardReadsKeysWhereTheyAre,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::paged_cases()),
                                          kMainloops, testing::Values(0, 1),
                                          testing::Values(KeyStorage::kPagedRowsFirst,
                                                          KeyStorage::kPagedHeadsFirst),
                                          testing::Values(16, 64, 128, 384)));

// Packed keys with NaN rows after every sequence: every example (tiles narrowed by nk and by
// restarts) and the kernel for 256, whose narrow tiles may hold one 64-key part or two. On all
// SMs and on two CTAs, whose guard lanes (fwd_guard.cuh) then take the masked tiles of many
// items, fully masked ones between them.
INSTANTIATE_TEST_SUITE_P(PackedKeys, ForwardReadsKeysWhereTheyAre,
                         testing::Combine(testing::ValuesIn(example_cases()), kMainloops,
                                          testing::Values(0, 2),
                                          testing::Values(KeyStorage::kPackedWithGaps),
                                          testing::Values(0)));
// ALiBi in the packed layout: positions count from each sequence's own first row.
INSTANTIATE_TEST_SUITE_P(PackedKeysAlibi, ForwardReadsKeysWhereTheyAre,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::alibi_cases()),
                                          kMainloops, testing::Values(0),
                                          testing::Values(KeyStorage::kPackedWithGaps),
                                          testing::Values(0)));
INSTANTIATE_TEST_SUITE_P(PackedKeysHeadDim256, ForwardReadsKeysWhereTheyAre,
                         testing::Combine(testing::ValuesIn(cm::gpu_test::wide_head_cases()),
                                          kMainloops, testing::Values(0, 2),
                                          testing::Values(KeyStorage::kPackedWithGaps),
                                          testing::Values(0)));

}  // namespace
