// cm::context_parallel_positions: a rank's shard of the query rows (context_parallel.h).
#include <compilemask/compilemask.h>
#include <compilemask/context_parallel.h>

#include <numeric>
#include <string>

namespace cm {

std::vector<int32_t> context_parallel_positions(const ContextParallelShard& shard) {
  const int64_t world = shard.world_size;
  if (world < 1 || shard.rank < 0 || shard.rank >= world) {
    throw Error("context_parallel_positions: need world_size >= 1 and 0 <= rank < world_size, " +
                std::string("got world_size=") + std::to_string(world) +
                ", rank=" + std::to_string(shard.rank));
  }
  constexpr int64_t kMaxTokens = int64_t{1} << 31;
  const int64_t chunks = shard.balanced ? 2 * world : world;
  if (shard.n < 1 || shard.n % chunks != 0 || shard.n >= kMaxTokens) {
    throw Error("context_parallel_positions: n = " + std::to_string(shard.n) +
                " must be a positive multiple of " + std::to_string(chunks) +
                (shard.balanced ? " (2 * world_size)" : " (world_size)") + " below 2^31");
  }
  const int64_t size = shard.n / chunks;
  std::vector<int32_t> positions(static_cast<size_t>(shard.balanced ? 2 * size : size));
  auto chunk = [&](int64_t c, size_t at) {
    std::iota(positions.begin() + static_cast<ptrdiff_t>(at),
              positions.begin() + static_cast<ptrdiff_t>(at + static_cast<size_t>(size)),
              static_cast<int32_t>(c * size));
  };
  chunk(shard.rank, 0);
  if (shard.balanced) chunk(chunks - 1 - shard.rank, static_cast<size_t>(size));
  return positions;
}

}  // namespace cm
