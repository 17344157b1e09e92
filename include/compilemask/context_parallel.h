// Context parallelism on the host: which query positions a rank holds when a sequence's queries
// are sharded over ranks that attend to all keys (torch's context_parallel, all-gather CP), for
// Mask::specialize's `query_positions`.
//
//   std::vector<int32_t> rows = cm::context_parallel_positions({.n = 32768, .world_size = 8,
//                                                               .rank = 3});
//   cm::Plan rank_plan = mask.specialize(params, {32768, 32768}, {}, rows);
#pragma once

#include <cstdint>
#include <vector>

namespace cm {

// Rank `rank` of `world_size` ranks sharing an n-token sequence. Balanced shards take chunks
// rank and 2 world_size - 1 - rank of 2 world_size equal chunks (the head-tail order that
// evens out causal masks' work across ranks); contiguous ones take the rank-th of world_size
// equal chunks.
struct ContextParallelShard {
  int64_t n = 0;
  int64_t world_size = 1;
  int64_t rank = 0;
  bool balanced = true;
};

// The shard's query positions, ascending. Throws cm::Error naming the rule for world_size < 1,
// a rank outside [0, world_size), or an n that is not a positive multiple of the chunk count
// (2 world_size balanced, world_size contiguous) or is 2^31 or more (positions are 32-bit).
std::vector<int32_t> context_parallel_positions(const ContextParallelShard& shard);

}  // namespace cm
