// The backward's automatic head splits (kernels/sm90/bwd_head_splits.h) on the host:
//   * estimated_bwd_steps, over the bundled examples' descriptors and random masks
//     (kernel_cases.h), in both modes: with an SM for every CTA it is the costliest CTA's cost,
//     and with one SM the sum of all, where a CTA costs kBwdItemCostSteps plus the steps that
//     StepCursor walks for each query head of its split alone (kernel_walk_test holds that walk
//     to the dense masks); with head splits the kv postprocess's cost is added. On a few
//     SMs, deterministic mode's estimate is the CTAs' greedy schedule in the order its grid
//     documents (bwd_item_at: key tiles ascending, then batch, kv head and split).
//   * auto_head_splits: on the causal shapes that run 242 timed at every count, it picks the
//     count measured fastest; none when the kv group is one head or the key tiles' CTAs make
//     kBwdSplitWaves waves.
#include "bwd_head_splits.h"
#include "kernel_cases.h"

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cm::sm90 {
namespace {

using kernel_test::KernelCase;
using kernel_test::kTile;

// The main kernel's parameters for a descriptor (host memory) and problem sizes.
BwdMainParams params_for(const void* descriptor, int batch, int heads_q, int heads_kv,
                         int head_splits) {
  BwdMainParams p{};
  static_cast<ProblemShape&>(p.shape) =
      kernel_test::problem_shape_of(descriptor, batch, heads_q, heads_kv);
  p.shape.head_splits = head_splits;
  p.descriptor = descriptor;
  return p;
}

// The end of CTAs of these costs started in this order, each on the first of `sms` SMs to free.
int64_t greedy_schedule_end(const std::vector<int64_t>& costs_in_order, int sms) {
  std::vector<int64_t> free_at(static_cast<size_t>(sms), 0);
  int64_t end = 0;
  for (const int64_t cost : costs_in_order) {
    int64_t& sm = *std::min_element(free_at.begin(), free_at.end());
    sm += cost;
    end = std::max(end, sm);
  }
  return end;
}

// The case with a kv group of several heads: its own heads on one kv head, or, for a case of
// one mask per batch entry, four query heads on two.
void check_estimate(const KernelCase& c) {
  const int heads_q = c.heads > 1 ? c.heads : 4;
  const int heads_kv = c.heads > 1 ? 1 : 2;
  const int group = heads_q / heads_kv;
  const desc::Header& header = desc::header(c.descriptor());
  // One query head's steps on each (b, h, key tile): what StepCursor walks for an item of that
  // head alone (kernel_walk_test holds its walk to the dense masks).
  std::vector<int64_t> head_steps;
  const BwdMainParams one_head = params_for(c.descriptor(), c.batch, heads_q, heads_kv, group);
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < heads_q; ++h) {
      for (int n = 0; n < header.num_k_tiles; ++n) {
        StepCursor walk(one_head, BwdItem{b, h / group, n, 0, h % group, 0}, group);
        int64_t steps = 0;
        for (BwdStep step; walk.next(step);) ++steps;
        head_steps.push_back(steps);
      }
    }
  }
  const TileSteps tile_steps(c.descriptor());
  for (const int splits : {1, 2, group}) {
    for (const int parts : {1, 2}) {
      SCOPED_TRACE(c.name + ", head splits " + std::to_string(splits) + ", parts " +
                   std::to_string(parts));
      const BwdMainParams p = params_for(c.descriptor(), c.batch, heads_q, heads_kv, splits);
      // The CTAs' costs in deterministic mode's dispatch order: key tile, its part, batch, kv
      // head, split.
      std::vector<int64_t> deterministic_order;
      for (int n = 0; n < header.num_k_tiles; ++n) {
        for (int part = 0; part < parts; ++part) {
          for (int b = 0; b < c.batch; ++b) {
            for (int hk = 0; hk < heads_kv; ++hk) {
              for (int split = 0; split < splits; ++split) {
                const TileRange heads = split_range(group, split, splits);
                int64_t cost = kBwdItemCostSteps;
                for (int j = heads.begin; j < heads.begin + heads.count; ++j) {
                  const int h = hk * group + j;
                  cost +=
                      head_steps[(static_cast<size_t>(b) * heads_q + h) * header.num_k_tiles + n];
                }
                deterministic_order.push_back(cost);
              }
            }
          }
        }
      }
      const int64_t costliest =
          *std::max_element(deterministic_order.begin(), deterministic_order.end());
      const auto ctas = static_cast<int>(deterministic_order.size());
      const int64_t post = estimated_kv_postprocess_steps(p.shape);
      for (const bool deterministic : {false, true}) {
        SCOPED_TRACE(deterministic ? "deterministic" : "default");
        EXPECT_EQ(estimated_bwd_steps(p, deterministic, parts, ctas, tile_steps), costliest + post);
        EXPECT_EQ(estimated_bwd_steps(p, deterministic, parts, 1, tile_steps),
                  greedy_schedule_end(deterministic_order, 1) + post);
      }
      for (const int sms : {2, 3, 7}) {
        EXPECT_EQ(estimated_bwd_steps(p, true, parts, sms, tile_steps),
                  greedy_schedule_end(deterministic_order, sms) + post)
            << sms << " SMs";
      }
    }
  }
}

TEST(BwdHeadSplits, EstimateOfTheBundledExamples) {
  kernel_test::for_each_example(check_estimate);
}

TEST(BwdHeadSplits, EstimateOfRandomMasks) {
  std::mt19937 rng(11);
  for (int iteration = 0; iteration < 20; ++iteration) {
    const int32_t nq = std::uniform_int_distribution<int32_t>(1, 700)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 700)(rng);
    check_estimate(kernel_test::random_case(rng, nq, nk, iteration % 2 == 1,
                                            "iteration " + std::to_string(iteration)));
  }
}

// auto_head_splits on a causal mask of n rows for (batch, heads_q, heads_kv), on 132 SMs (the
// H200), one CTA per key tile.
int causal_head_splits(int64_t n, int batch, int heads_q, int heads_kv,
                       bool deterministic = false) {
  CompileResult compiled = compile(testing::example_source("causal"), "causal.mask");
  EXPECT_TRUE(compiled);
  const Plan plan = compiled.mask->specialize({}, {.nq = n, .nk = n}, kernel_test::kKernelTiling);
  const BwdMainParams p = params_for(plan.blob(), batch, heads_q, heads_kv, 0);
  return auto_head_splits(p, deterministic, 1, 132);
}

TEST(BwdHeadSplits, AutomaticCountIsTheFastestMeasured) {
  // Run 242 (docs/results/bench_head_splits.md): bf16, head dim 128, every count from 1 to the
  // group timed; the fastest: (B, N, heads q / kv) = (1, 256, 8 / 2): 4; (1, 1024, 32 / 8): 4;
  // (1, 1024, 16 / 1): 16; (4, 512, 16 / 2): 4; (1, 2048, 32 / 8): 4; (1, 4096, 16 / 2): 4;
  // (1, 4096, 32 / 8): 2, whose 256 key-tile CTAs fill the SMs.
  EXPECT_EQ(causal_head_splits(256, 1, 8, 2), 4);
  EXPECT_EQ(causal_head_splits(1024, 1, 32, 8), 4);
  EXPECT_EQ(causal_head_splits(1024, 1, 16, 1), 16);
  EXPECT_EQ(causal_head_splits(512, 4, 16, 2), 4);
  EXPECT_EQ(causal_head_splits(2048, 1, 32, 8), 4);
  EXPECT_EQ(causal_head_splits(4096, 1, 16, 2), 4);
  EXPECT_EQ(causal_head_splits(4096, 1, 32, 8), 2);
}

TEST(BwdHeadSplits, NoSplitsWithoutAGroupOrWithFourWaves) {
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "default");
    EXPECT_EQ(causal_head_splits(256, 1, 8, 8, deterministic), 1);        // a kv group of one head
    EXPECT_EQ(causal_head_splits(32768, 1, 32, 8, deterministic), 1);     // 2048 key-tile CTAs
    EXPECT_EQ(causal_head_splits(4096, 16, 16, 16, deterministic), 1);    // the benchmarks' 4K
    EXPECT_EQ(causal_head_splits(66 * 128, 1, 16, 8, deterministic), 1);  // 528 CTAs: 4 waves
  }
}

}  // namespace
}  // namespace cm::sm90
