// The descriptor-driven reference attention against a naive float64 dense attention, over
// random masks of several kinds, odd lengths, Nq != Nk, GQA/MQA and three tilings.
#include <compilemask/descriptor.h>
#include <compilemask/reference.h>

#include "dense_attention.h"
#include "mask_cases.h"
#include "tensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <utility>

namespace cm::test {
namespace {

struct Lengths {
  int32_t nq, nk;
};

using Case = std::tuple<Lengths, Tiling, MaskKind>;

struct HeadConfig {
  int32_t heads_q, heads_kv;  // ratios 1, 2, 4 and MQA
  float scale;                // softmax scale option; 0 means 1/sqrt(head_dim)
  float softcap;              // logit cap option; 0 means none. 1 bends the logits of these
                              // inputs (scale q·k has a standard deviation of about 1.3)
  bool sinks;                 // random attention sinks, one head's -inf (none)
  bool alibi;                 // random ALiBi slopes
  int32_t head_dim_v;         // V's and O's columns; 0 means kHeadDim
};
constexpr HeadConfig kHeadConfigs[] = {{2, 2, 0.0f, 0.0f, false, false, 0},
                                       {4, 2, 0.0f, 0.0f, true, false, 13},
                                       {8, 2, 0.0f, 1.0f, true, true, 0},
                                       {4, 1, 0.37f, 0.0f, false, true, 34}};
constexpr int32_t kBatch = 2;
constexpr int32_t kHeadDim = 21;  // not a multiple of 8, so the dot products' tails run
constexpr double kFloat32Tolerance = 2e-4;
constexpr double kFloat64Tolerance = 2e-6;

struct Inputs {
  AttentionShape shape;
  std::vector<float> q, k, v, dout;
  std::vector<float> sinks;         // empty: none
  std::vector<float> alibi_slopes;  // empty: none
};

Inputs random_inputs(const AttentionShape& shape, std::mt19937& rng) {
  const auto q_rows = static_cast<size_t>(shape.batch * shape.heads_q) * shape.nq;
  const auto k_rows = static_cast<size_t>(shape.batch * shape.heads_kv) * shape.nk;
  const auto d = static_cast<size_t>(shape.head_dim),
             dv = static_cast<size_t>(value_head_dim(shape));
  return {shape,
          random_tensor(q_rows * d, rng),
          random_tensor(k_rows * d, rng),
          random_tensor(k_rows * dv, rng),
          random_tensor(q_rows * dv, rng),
          {},
          {}};
}

// Sink logits from -2 to 4, about the range of the rows' largest logits, so that the sink weighs
// from little to most of a row; head 1 has none (-inf).
std::vector<float> random_sinks(int32_t heads, std::mt19937& rng) {
  std::uniform_real_distribution<float> logit(-2.0f, 4.0f);
  std::vector<float> sinks(static_cast<size_t>(heads));
  for (float& sink : sinks) sink = logit(rng);
  sinks[1] = -std::numeric_limits<float>::infinity();
  return sinks;
}

// ALiBi slopes from 0 to 0.1: across these lengths (distances up to 255) the bias moves the
// logits by up to 25, far past q·k, while the LSE that the backward reads back as float32 keeps
// the float64 comparison's precision; head 0 has slope 0.
std::vector<float> random_alibi_slopes(int32_t heads, std::mt19937& rng) {
  std::uniform_real_distribution<float> slope(0.0f, 0.1f);
  std::vector<float> slopes(static_cast<size_t>(heads));
  for (float& s : slopes) s = slope(rng);
  slopes[0] = 0.0f;
  return slopes;
}

struct Outputs {
  std::vector<float> out, lse, dq, dk, dv, dsinks;
};

Outputs run_reference(const MaskSet& set, const Inputs& in, float scale, float softcap,
                      Accumulate accumulate) {
  ReferenceOptions options;
  options.scale = scale;
  options.softcap = softcap;
  options.sinks = in.sinks.empty() ? nullptr : in.sinks.data();
  options.alibi_slopes = in.alibi_slopes.empty() ? nullptr : in.alibi_slopes.data();
  options.accumulate = accumulate;
  Outputs o{poisoned(in.dout.size()),
            poisoned(static_cast<size_t>(in.shape.batch) * in.shape.heads_q * in.shape.nq),
            poisoned(in.q.size()),
            poisoned(in.k.size()),
            poisoned(in.v.size()),
            poisoned(in.sinks.size())};
  reference_forward(set.blob.data(), in.shape, in.q.data(), in.k.data(), in.v.data(), o.out.data(),
                    o.lse.data(), options);
  reference_backward(set.blob.data(), in.shape, in.q.data(), in.k.data(), in.v.data(), o.out.data(),
                     in.dout.data(), o.lse.data(), nullptr, o.dq.data(), o.dk.data(), o.dv.data(),
                     in.sinks.empty() ? nullptr : o.dsinks.data(), options);
  return o;
}

// Row `row` of a tensor of head_dim columns (q, k and their gradients) and of one of
// head_dim_v columns (out, v and dV).
std::pair<std::span<const float>, std::span<const float>> row_slices(
    const std::vector<float>& narrow, const std::vector<float>& value_columns, size_t row,
    const AttentionShape& s) {
  const auto d = static_cast<size_t>(s.head_dim), dv = static_cast<size_t>(value_head_dim(s));
  return {std::span(narrow).subspan(row * d, d), std::span(value_columns).subspan(row * dv, dv)};
}

// Fully masked rows: O and dQ exactly 0, LSE -inf or the head's sink. Keys no query of the kv group
// sees: dK and dV exactly 0. Everything else finite.
void expect_exact_masked_values(const MaskSet& set, const Inputs& in, const Outputs& o) {
  const AttentionShape& s = in.shape;
  const int32_t group = s.heads_q / s.heads_kv;
  std::vector<uint8_t> key_seen(static_cast<size_t>(s.batch * s.heads_kv) * s.nk);
  for (int32_t b = 0; b < s.batch; ++b) {
    for (int32_t h = 0; h < s.heads_q; ++h) {
      const std::vector<uint8_t>& mask = set.dense_of(b, h, s.heads_q);
      for (int32_t i = 0; i < s.nq; ++i) {
        bool any = false;
        for (int32_t j = 0; j < s.nk; ++j) {
          if (!mask[static_cast<size_t>(i) * s.nk + j]) continue;
          any = true;
          key_seen[static_cast<size_t>(b * s.heads_kv + h / group) * s.nk + j] = 1;
        }
        const size_t row = static_cast<size_t>(b * s.heads_q + h) * s.nq + i;
        const float sink = in.sinks.empty() ? -std::numeric_limits<float>::infinity()
                                            : in.sinks[static_cast<size_t>(h)];
        ASSERT_TRUE(any ? std::isfinite(o.lse[row]) : o.lse[row] == sink)
            << "lse of row " << i << " head " << h << " batch " << b << " is " << o.lse[row];
        const auto [dq, out] = row_slices(o.dq, o.out, row, s);
        for (const std::span<const float> values : {dq, out}) {
          for (const float x : values) {
            ASSERT_TRUE(any ? std::isfinite(x) : x == 0.0f)
                << "row " << i << " head " << h << " batch " << b << ": dq or out " << x;
          }
        }
      }
    }
  }
  for (size_t key = 0; key < key_seen.size(); ++key) {
    const auto [dk, dv] = row_slices(o.dk, o.dv, key, s);
    for (const std::span<const float> values : {dk, dv}) {
      for (const float x : values) {
        ASSERT_TRUE(key_seen[key] ? std::isfinite(x) : x == 0.0f)
            << "key row " << key << ": dk or dv " << x;
      }
    }
  }
}

void expect_close(const Outputs& got, const DenseResult& want, double tolerance) {
  EXPECT_LE(relative_error(got.out, want.out), tolerance) << "O";
  EXPECT_LE(relative_error(got.lse, want.lse), tolerance) << "LSE";
  EXPECT_LE(relative_error(got.dq, want.dq), tolerance) << "dQ";
  EXPECT_LE(relative_error(got.dk, want.dk), tolerance) << "dK";
  EXPECT_LE(relative_error(got.dv, want.dv), tolerance) << "dV";
  EXPECT_LE(relative_error(got.dsinks, want.dsinks), tolerance) << "dsinks";
}

// Members of sparse grid runs (kPatternGridSparse) that are empty, over both forms of every
// instance: the reference skips them, as a kernel must.
int64_t empty_sparse_members(const std::vector<uint64_t>& blob) {
  const void* d = blob.data();
  const desc::Header& hd = desc::header(d);
  int64_t empty = 0;
  for (int32_t i = 0; i < hd.num_instances; ++i) {
    const desc::Instance& inst = desc::instance(d, i);
    for (bool forward : {true, false}) {
      const int32_t count = forward ? hd.num_q_tiles : hd.num_k_tiles;
      for (int32_t t = 0; t < count; ++t) {
        const desc::TileRow& row = forward ? desc::q_tile(d, inst, t) : desc::k_tile(d, inst, t);
        const desc::PartialRun* runs = desc::partial_runs(d, row);
        for (int32_t r = 0; r < row.partial_count; ++r) {
          const desc::Pattern& p = desc::pattern(d, runs[r].pattern);
          for (int32_t n = runs[r].first; n < runs[r].first + runs[r].count; ++n) {
            empty += !desc::partial_tile_nonempty(d, p, forward ? t : n, forward ? n : t);
          }
        }
      }
    }
  }
  return empty;
}

TEST(ReferenceSparseRuns, EmptyMembersAreSkippedExactly) {
  // Grid masks on small tiles give sparse runs that bridge empty tiles; the reference must
  // skip exactly those and still match the dense attention. Only row-major grids keep sparse
  // runs (strip-layout tiles are bitmaps), about half of the random ones.
  std::mt19937 rng(2024);
  int found = 0;
  for (int attempt = 0; attempt < 400 && found < 3; ++attempt) {
    const MaskSet set = make_mask_set(MaskKind::kGrid, 200, 200, 1, 2, Tiling{16, 16}, rng);
    if (empty_sparse_members(set.blob) == 0) continue;
    ++found;
    const AttentionShape shape{1, 2, 1, 200, 200, kHeadDim};
    const Inputs in = random_inputs(shape, rng);
    const DenseResult want = dense_attention(
        shape, 1.0 / std::sqrt(double{kHeadDim}), 0.0, in.sinks, in.alibi_slopes,
        [&](int32_t b, int32_t h) -> const std::vector<uint8_t>& { return set.dense_of(b, h, 2); },
        in.q, in.k, in.v, in.dout);
    const Outputs got = run_reference(set, in, 0.0f, 0.0f, Accumulate::kFloat64);
    expect_exact_masked_values(set, in, got);
    expect_close(got, want, kFloat64Tolerance);
  }
  EXPECT_GT(found, 0) << "no grid mask had a sparse run with an empty member";
}

class ReferenceMatchesDense : public testing::TestWithParam<Case> {};

TEST_P(ReferenceMatchesDense, ForwardAndBackward) {
  const auto [lengths, tiling, kind] = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(lengths.nq * 7919 + lengths.nk * 104729 + tiling.m * 31 +
                                         tiling.n + static_cast<int>(kind)));
  for (const HeadConfig& heads : kHeadConfigs) {
    SCOPED_TRACE("heads_q " + std::to_string(heads.heads_q) + " heads_kv " +
                 std::to_string(heads.heads_kv) + " softcap " + std::to_string(heads.softcap) +
                 (heads.sinks ? " with sinks" : "") + (heads.alibi ? " with ALiBi" : "") +
                 " head_dim_v " + std::to_string(heads.head_dim_v));
    const MaskSet set =
        make_mask_set(kind, lengths.nq, lengths.nk, kBatch, heads.heads_q, tiling, rng);
    const AttentionShape shape{kBatch,     heads.heads_q, heads.heads_kv,  lengths.nq,
                               lengths.nk, kHeadDim,      heads.head_dim_v};
    Inputs in = random_inputs(shape, rng);
    if (heads.sinks) in.sinks = random_sinks(heads.heads_q, rng);
    if (heads.alibi) in.alibi_slopes = random_alibi_slopes(heads.heads_q, rng);
    const DenseResult want = dense_attention(
        shape, heads.scale > 0 ? double{heads.scale} : 1.0 / std::sqrt(double{kHeadDim}),
        heads.softcap, in.sinks, in.alibi_slopes,
        [&](int32_t b, int32_t h) -> const std::vector<uint8_t>& {
          return set.dense_of(b, h, heads.heads_q);
        },
        in.q, in.k, in.v, in.dout);

    const Outputs f32 = run_reference(set, in, heads.scale, heads.softcap, Accumulate::kFloat32);
    const Outputs f64 = run_reference(set, in, heads.scale, heads.softcap, Accumulate::kFloat64);
    expect_exact_masked_values(set, in, f32);
    expect_exact_masked_values(set, in, f64);
    {
      SCOPED_TRACE("float32 accumulation");
      expect_close(f32, want, kFloat32Tolerance);
    }
    {
      SCOPED_TRACE("float64 accumulation");
      expect_close(f64, want, kFloat64Tolerance);
    }
    EXPECT_LE(relative_error(f32.dk, f64.dk), kFloat32Tolerance) << "float32 vs float64 dK";
    if (HasFailure()) return;
  }
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const auto& [lengths, tiling, kind] = info.param;
  return to_string(kind) + "_" + std::to_string(lengths.nq) + "x" + std::to_string(lengths.nk) +
         "_tile" + std::to_string(tiling.m) + "x" + std::to_string(tiling.n);
}

INSTANTIATE_TEST_SUITE_P(
    Masks, ReferenceMatchesDense,
    testing::Combine(testing::Values(Lengths{1, 1}, Lengths{17, 17}, Lengths{113, 113},
                                     Lengths{255, 255}, Lengths{1, 255}, Lengths{17, 113},
                                     Lengths{255, 64}, Lengths{113, 17}),
                     testing::Values(Tiling{16, 16}, Tiling{32, 64}, Tiling{128, 128}),
                     testing::Values(MaskKind::kCausal, MaskKind::kWindow, MaskKind::kRandom,
                                     MaskKind::kMixed, MaskKind::kGrid)),
    case_name);

}  // namespace
}  // namespace cm::test
