// The backward's automatic schedule (kernels/sm90/bwd_head_splits.h) on the host:
//   * estimated_bwd_steps, over the bundled examples' descriptors and random masks
//     (kernel_cases.h), in the three dispatch orders (paired, interleaved, deterministic): with
//     an SM for every CTA it is the costliest CTA's cost, and with one SM the sum of all, where a
//     CTA costs kBwdItemCostSteps plus the steps that StepCursor walks for each query head of
//     its split alone (kernel_walk_test holds that walk to the dense masks); the kv
//     postprocess's and the preprocess's zeroing are added. On a few SMs, the interleaved and
//     deterministic orders' estimate is the CTAs' greedy schedule in the order bwd_item_at
//     documents (interleaved: each rank of the descriptor's bwd order over the kv slices;
//     deterministic: key tiles ascending, then batch, kv head and split).
//   * auto_bwd_schedule: on the causal shapes that run 242 timed at every count, the count
//     measured fastest where it keeps the paired order; no split and the paired order when the
//     kv group is one head or the key tiles' CTAs make kBwdSplitWaves waves.
#include "bwd_head_splits.h"
#include "kernel_cases.h"

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace cm::sm90 {

// How gtest prints a schedule (found by argument-dependent lookup, so in BwdSchedule's namespace).
void PrintTo(const BwdSchedule& s, std::ostream* os) {
  *os << s.head_splits << " head splits, " << (s.interleave_slices ? "interleaved" : "paired");
}

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
  p.shape.slice_group = kPairedInstances;
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
      BwdMainParams p = params_for(c.descriptor(), c.batch, heads_q, heads_kv, splits);
      // The CTA of key tile n and head split `split` of kv slice (b, hk): kBwdItemCostSteps and
      // its query heads' steps.
      const auto cta_cost = [&](int b, int hk, int n, int split) {
        const TileRange heads = split_range(group, split, splits);
        int64_t cost = kBwdItemCostSteps;
        for (int j = heads.begin; j < heads.begin + heads.count; ++j) {
          const int h = hk * group + j;
          cost += head_steps[(static_cast<size_t>(b) * heads_q + h) * header.num_k_tiles + n];
        }
        return cost;
      };
      // The CTAs' costs in deterministic mode's dispatch order (key tile, its part, batch, kv
      // head, split), and in the interleaved order (each rank of the slices' own order, the
      // descriptor's bwd order of the group's first head, over the slices).
      std::vector<int64_t> deterministic_order, interleaved_order;
      for (int n = 0; n < header.num_k_tiles; ++n) {
        for (int part = 0; part < parts; ++part) {
          for (int b = 0; b < c.batch; ++b) {
            for (int hk = 0; hk < heads_kv; ++hk) {
              for (int split = 0; split < splits; ++split) {
                deterministic_order.push_back(cta_cost(b, hk, n, split));
              }
            }
          }
        }
      }
      for (int rank = 0; rank < header.num_k_tiles * parts * splits; ++rank) {
        for (int b = 0; b < c.batch; ++b) {
          for (int hk = 0; hk < heads_kv; ++hk) {
            const desc::Instance& inst = desc::instance(
                c.descriptor(), instance_index(c.descriptor(), p.shape, b, hk * group));
            const int n =
                desc::at<uint16_t>(c.descriptor(), inst.bwd_order_offset)[rank / (parts * splits)];
            interleaved_order.push_back(cta_cost(b, hk, n, rank % splits));
          }
        }
      }
      const int64_t costliest =
          *std::max_element(deterministic_order.begin(), deterministic_order.end());
      const auto ctas = static_cast<int>(deterministic_order.size());
      for (const int order : {0, 1, 2}) {  // paired, interleaved, deterministic
        const bool deterministic = order == 2;
        p.shape.slice_group = slice_group(p.shape, deterministic, {splits, order == 1});
        SCOPED_TRACE(order == 0 ? "paired" : order == 1 ? "interleaved" : "deterministic");
        const int64_t rest =
            estimated_kv_postprocess_steps(p.shape) + estimated_prep_zeroing_steps(p.shape);
        EXPECT_EQ(estimated_bwd_steps(p, deterministic, parts, ctas, tile_steps), costliest + rest);
        EXPECT_EQ(estimated_bwd_steps(p, deterministic, parts, 1, tile_steps),
                  greedy_schedule_end(deterministic_order, 1) + rest);
        if (order == 0) continue;  // the paired order's is checked by its extremes only
        for (const int sms : {2, 3, 7}) {
          EXPECT_EQ(
              estimated_bwd_steps(p, deterministic, parts, sms, tile_steps),
              greedy_schedule_end(deterministic ? deterministic_order : interleaved_order, sms) +
                  rest)
              << sms << " SMs";
        }
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

// auto_bwd_schedule on a causal mask of n rows for (batch, heads_q, heads_kv), on 132 SMs (the
// H200), one CTA per key tile.
BwdSchedule causal_schedule(int64_t n, int batch, int heads_q, int heads_kv,
                            bool deterministic = false) {
  CompileResult compiled = compile(testing::example_source("causal"), "causal.mask");
  EXPECT_TRUE(compiled);
  const Plan plan = compiled.mask->specialize({}, {.nq = n, .nk = n}, kernel_test::kKernelTiling);
  const BwdMainParams p = params_for(plan.blob(), batch, heads_q, heads_kv, 0);
  return auto_bwd_schedule(p, deterministic, 1, 132);
}

TEST(BwdHeadSplits, AutomaticSchedule) {
  // In the paired order, the fastest count of run 242 (docs/results/bench_head_splits.md: bf16,
  // head dim 128, every count timed): (B, N, heads q / kv) = (1, 256, 8 / 2): 4;
  // (1, 1024, 16 / 1): 16; (4, 512, 16 / 2): 4; (1, 4096, 16 / 2): 4. On the three shapes of 8
  // kv heads the estimate puts the interleaved order ahead, by 16%, 7% and 2.5% (not yet timed;
  // the paired order's fastest counts were 4, 4 and 2).
  EXPECT_EQ(causal_schedule(256, 1, 8, 2), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 16, 1), (BwdSchedule{16, false}));
  EXPECT_EQ(causal_schedule(512, 4, 16, 2), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(4096, 1, 16, 2), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 32, 8), (BwdSchedule{4, true}));
  EXPECT_EQ(causal_schedule(2048, 1, 32, 8), (BwdSchedule{2, true}));
  EXPECT_EQ(causal_schedule(4096, 1, 32, 8), (BwdSchedule{1, true}));
  // bwd_reference_test's case of the interleaved order (its batch is 2).
  EXPECT_EQ(causal_schedule(640, 2, 16, 8), (BwdSchedule{2, true}));
  // A kv group of one head only chooses the order: 169 steps paired, 146 interleaved.
  EXPECT_EQ(causal_schedule(4096, 1, 16, 16), (BwdSchedule{1, true}));
  EXPECT_EQ(causal_schedule(4096, 1, 16, 16, true), (BwdSchedule{1, false}));
}

TEST(BwdHeadSplits, NoSplitsWithoutAGroupOrWithFourWaves) {
  constexpr BwdSchedule kUnsplitPaired{1, false};
  for (const bool deterministic : {false, true}) {
    SCOPED_TRACE(deterministic ? "deterministic" : "default");
    // A kv group of one head, whose two orders tie on two key tiles.
    EXPECT_EQ(causal_schedule(256, 1, 8, 8, deterministic), kUnsplitPaired);
    // 2048 key-tile CTAs; the benchmarks' shape at 4K; 528 CTAs, four waves.
    EXPECT_EQ(causal_schedule(32768, 1, 32, 8, deterministic), kUnsplitPaired);
    EXPECT_EQ(causal_schedule(4096, 16, 16, 16, deterministic), kUnsplitPaired);
    EXPECT_EQ(causal_schedule(66 * 128, 1, 16, 8, deterministic), kUnsplitPaired);
  }
}

}  // namespace
}  // namespace cm::sm90
