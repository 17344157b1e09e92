// The backward's automatic schedule (kernels/sm90/bwd_head_splits.h) on the host:
//   * TileSteps counts each key tile's walk, and its waits in deterministic mode, as StepCursor
//     walks it, on the bundled examples' descriptors and random masks (kernel_cases.h).
//   * estimated_bwd_steps there, in the three dispatch orders (paired, interleaved,
//     deterministic): with one SM it is the sum of all CTAs' costs, where a CTA costs
//     kBwdItemCostSteps plus the steps StepCursor walks for each query head of its split
//     (kernel_walk_test holds that walk to the dense masks); the kv postprocess's and the
//     preprocess's zeroing are added. On more SMs the paired and interleaved orders' estimate
//     is the CTAs' greedy schedule in the order bwd_item_at documents (the paired order's at
//     its extreme, an SM per CTA); deterministic mode's, whose ordered dQ adds wait, lies
//     between that schedule (the interleaved order with key tiles ascending) and one SM's,
//     and a worked case pins the waits.
//   * auto_bwd_schedule: on the causal shapes that runs 242 and 244 timed at every count, the
//     count measured fastest; a given count's order; no split and the paired order when the kv
//     group is one head or the key tiles' CTAs make kBwdSplitWaves waves.
#include "bwd_head_splits.h"
#include "bwd_schedule_memo.h"
#include "kernel_cases.h"

#include <compilemask/compilemask.h>
#include <compilemask/descriptor.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
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
  // head alone (kernel_walk_test holds its walk to the dense masks), and TileSteps' count and
  // waits of that walk in deterministic mode's order: per lower key tile that last walked some
  // of its halves, the largest of that walk's position of such a half plus one less this one's.
  const TileSteps tile_steps(c.descriptor());
  std::vector<int64_t> head_steps;
  const BwdMainParams one_head = params_for(c.descriptor(), c.batch, heads_q, heads_kv, group);
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < heads_q; ++h) {
      std::map<int, std::pair<int, int>> last_walk;  // per half 2 m + half: (key tile, position)
      const int instance = desc::instance_of(c.descriptor(), b, h);
      for (int n = 0; n < header.num_k_tiles; ++n) {
        StepCursor<true> walk(one_head, BwdItem{b, h / group, n, 0, h % group, 0}, group);
        std::map<int, int> waits;  // key tile -> offset
        int position = 0;
        for (BwdStep step; walk.next(step); ++position) {
          const int half = 2 * step.m + step.half;
          if (const auto last = last_walk.find(half); last != last_walk.end()) {
            const auto [tile, at] = last->second;
            const auto [wait, added] = waits.insert({tile, at + 1 - position});
            if (!added) wait->second = std::max(wait->second, at + 1 - position);
          }
          last_walk[half] = {n, position};
        }
        const size_t at = static_cast<size_t>(instance) * header.num_k_tiles + n;
        SCOPED_TRACE(c.name + ": b " + std::to_string(b) + ", h " + std::to_string(h) +
                     ", key tile " + std::to_string(n));
        EXPECT_EQ(tile_steps.steps[at], position);
        std::map<int, int> estimated;
        for (int32_t w = tile_steps.wait_begin[at]; w < tile_steps.wait_begin[at + 1]; ++w) {
          const TileSteps::Wait& wait = tile_steps.waits[static_cast<size_t>(w)];
          EXPECT_TRUE(estimated.insert({wait.tile, wait.offset}).second) << "tile " << wait.tile;
        }
        EXPECT_EQ(estimated, waits);
        head_steps.push_back(position);
      }
    }
  }
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
      // The CTAs' costs in the interleaved order (each rank of the slices' own order over the
      // slices) of each mode: the key tile of a rank is the default mode's from the
      // descriptor's bwd order of the group's first head, deterministic mode's ascending.
      std::vector<int64_t> deterministic_order, interleaved_order;
      for (int rank = 0; rank < header.num_k_tiles * parts * splits; ++rank) {
        for (int b = 0; b < c.batch; ++b) {
          for (int hk = 0; hk < heads_kv; ++hk) {
            const desc::Instance& inst = desc::mask_of(c.descriptor(), b, hk * group);
            const int n = rank / (parts * splits);
            interleaved_order.push_back(
                cta_cost(b, hk, desc::at<uint16_t>(c.descriptor(), inst.bwd_order_offset)[n],
                         rank % splits));
            deterministic_order.push_back(cta_cost(b, hk, n, rank % splits));
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
        // One SM runs the CTAs one after another, so no dQ add waits.
        EXPECT_EQ(estimated_bwd_steps(p, deterministic, parts, 1, tile_steps),
                  greedy_schedule_end(deterministic_order, 1) + rest);
        if (order == 0) {  // the paired order's is checked by its extremes only
          EXPECT_EQ(estimated_bwd_steps(p, false, parts, ctas, tile_steps), costliest + rest);
          continue;
        }
        for (const int sms : {2, 3, 7, ctas}) {
          const int64_t greedy =
              greedy_schedule_end(deterministic ? deterministic_order : interleaved_order, sms) +
              rest;
          const int64_t estimate = estimated_bwd_steps(p, deterministic, parts, sms, tile_steps);
          if (!deterministic) {
            EXPECT_EQ(estimate, greedy) << sms << " SMs";
            continue;
          }
          // The waits only delay: no earlier than the schedule without them, no later than one
          // SM's.
          EXPECT_GE(estimate, greedy) << sms << " SMs";
          EXPECT_LE(estimate, greedy_schedule_end(deterministic_order, 1) + rest) << sms << " SMs";
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

// A causal mask of n rows, specialized to the kernels' tiles.
Plan causal_plan(int64_t n) {
  CompileResult compiled = compile(testing::example_source("causal"), "causal.mask");
  EXPECT_TRUE(compiled);
  return compiled.mask->specialize({}, {.nq = n, .nk = n}, kernel_test::kKernelTiling);
}

// auto_bwd_schedule on a causal mask of n rows for (batch, heads_q, heads_kv) and head_splits,
// on 132 SMs (the H200), one CTA per key tile.
BwdSchedule causal_schedule(int64_t n, int batch, int heads_q, int heads_kv,
                            bool deterministic = false, int head_splits = 0) {
  const Plan plan = causal_plan(n);
  const BwdMainParams p = params_for(plan.blob(), batch, heads_q, heads_kv, 0);
  return auto_bwd_schedule(p, deterministic, 1, 132, head_splits);
}

TEST(BwdHeadSplits, DeterministicAddsWait) {
  // Causal, 256 rows, 4 query heads on 2, one CTA per key tile and kv head, on 3 SMs. Key tile 0
  // walks query tiles 1 and 0 (both halves each, descending) for each of its 2 heads: 3 + 8 = 11
  // steps; key tile 1 walks tile 1: 3 + 4 = 7. (n 0, hk 0), (0, 1) and (1, 0) start at 0; (1,
  // 0)'s walk of a head waits a step for (0, 0)'s walk of it, which starts at 3 (its first head)
  // and 7 (its second): (1, 0) walks 4-6 and 8-10 and ends at 10, not 7. (1, 1) starts on the SM
  // freed at 10 and ends at 17 (14 without the waits, 18 with an ascending walk's).
  const Plan plan = causal_plan(256);
  BwdMainParams p = params_for(plan.blob(), 1, 4, 2, 1);
  p.shape.slice_group = slice_group(p.shape, true, {1, false});
  const TileSteps tile_steps(plan.blob());
  const int64_t rest = estimated_prep_zeroing_steps(p.shape);
  EXPECT_EQ(estimated_bwd_steps(p, true, 1, 3, tile_steps), 17 + rest);
  EXPECT_EQ(estimated_bwd_steps(p, true, 1, 4, tile_steps), 11 + rest);
}

TEST(BwdHeadSplits, AutomaticSchedule) {
  // The fastest schedule of run 246 (docs/results/bench_head_splits.md: bf16, head dim 128,
  // every count timed) on six of the seven shapes with a group; at (4, 512, 16 / 2) 6 parts ran
  // 4.5% faster than the 4 chosen (and run 242 timed 4 the fastest). Run 245 measured the
  // interleaved order on the three shapes of 8 kv heads 15%, 8% and 10% faster than the paired
  // order's fastest counts (4, 4 and 2; estimated 16%, 7% and 2.5%).
  EXPECT_EQ(causal_schedule(256, 1, 8, 2), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 16, 1), (BwdSchedule{16, false}));
  EXPECT_EQ(causal_schedule(512, 4, 16, 2), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(4096, 1, 16, 2), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 32, 8), (BwdSchedule{4, true}));
  EXPECT_EQ(causal_schedule(2048, 1, 32, 8), (BwdSchedule{2, true}));
  EXPECT_EQ(causal_schedule(4096, 1, 32, 8), (BwdSchedule{1, true}));
  // bwd_reference_test's case of the interleaved order (its batch is 2).
  EXPECT_EQ(causal_schedule(640, 2, 16, 8), (BwdSchedule{2, true}));
  // A kv group of one head only chooses the order: 169 steps paired, 146 interleaved (run 245:
  // 17% faster).
  EXPECT_EQ(causal_schedule(4096, 1, 16, 16), (BwdSchedule{1, true}));
  EXPECT_EQ(causal_schedule(4096, 1, 16, 16, true), (BwdSchedule{1, false}));
}

TEST(BwdHeadSplits, DeterministicSchedule) {
  // Deterministic mode's automatic count where it was the fastest of run 246 (docs/results/
  // bench_head_splits_deterministic.md, every count timed). At (1, 4096, 32 / 8) three parts of
  // 2, 1 and 1 heads beat two of 2, which the adds' waits decide (316 against 341 steps;
  // measured 1.775 ms at 3, 1.960 at 2, 2.348 at 1).
  EXPECT_EQ(causal_schedule(256, 1, 8, 2, true), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 32, 8, true), (BwdSchedule{4, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 16, 1, true), (BwdSchedule{16, false}));
  EXPECT_EQ(causal_schedule(4096, 1, 32, 8, true), (BwdSchedule{3, false}));
}

TEST(BwdHeadSplits, GivenCountChoosesItsOrder) {
  // The default mode replays both orders of a given count: at (1, 4096, 32 / 8) two parts run
  // paired (279 steps against 289 interleaved), four interleaved; deterministic mode has one.
  EXPECT_EQ(causal_schedule(4096, 1, 32, 8, false, 2), (BwdSchedule{2, false}));
  EXPECT_EQ(causal_schedule(1024, 1, 32, 8, false, 4), (BwdSchedule{4, true}));
  EXPECT_EQ(causal_schedule(1024, 1, 32, 8, true, 4), (BwdSchedule{4, false}));
  // Key tiles of four waves keep the paired order at any count.
  EXPECT_EQ(causal_schedule(32768, 1, 32, 8, false, 2), (BwdSchedule{2, false}));
}

// A prefix-LM mask of n rows whose first `prefix` rows see each other (0: causal, n: full).
Plan prefix_lm_plan(int64_t n, int64_t prefix) {
  CompileResult compiled = compile(testing::example_source("prefix_lm"), "prefix_lm.mask");
  EXPECT_TRUE(compiled);
  return compiled.mask->specialize({{"P", prefix}}, {.nq = n, .nk = n}, kernel_test::kKernelTiling);
}

TEST(BwdHeadSplits, MemoKeepsEachDescriptorsSchedule) {
  // Two masks of the same sizes whose schedules differ: the memo keys on the descriptor's bytes.
  // Each is asked twice, in turns, in both modes and for automatic and given counts.
  const Plan causal = prefix_lm_plan(2048, 0), full = prefix_lm_plan(2048, 2048);
  for (const bool deterministic : {false, true}) {
    for (const int head_splits : {0, 2}) {
      SCOPED_TRACE(std::string(deterministic ? "deterministic" : "default") + ", head splits " +
                   std::to_string(head_splits));
      std::vector<BwdSchedule> replayed;
      for (const Plan* plan : {&causal, &full}) {
        const BwdMainParams p = params_for(plan->blob(), 1, 32, 8, 0);
        replayed.push_back(auto_bwd_schedule(p, deterministic, 1, 132, head_splits));
      }
      if (head_splits == 0) EXPECT_NE(replayed[0], replayed[1]);
      for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < 2; ++i) {
          const BwdMainParams p = params_for((i == 0 ? causal : full).blob(), 1, 32, 8, 0);
          EXPECT_EQ(memoized_bwd_schedule(p, deterministic, 1, 132, head_splits), replayed[i])
              << "round " << round << ", mask " << i;
        }
      }
    }
  }
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
