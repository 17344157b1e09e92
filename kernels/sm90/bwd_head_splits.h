// The backward's automatic head splits (BackwardArgs::head_splits = 0): the count whose main
// kernel grid an estimate of the GPU's dispatch finishes first. Host code (bwd_host.cu;
// tests/gpu/bwd_head_splits_test.cu checks it on the CPU).
//
// Why an estimate of the dispatch, not a bound: the CTAs start in bwd_item_at's order (by
// default kv slices in pairs and each slice's key tiles longest first), as SMs free up. Over two or
// three waves that order leaves long items to start late: at B = 1, N = 4096 and 32 query heads on
// 8, the 256 key-tile CTAs of a causal mask ran 24% slower than 512 CTAs of two heads each,
// although the longest CTA and the SMs' share of the steps both favour the 256 (run 242,
// docs/perf-notes.md "Head splits"). A greedy replay of the order picked the fastest count
// measured on all seven shapes of that run.
#pragma once

#include "bwd_work.cuh"

#include <compilemask/descriptor.h>

#include <stdint.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <queue>
#include <vector>

namespace cm::sm90 {

// What a CTA costs beyond its steps, in steps' time (loading K and V, storing dK and dV; the
// timeline of session 18 put about 2 steps' time outside hstu's steps, and a head split adds
// its partial sums' round trip).
inline constexpr int64_t kBwdItemCostSteps = 3;
// The kv postprocess's cost with head splits: one step's time per this many rows of partial
// sums (head splits x kv slices x padded key rows; run 242 measured 12 us for 4 x 2 x 4096 rows
// at head dim 128, with a 64-row step about 2.6 us), plus one for the launch.
inline constexpr int64_t kKvPostprocessRowsPerStep = 8192;
// The preprocess's zeroing of dq_accum: one step's time per this many rows (a row holds half the
// bytes of a kv postprocess row, kHeadDim floats against 2 kHeadDim, and is only written).
inline constexpr int64_t kPrepZeroedRowsPerStep = 2 * kKvPostprocessRowsPerStep;
// Key tiles whose CTAs make this many waves or more are not split (the estimate gained under 1%
// from there on), and no count is tried whose CTAs make twice as many: the replay's host time.
inline constexpr int kBwdSplitWaves = 4;
// A count of more parts is taken only when its estimate is at least 1 / kBwdSplitGain faster
// than that of the fewer parts (splits cost workspace, and the estimate is rough).
inline constexpr int64_t kBwdSplitGain = 64;

// The kv postprocess's estimated time in steps for s.head_splits (none without head splits).
inline int64_t estimated_kv_postprocess_steps(const BwdShape& s) {
  if (s.head_splits == 1) return 0;
  return 1 + int64_t{s.head_splits} * s.batch * s.heads_kv * s.num_k_tiles * kBwdTile /
                 kKvPostprocessRowsPerStep;
}

// The main kernel's schedule: its head splits (BwdShape::head_splits) and, in the default mode,
// whether its dispatch interleaves all the kv slices instead of pairs (BwdShape::slice_group).
struct BwdSchedule {
  int head_splits;
  bool interleave_slices;
  bool operator==(const BwdSchedule&) const = default;
};

// BwdShape::slice_group for a schedule: all the kv slices in deterministic mode and when
// interleaved, else pairs.
inline int slice_group(const BwdShape& s, bool deterministic, const BwdSchedule& schedule) {
  return deterministic || schedule.interleave_slices ? s.batch * s.heads_kv : kPairedInstances;
}

// The preprocess's estimated time, in steps, zeroing the dq_accum of the first s.slice_group kv
// slices (the default mode's CTAs zero the others in idle warps, bwd_zeroing.cuh).
inline int64_t estimated_prep_zeroing_steps(const BwdShape& s) {
  const int64_t slices = std::min(s.slice_group, s.batch * s.heads_kv);
  return slices * (s.heads_q / s.heads_kv) * s.num_q_tiles * kBwdTile / kPrepZeroedRowsPerStep;
}

// One query head's steps on each key tile of each descriptor instance, as StepCursor walks
// them: the 64-row halves of the query tiles listed in the key tile's row (walked_halves: those
// inside the tile, less those its pattern marks empty), steps[instance * num_k_tiles + n].
struct TileSteps {
  explicit TileSteps(const void* descriptor) : num_k_tiles(desc::header(descriptor).num_k_tiles) {
    const desc::Header& h = desc::header(descriptor);
    BwdMainParams host{};  // what walked_halves reads: the descriptor and the query tiles' spans
    host.descriptor = descriptor;
    host.shape.q_starts = desc::at<int32_t>(descriptor, h.q_starts_offset);
    steps.reserve(static_cast<size_t>(h.num_instances) * num_k_tiles);
    for (int i = 0; i < h.num_instances; ++i) {
      const desc::Instance& inst = desc::instance(descriptor, i);
      for (int n = 0; n < num_k_tiles; ++n) {
        QueryTileCursor tiles(descriptor, desc::k_tile(descriptor, inst, n));
        int m = 0, pattern = 0, count = 0;
        while (tiles.next(m, pattern)) count += std::popcount(walked_halves(host, m, pattern));
        steps.push_back(count);
      }
    }
  }
  int num_k_tiles;
  std::vector<int32_t> steps;
};

// The estimated time, in steps, of the backward's main kernel, kv postprocess and the
// preprocess's zeroing of dq_accum for p.shape.head_splits and p.shape.slice_group, with
// `parts` CTAs per key tile, on `sms` SMs (one CTA each). The main kernel's CTAs start in the
// dispatch order of the mode (bwd_item_at), each on the SM that frees first, and each costs its
// query heads' steps on its key tile (tile_steps) plus kBwdItemCostSteps. In deterministic mode an
// item's ordered dQ adds may also wait for the earlier items of its heads; the estimate leaves
// those waits out. Preconditions: sms >= 1, p.descriptor is host memory, p.shape holds the
// sizes (batch, heads, num_k_tiles, desc_batch, desc_heads) whose (b, h) the descriptor's instance
// map covers, and its head_splits and slice_group are set.
inline int64_t estimated_bwd_steps(const BwdMainParams& p, bool deterministic, int parts, int sms,
                                   const TileSteps& tile_steps) {
  const BwdShape& s = p.shape;
  const int group = s.heads_q / s.heads_kv;
  const dim3 grid = bwd_main_grid(s, deterministic, parts);
  const int64_t ctas = int64_t{grid.x} * grid.y * grid.z;
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> free_at;  // the busy SMs
  int64_t end = 0;
  for (int64_t i = 0; i < ctas; ++i) {
    const auto x = static_cast<unsigned>(i % grid.x);
    const auto y = static_cast<unsigned>(i / grid.x % grid.y);
    const auto z = static_cast<unsigned>(i / (int64_t{grid.x} * grid.y));
    const BwdItem item = bwd_item_at(p, deterministic, parts, s.head_splits, dim3(x, y, z), grid);
    const TileRange heads = split_range(group, item.split, s.head_splits);
    int64_t cost = kBwdItemCostSteps;
    for (int j = heads.begin; j < heads.begin + heads.count; ++j) {
      const int instance = instance_index(p.descriptor, s, item.b, item.hk * group + j);
      cost += tile_steps.steps[static_cast<size_t>(instance) * tile_steps.num_k_tiles + item.n];
    }
    int64_t start = 0;
    if (static_cast<int>(free_at.size()) == sms) {
      start = free_at.top();
      free_at.pop();
    }
    free_at.push(start + cost);
    end = std::max(end, start + cost);
  }
  return end + estimated_kv_postprocess_steps(s) + estimated_prep_zeroing_steps(s);
}

// The schedule for BackwardArgs::head_splits = 0: of the counts 1 to the kv group's size, and in
// the default mode of the paired and the interleaved order, the one with the least
// estimated_bwd_steps; a later candidate (more parts, or the interleaved order of as many) only
// when faster by more than 1 / kBwdSplitGain. Tried: for each size of the largest part
// (ceil(group / count)), its fewest count (more would add CTAs, not shorten the longest), while
// the CTAs make at most 2 x kBwdSplitWaves waves. {1, paired} without reading the descriptor
// when the key tiles' CTAs alone make kBwdSplitWaves (the paired order keeps the dQ rows in L2
// at 32K), or when the kv group is one head and there is one order to take. Preconditions: as
// estimated_bwd_steps'.
inline BwdSchedule auto_bwd_schedule(BwdMainParams p, bool deterministic, int parts, int sms) {
  const int group = p.shape.heads_q / p.shape.heads_kv;
  const int64_t items = int64_t{p.shape.batch} * p.shape.heads_kv * p.shape.num_k_tiles * parts;
  const int64_t wave = sms;
  const int slices = p.shape.batch * p.shape.heads_kv;
  BwdSchedule best{1, false};
  const bool one_order = deterministic || slices <= kPairedInstances;
  if ((group < 2 && one_order) || items >= kBwdSplitWaves * wave) return best;
  const TileSteps tile_steps(p.descriptor);
  int64_t best_steps = -1;
  for (int splits = 1; splits <= group && items * splits <= 2 * kBwdSplitWaves * wave; ++splits) {
    if (splits > 1 && (group + splits - 1) / splits == (group + splits - 2) / (splits - 1)) {
      continue;
    }
    for (const bool interleave : {false, true}) {
      // Deterministic mode has its own order, and two slices interleave as a pair.
      if (interleave && one_order) continue;
      p.shape.head_splits = splits;
      p.shape.slice_group = slice_group(p.shape, deterministic, {splits, interleave});
      const int64_t steps = estimated_bwd_steps(p, deterministic, parts, sms, tile_steps);
      if (best_steps < 0 || steps * kBwdSplitGain < best_steps * (kBwdSplitGain - 1)) {
        best = {splits, interleave};
        best_steps = steps;
      }
    }
  }
  return best;
}

}  // namespace cm::sm90
