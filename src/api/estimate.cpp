// Kernel time estimates from tile counts (see include/compilemask/estimate.h).
#include <compilemask/estimate.h>

#include <algorithm>

namespace cm {
namespace {

constexpr double kSms = 132;                    // H200: the persistent grids' width
constexpr double kFullTileSeconds = 1.62e-6;    // forward, one 128 x 128 tile on one SM
constexpr double kPartialTileSeconds = 2.0e-6;  // the same, masked
constexpr double kFullHalfSeconds = 2.8e-6;     // backward, one 64 x 128 half of a full tile
constexpr double kPartialHalfSeconds = 3.8e-6;  // the same, of a partial tile
constexpr double kGatherSecondsPerByte = 0.075e-3 / 134e6;
constexpr double kGathersPerPass = 4;
constexpr double kRowBytes = 128 * 2;  // one head's row at head dim 128 in bf16

// Seconds of the tiles over all masks, on all SMs; `reference` is the tile the rates are for.
double tile_seconds(const TileCounts& counts, const Tiling& tiling, int64_t masks, double full,
                    double partial, const Tiling& reference) {
  if (counts.instances <= 0) return 0;
  const double area =
      static_cast<double>(tiling.m) * tiling.n / (static_cast<double>(reference.m) * reference.n);
  const double per_instance = full * static_cast<double>(counts.full_tiles) +
                              partial * static_cast<double>(counts.partial_tiles);
  return per_instance * area * static_cast<double>(masks) / counts.instances / kSms;
}

}  // namespace

double estimated_forward_seconds(const TileCounts& counts, const Tiling& tiling, int64_t masks) {
  return tile_seconds(counts, tiling, masks, kFullTileSeconds, kPartialTileSeconds, {128, 128});
}

Tiling backward_halves(const Tiling& tiling) {
  return {std::max(16, tiling.m / 32 * 16), tiling.n};
}

double estimated_backward_seconds(const TileCounts& halves, const Tiling& halves_tiling,
                                  int64_t masks) {
  return tile_seconds(halves, halves_tiling, masks, kFullHalfSeconds, kPartialHalfSeconds,
                      {64, 128});
}

double estimated_gather_seconds(int64_t batch, int64_t rows, int64_t heads) {
  return kGathersPerPass * static_cast<double>(batch) * static_cast<double>(rows) *
         static_cast<double>(heads) * kRowBytes * kGatherSecondsPerByte;
}

}  // namespace cm
