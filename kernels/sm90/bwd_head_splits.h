// The backward's schedule: the automatic head splits (BackwardArgs::head_splits = 0) and, in the
// default mode, the kv slices' dispatch order, those whose main kernel grid an estimate of the
// GPU's dispatch finishes first. Host code (bwd_host.cu; tests/gpu/bwd_head_splits_test.cu
// checks it on the CPU).
//
// Why an estimate of the dispatch, not a bound: the CTAs start in bwd_item_at's order (by
// default kv slices in pairs and each slice's key tiles longest first), as SMs free up. Over two or
// three waves that order leaves long items to start late: at B = 1, N = 4096 and 32 query heads on
// 8, the 256 key-tile CTAs of a causal mask ran 24% slower than 512 CTAs of two heads each,
// although the longest CTA and the SMs' share of the steps both favour the 256 (run 242,
// docs/perf-notes.md "Head splits"). A greedy replay of the order picked the fastest count
// measured on all seven shapes of that run, and the interleaved order where run 245 measured it
// 8-17% faster.
#pragma once

#include "bwd_work.cuh"

#include <compilemask/descriptor.h>

#include <stdint.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
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
// interleaved, else pairs. Deterministic mode's adds to the same 64 rows wait for each other
// one after another (dq_rank), so it runs as few items of one head at once as it can: at 32K
// with 16 kv slices, groups of 1, 2, 4 and 8 slices ran causal in 39.4, 34.2, 31.6 and 30.0 ms
// against all 16's 29.3, and sliding in 39.4, 28.2, 16.2 and 8.5 against 7.7 (run 249).
inline int slice_group(const BwdShape& s, bool deterministic, const BwdSchedule& schedule) {
  return deterministic || schedule.interleave_slices ? s.batch * s.heads_kv : kPairedInstances;
}

// The preprocess's estimated time, in steps, zeroing the dq_accum of the first s.slice_group kv
// slices (the default mode's CTAs zero the others in idle warps, bwd_zeroing.cuh).
inline int64_t estimated_prep_zeroing_steps(const BwdShape& s) {
  const int64_t slices = std::min(s.slice_group, s.batch * s.heads_kv);
  return slices * (s.heads_q / s.heads_kv) * s.num_q_tiles * kBwdTile / kPrepZeroedRowsPerStep;
}

// One query head's walk on each key tile of each descriptor instance, as StepCursor walks it:
// its steps, the 64-row halves of the query tiles listed in the key tile's row (walked_halves:
// those inside the tile, less those its pattern marks empty); and what its dQ adds wait for in
// deterministic mode, whose walk descends (StepCursor<true>): a half's adds go in ascending key
// tile order (dq_rank), so each half that a lower key tile walked waits for the highest such
// tile's add. A Wait per such tile: this walk must start `offset` steps or more after that
// tile's walk started, the largest over the halves it waits there for of the lower walk's
// position of the half plus one, less this walk's. The steps of key tile n of instance i at
// index i * num_k_tiles + n, and that walk's waits at [wait_begin[index], wait_begin[index + 1])
// of `waits`.
struct TileSteps {
  struct Wait {
    int32_t tile, offset;
  };

  explicit TileSteps(const void* descriptor) : num_k_tiles(desc::header(descriptor).num_k_tiles) {
    const desc::Header& h = desc::header(descriptor);
    BwdMainParams host{};  // what walked_halves reads: the descriptor and the query tiles' spans
    host.descriptor = descriptor;
    host.shape.q_starts = desc::at<int32_t>(descriptor, h.q_starts_offset);
    steps.reserve(static_cast<size_t>(h.num_instances) * num_k_tiles);
    wait_begin.reserve(steps.capacity() + 1);
    wait_begin.push_back(0);
    // Per 64-row half (2 m + half): the highest key tile so far that walks it, and where.
    struct Walked {
      int32_t tile, position;
    };
    std::vector<Walked> last_walk;
    for (int i = 0; i < h.num_instances; ++i) {
      const desc::Instance& inst = desc::instance(descriptor, i);
      last_walk.assign(2 * static_cast<size_t>(h.num_q_tiles), Walked{-1, 0});
      for (int n = 0; n < num_k_tiles; ++n) {
        QueryTileCursor<true> tiles(descriptor, desc::k_tile(descriptor, inst, n));
        const auto first_wait = static_cast<std::ptrdiff_t>(waits.size());
        int m = 0, pattern = 0, position = 0;
        while (tiles.next(m, pattern)) {
          const unsigned halves = walked_halves(host, m, pattern);
          for (int half = 0; half < 2; ++half) {
            if (((halves >> half) & 1u) == 0) continue;
            Walked& last = last_walk[2 * static_cast<size_t>(m) + half];
            if (last.tile >= 0) {
              const int32_t offset = last.position + 1 - position;
              const auto same_tile =
                  std::find_if(waits.begin() + first_wait, waits.end(),
                               [&](const Wait& w) { return w.tile == last.tile; });
              if (same_tile == waits.end()) {
                waits.push_back({last.tile, offset});
              } else {
                same_tile->offset = std::max(same_tile->offset, offset);
              }
            }
            last = {n, position++};
          }
        }
        steps.push_back(position);
        wait_begin.push_back(static_cast<int32_t>(waits.size()));
      }
    }
  }
  int num_k_tiles;
  std::vector<int32_t> steps, wait_begin;
  std::vector<Wait> waits;
};

// The estimated time, in steps, of the backward's main kernel, kv postprocess and the
// preprocess's zeroing of dq_accum for p.shape.head_splits and p.shape.slice_group, with
// `parts` CTAs per key tile, on `sms` SMs (one CTA each). The main kernel's CTAs start in the
// dispatch order of the mode (bwd_item_at), each on the SM that frees first, and each costs
// kBwdItemCostSteps plus its query heads' steps on its key tile (tile_steps). In deterministic
// mode an item's dQ adds to rows that lower key tiles (or its key tile's lower parts) also walk
// wait for theirs (dq_rank), so its walk of a head starts no earlier than each such tile's walk
// of that head started plus the wait's offset (TileSteps), and a later part's no earlier than
// the part before's plus one: each walk runs at one step per step once started, and starts
// late by what its most demanding shared half needs. Those waits hold a short item on its SM
// while the items of lower key tiles pass its rows (run 244: with one part, (1, 4096, 32 / 8)
// took 2.4 times the default mode's time).
// Preconditions: sms >= 1, p.descriptor is host memory,
// p.shape holds the sizes (batch, heads, num_k_tiles) whose (b, h) the
// descriptor's instance map covers, and its head_splits and slice_group are set. Returns early,
// with a value of at least stop_at, once the estimate reaches stop_at (a candidate that cannot
// win).
inline int64_t estimated_bwd_steps(const BwdMainParams& p, bool deterministic, int parts, int sms,
                                   const TileSteps& tile_steps,
                                   int64_t stop_at = std::numeric_limits<int64_t>::max()) {
  const BwdShape& s = p.shape;
  const int64_t rest = estimated_kv_postprocess_steps(s) + estimated_prep_zeroing_steps(s);
  const int group = s.heads_q / s.heads_kv;
  const dim3 grid = bwd_main_grid(s, parts);
  // Where each (b, query head)'s instance starts in tile_steps.
  std::vector<size_t> head_tiles(static_cast<size_t>(s.batch) * s.heads_q);
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.heads_q; ++h) {
      head_tiles[static_cast<size_t>(b) * s.heads_q + h] =
          static_cast<size_t>(desc::instance_of(p.descriptor, b, h)) * tile_steps.num_k_tiles;
    }
  }
  // Deterministic mode: when each (b, query head)'s walk of each key tile started (its last
  // part's), at [head * num_k_tiles + n].
  const auto tiles = static_cast<size_t>(tile_steps.num_k_tiles);
  std::vector<int64_t> walk_start(deterministic ? head_tiles.size() * tiles : 0, 0);
  std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> free_at;  // the busy SMs
  int64_t end = 0;
  // The CTAs in block index order, x fastest (bwd_item_at).
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        const BwdItem item =
            bwd_item_at(p, deterministic, parts, s.head_splits, dim3(x, y, z), grid);
        int64_t t = 0;  // the CTA's start, then the end of its work so far
        if (static_cast<int>(free_at.size()) == sms) {
          t = free_at.top();
          free_at.pop();
        }
        t += kBwdItemCostSteps;
        const TileRange heads = split_range(group, item.split, s.head_splits);
        const size_t first_head = static_cast<size_t>(item.b) * s.heads_q + item.hk * group;
        for (size_t h = first_head + heads.begin; h < first_head + heads.begin + heads.count; ++h) {
          const size_t at = head_tiles[h] + item.n;
          if (deterministic && tile_steps.steps[at] > 0) {
            int64_t& start = walk_start[h * tiles + item.n];
            if (item.part > 0) {  // the part before walked the same halves in the same order
              t = std::max(t, start + 1);
            } else {
              for (int32_t w = tile_steps.wait_begin[at]; w < tile_steps.wait_begin[at + 1]; ++w) {
                const TileSteps::Wait& wait = tile_steps.waits[static_cast<size_t>(w)];
                t = std::max(t,
                             walk_start[h * tiles + static_cast<size_t>(wait.tile)] + wait.offset);
              }
            }
            start = t;
          }
          t += tile_steps.steps[at];
        }
        free_at.push(t);
        end = std::max(end, t);
        if (end + rest >= stop_at) return end + rest;  // the estimate only grows
      }
    }
  }
  return end + rest;
}

// The main kernel's CTAs without head splits: one per key tile part of each kv slice.
inline int64_t bwd_key_tile_items(const BwdShape& s, int parts) {
  return int64_t{s.batch} * s.heads_kv * s.num_k_tiles * parts;
}

// Whether the mode has a single dispatch order to take: deterministic mode's own, or two kv
// slices at most, which the paired order already interleaves.
inline bool bwd_one_order(const BwdShape& s, bool deterministic) {
  return deterministic || s.batch * s.heads_kv <= kPairedInstances;
}

// Whether `ctas` CTAs make at most 2 x kBwdSplitWaves waves on `sms` SMs: the counts a replay
// tries.
inline bool within_split_waves(int64_t ctas, int sms) {
  return ctas <= 2 * kBwdSplitWaves * int64_t{sms};
}

// Whether auto_bwd_schedule replays the dispatch for these sizes, mode and head_splits (0:
// automatic): unless there is one count and one order to take, the key tiles' CTAs alone make
// kBwdSplitWaves waves (where the paired order keeps the dQ rows in L2, as at 32K), or the
// given count's CTAs make more than 2 x kBwdSplitWaves.
inline bool bwd_schedule_replays(const BwdShape& s, bool deterministic, int parts, int sms,
                                 int head_splits) {
  const int64_t items = bwd_key_tile_items(s, parts);
  const bool one_count = head_splits != 0 || s.heads_q == s.heads_kv;
  return !(one_count && bwd_one_order(s, deterministic)) && items < kBwdSplitWaves * int64_t{sms} &&
         within_split_waves(items * std::max(head_splits, 1), sms);
}

// The schedule backward() runs for BackwardArgs::head_splits = `head_splits`: of the counts 1 to
// the kv group's size (or `head_splits` alone when it is not 0), and in the default mode of the
// paired and the interleaved order, the one with the least estimated_bwd_steps; a later
// candidate (more parts, or the interleaved order of as many) only when faster by more than
// 1 / kBwdSplitGain. Counts are tried while their CTAs make at most 2 x kBwdSplitWaves waves.
// Without a replay (bwd_schedule_replays), the first count (1 for automatic) in the paired order,
// and the descriptor is not read. Preconditions: as estimated_bwd_steps', and head_splits in
// [0, group].
inline BwdSchedule auto_bwd_schedule(BwdMainParams p, bool deterministic, int parts, int sms,
                                     int head_splits) {
  const int first = head_splits == 0 ? 1 : head_splits;
  const int last = head_splits == 0 ? p.shape.heads_q / p.shape.heads_kv : head_splits;
  BwdSchedule best{first, false};
  if (!bwd_schedule_replays(p.shape, deterministic, parts, sms, head_splits)) return best;
  const bool one_order = bwd_one_order(p.shape, deterministic);
  const int64_t items = bwd_key_tile_items(p.shape, parts);
  const TileSteps tile_steps(p.descriptor);
  int64_t best_steps = -1;
  for (int splits = first; splits <= last && within_split_waves(items * splits, sms); ++splits) {
    for (const bool interleave : {false, true}) {
      // Deterministic mode has its own order, and two slices interleave as a pair.
      if (interleave && one_order) continue;
      p.shape.head_splits = splits;
      p.shape.slice_group = slice_group(p.shape, deterministic, {splits, interleave});
      // To win, a candidate's steps x kBwdSplitGain must be below best x (kBwdSplitGain - 1).
      const int64_t to_beat =
          best_steps < 0 ? std::numeric_limits<int64_t>::max()
                         : (best_steps * (kBwdSplitGain - 1) + kBwdSplitGain - 1) / kBwdSplitGain;
      const int64_t steps = estimated_bwd_steps(p, deterministic, parts, sms, tile_steps, to_beat);
      if (steps < to_beat) {
        best = {splits, interleave};
        best_steps = steps;
      }
    }
  }
  return best;
}

}  // namespace cm::sm90
