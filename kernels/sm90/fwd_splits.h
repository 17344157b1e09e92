// Split keys in the forward (ForwardArgs::num_splits). When a launch has fewer work items than
// the GPU has SMs (decoding, a short chunk of queries against a long cache), each query tile's
// listed key tiles are cut into `splits` consecutive parts, one work item per part. Each part
// writes its O (normalised, float32) and LSE to the workspace, and the combine kernel
// (fwd_combine.cu) merges the parts by their LSEs into O and the LSE. Host and device code: the
// automatic split count and the workspace's layout (the parts: work_splits.h).
#pragma once

#include "work_splits.h"

#include <compilemask/cuda_limits.h>

#include <stddef.h>
#include <stdint.h>

namespace cm::sm90 {

inline constexpr int kMaxSplits = cuda::kMaxSplits;

// A part keeps at least this many key tiles under the automatic choice.
inline constexpr int kMinTilesPerSplit = 2;

// What a work item costs beyond its key tiles, in tiles' time (docs/perf-notes.md, session 18:
// about 1.4), as a fraction: the automatic count weighs longer parts against more items.
inline constexpr int kItemCostTenths = 14;

// Listed key tiles of a query tile, in the order KeyTileCursor walks them (split_range's parts).
// kAllTiles as a count: to the row's end.
inline constexpr int kAllTiles = 0x7fffffff;

// The split count of ForwardArgs::num_splits = 0 for `items` work items (query tiles of every
// (b, h)) on `sms` SMs, when the longest row lists `longest_row` key tiles. 1 when the items
// fill the SMs; else the count s, each part kMinTilesPerSplit tiles or more, that minimises the
// estimated time: waves(s) = ceil(items * s / sms) rounds of the longest part,
// ceil(longest_row / s) tiles plus an item's own cost; the fewest parts among equals. (Session
// 34's rule, the fewest parts within 10% of the best wave efficiency, took 15 parts of 17-18
// tiles for one 32K-key decoding row of 8 KV heads, where 16 parts of 16 tiles fill more SMs.)
inline int auto_num_splits(int64_t items, int sms, int longest_row) {
  if (items <= 0 || items >= sms) return 1;
  int most = longest_row / kMinTilesPerSplit;
  if (most > kMaxSplits) most = kMaxSplits;
  if (most < 2) return 1;
  // In tenths of a tile's time.
  auto estimate = [&](int s) {
    const int64_t waves = (items * s + sms - 1) / sms;
    const int64_t part = (longest_row + s - 1) / s;
    return waves * (10 * part + kItemCostTenths);
  };
  int best = 1;
  for (int s = 2; s <= most; ++s) {
    if (estimate(s) < estimate(best)) best = s;
  }
  return best;
}

// The forward's workspace: the work-item counter, then, when the items' outputs go through
// fwd_combine (FwdParams::combine), each of the `parts` key parts' LSE as float32 [parts][batch]
// [heads_q][nq] and O as float32 [parts][batch][heads_q][nq][head_dim_v]; parts is 0 otherwise.
// `rows` is batch * heads_q * nq.
struct FwdWorkspace {
  size_t lse_offset, out_offset, total;
};

inline FwdWorkspace fwd_workspace(int parts, int64_t rows, int head_dim_v) {
  constexpr size_t kAlign = 256;
  auto aligned = [](size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  const size_t counter = kAlign;
  if (parts == 0) return {counter, counter, counter};
  const size_t cells = static_cast<size_t>(parts) * static_cast<size_t>(rows);
  const size_t lse_bytes = aligned(cells * sizeof(float));
  return {counter, counter + lse_bytes,
          counter + lse_bytes + cells * static_cast<size_t>(head_dim_v) * sizeof(float)};
}

}  // namespace cm::sm90
