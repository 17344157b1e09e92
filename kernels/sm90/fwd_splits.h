// Split keys in the forward (ForwardArgs::num_splits). When a launch has fewer work items than
// the GPU has SMs (decoding, a short chunk of queries against a long cache), each query tile's
// listed key tiles are cut into `splits` consecutive parts, one work item per part. Each part
// writes its O (normalised, float32) and LSE to the workspace, and the combine kernel
// (fwd_combine.cu) merges the parts by their LSEs into O and the LSE. Host and device code: the
// parts' ranges, the automatic split count and the workspace's layout.
#pragma once

#include <compilemask/cuda_limits.h>
#include <compilemask/descriptor.h>

#include <stddef.h>
#include <stdint.h>

namespace cm::sm90 {

inline constexpr int kMaxSplits = cuda::kMaxSplits;

// A part keeps at least this many key tiles under the automatic choice: a work item costs
// about 1.4 tiles' time beyond its tiles (docs/perf-notes.md, session 18), so shorter parts
// would spend more on item boundaries than they gain in parallelism.
inline constexpr int kMinTilesPerSplit = 2;

// Listed key tiles [begin, begin + count) of a query tile, in the order KeyTileCursor walks them.
// kAllTiles as a count: to the row's end.
inline constexpr int kAllTiles = 0x7fffffff;
struct TileRange {
  int begin, count;
};

// Part `split` of `splits` of a row of `tiles` listed key tiles. The parts cover the row once, in
// order, and their sizes differ by at most one (some are empty when tiles < splits).
CM_HD TileRange split_range(int tiles, int split, int splits) {
  const int begin = static_cast<int>(int64_t{tiles} * split / splits);
  const int end = static_cast<int>(int64_t{tiles} * (split + 1) / splits);
  return {begin, end - begin};
}

// The split count of ForwardArgs::num_splits = 0 for `items` work items (query tiles of every
// (b, h)) on `sms` SMs, when the longest row lists `longest_row` key tiles. 1 when the items
// fill the SMs; else the fewest parts whose items fill the SMs' waves within 10% as well as the
// best count does, each part kMinTilesPerSplit tiles or more.
inline int auto_num_splits(int64_t items, int sms, int longest_row) {
  if (items <= 0 || items >= sms) return 1;
  int most = longest_row / kMinTilesPerSplit;
  if (most > kMaxSplits) most = kMaxSplits;
  if (most < 2) return 1;
  // Wave efficiency of s parts: busy SM-slots over the slots of the waves they take.
  auto efficiency = [&](int s) {
    const int64_t units = items * s;
    const int64_t waves = (units + sms - 1) / sms;
    return static_cast<double>(units) / static_cast<double>(waves * sms);
  };
  double best = 0.0;
  for (int s = 1; s <= most; ++s) best = efficiency(s) > best ? efficiency(s) : best;
  int s = 1;
  while (efficiency(s) < 0.9 * best) ++s;
  return s;
}

// The forward's workspace: the work-item counter, then, when the items' outputs go through
// fwd_combine (FwdParams::combine), each of the `parts` key parts' LSE as float32 [parts][batch]
// [heads_q][nq] and O as float32 [parts][batch][heads_q][nq][head_dim]; parts is 0 otherwise.
// `rows` is batch * heads_q * nq.
struct FwdWorkspace {
  size_t lse_offset, out_offset, total;
};

inline FwdWorkspace fwd_workspace(int parts, int64_t rows, int head_dim) {
  constexpr size_t kAlign = 256;
  auto aligned = [](size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  const size_t counter = kAlign;
  if (parts == 0) return {counter, counter, counter};
  const size_t cells = static_cast<size_t>(parts) * static_cast<size_t>(rows);
  const size_t lse_bytes = aligned(cells * sizeof(float));
  return {counter, counter + lse_bytes,
          counter + lse_bytes + cells * static_cast<size_t>(head_dim) * sizeof(float)};
}

}  // namespace cm::sm90
