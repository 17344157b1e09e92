// Tile axes: restarts at the boundaries of block-diagonal masks (descriptor/tile_axes.h).
#include "descriptor/tile_axes.h"
#include "descriptor/build.h"
#include "mask_fixtures.h"

#include <compilemask/descriptor.h>

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

namespace cm {
namespace {

using descriptor::choose_tile_axes;
using descriptor::kMinTilesBetweenRestarts;
using descriptor::TileAxes;
using descriptor::TileAxis;
using testing::Dense;

// Causal attention inside consecutive blocks of the given lengths (packed documents).
Dense block_causal(const std::vector<int32_t>& lengths) {
  int32_t n = 0;
  for (int32_t length : lengths) n += length;
  Dense d(n, n);
  int32_t start = 0;
  for (int32_t length : lengths) {
    for (int32_t q = start; q < start + length; ++q) {
      for (int32_t k = start; k <= q; ++k) d.at(q, k) = 1;
    }
    start += length;
  }
  return d;
}

InstanceRows instance_of(const Dense& d) {
  InstanceRows rows;
  rows.all = testing::rows_from_dense(d);
  return rows;
}

std::vector<int32_t> random_lengths(std::mt19937& rng, int count, int32_t lo, int32_t hi) {
  std::vector<int32_t> lengths;
  for (int i = 0; i < count; ++i) {
    lengths.push_back(std::uniform_int_distribution<int32_t>(lo, hi)(rng));
  }
  return lengths;
}

// Whether c splits d into blocks: no visible pair has exactly one of q < c, k < c.
bool is_block_boundary(const Dense& d, int32_t c) {
  for (int32_t q = 0; q < d.nq; ++q) {
    for (int32_t k = 0; k < d.nk; ++k) {
      if (d.at(q, k) && (q < c) != (k < c)) return false;
    }
  }
  return true;
}

// Every tile holds 1 to `size` tokens and the tiles cover [0, length) in order.
void expect_well_formed(const TileAxis& axis, int32_t length, int32_t size) {
  ASSERT_EQ(axis.start(0), 0);
  ASSERT_EQ(axis.end(axis.count() - 1), length);
  for (int32_t t = 0; t < axis.count(); ++t) {
    EXPECT_GE(axis.end(t) - axis.start(t), 1);
    EXPECT_LE(axis.end(t) - axis.start(t), size);
  }
}

TEST(TileAxes, TileOfFindsTheTileHoldingEachToken) {
  std::mt19937 rng(11);
  for (int iteration = 0; iteration < 50; ++iteration) {
    const int32_t size = 16 * std::uniform_int_distribution<int32_t>(1, 8)(rng);
    std::vector<int32_t> starts{0};
    const int tiles = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int t = 0; t < tiles; ++t) {
      // Full tiles mostly, short ones (restarts) now and then.
      const bool short_tile = std::uniform_int_distribution<int>(0, 3)(rng) == 0;
      starts.push_back(starts.back() +
                       (short_tile ? std::uniform_int_distribution<int32_t>(1, size)(rng) : size));
    }
    const TileAxis axis(starts, size);
    ASSERT_EQ(axis.count(), tiles);
    for (int32_t t = 0; t < tiles; ++t) {
      for (int32_t k = starts[static_cast<size_t>(t)]; k < starts[static_cast<size_t>(t) + 1];
           ++k) {
        ASSERT_EQ(axis.tile_of(k), t) << "token " << k << " iteration " << iteration;
      }
    }
  }
}

TEST(TileAxes, UniformTilesWhereNoBlockBoundaryIsWorthARestart) {
  const Tiling tiling{128, 128};
  // Causal: no boundary. Boundaries within kMinTilesBetweenRestarts tiles of the start: no
  // restart. Blocks on tile boundaries: nothing to restart.
  for (const Dense& d :
       {block_causal({1000}), block_causal({100, 100, 50}), block_causal({512, 256, 384})}) {
    const TileAxes axes = choose_tile_axes({instance_of(d)}, tiling);
    EXPECT_EQ(axes.q.starts(), TileAxis::uniform(d.nq, 128).starts());
    EXPECT_EQ(axes.k.starts(), TileAxis::uniform(d.nk, 128).starts());
  }
}

TEST(TileAxes, TilesRestartAtEveryLongBlockBoundary) {
  std::mt19937 rng(5);
  for (int iteration = 0; iteration < 40; ++iteration) {
    const Tiling tiling = iteration % 2 == 0 ? Tiling{64, 64} : Tiling{32, 48};
    const std::vector<int32_t> lengths =
        random_lengths(rng, std::uniform_int_distribution<int>(1, 6)(rng), 1, 400);
    const Dense d = block_causal(lengths);
    const TileAxes axes = choose_tile_axes({instance_of(d)}, tiling);
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    expect_well_formed(axes.q, d.nq, tiling.m);
    expect_well_formed(axes.k, d.nk, tiling.n);
    // Restarts: starts off the uniform grid of the previous restart. Each is a block boundary
    // on both axes, at least kMinTilesBetweenRestarts tiles after the previous one.
    const int32_t min_gap = kMinTilesBetweenRestarts * std::max(tiling.m, tiling.n);
    const std::set<int32_t> q_starts(axes.q.starts().begin(), axes.q.starts().end());
    const std::set<int32_t> k_starts(axes.k.starts().begin(), axes.k.starts().end());
    int32_t run = 0;
    for (int32_t c = 1; c < d.nq; ++c) {
      const bool aligned = (c - run) % tiling.m == 0 && (c - run) % tiling.n == 0;
      const bool restart = !aligned && q_starts.count(c) != 0 && k_starts.count(c) != 0;
      if (restart) {
        EXPECT_TRUE(is_block_boundary(d, c)) << "restart at " << c;
        EXPECT_GE(c - run, min_gap) << "restart at " << c;
        run = c;
      } else if (!aligned && c - run >= min_gap) {
        EXPECT_FALSE(is_block_boundary(d, c)) << "no restart at the boundary " << c;
      }
    }
  }
}

TEST(TileAxes, EveryInstanceMustSplitAtABoundary) {
  const Dense blocks = block_causal({300, 300, 300});
  const TileAxes alone = choose_tile_axes({instance_of(blocks)}, {64, 64});
  EXPECT_NE(alone.q.starts(), TileAxis::uniform(900, 64).starts()) << "restarts at 300 and 600";
  // A second instance that is plain causal has no boundary, so nothing restarts.
  const TileAxes both =
      choose_tile_axes({instance_of(blocks), instance_of(block_causal({900}))}, {64, 64});
  EXPECT_EQ(both.q.starts(), TileAxis::uniform(900, 64).starts());
  EXPECT_EQ(both.k.starts(), TileAxis::uniform(900, 64).starts());
}

// Packed documents of random lengths, each longer than kMinTilesBetweenRestarts tiles: the
// tiles restart at every document start, and compute fewer pairs than uniform tiles would.
TEST(TileAxes, PackedDocumentsComputeFewerPairs) {
  std::mt19937 rng(3);
  const std::vector<int32_t> lengths = random_lengths(rng, 8, 300, 700);
  const Dense d = block_causal(lengths);
  PlanStats stats;
  const std::vector<uint64_t> blob =
      build_descriptor({instance_of(d)}, {0}, 1, 1, Tiling{128, 128}, stats);
  const desc::Header& h = desc::header(blob.data());
  std::set<int32_t> starts;
  for (int32_t m = 0; m < h.num_q_tiles; ++m)
    starts.insert(desc::q_tile_span(blob.data(), m).begin);
  int32_t document = 0;
  for (int32_t length : lengths) {
    EXPECT_EQ(starts.count(document), 1u) << "the document at " << document;
    document += length;
  }
  int64_t uniform_computed = 0;  // pairs of the non-empty uniform 128 x 128 tiles
  for (int32_t q0 = 0; q0 < d.nq; q0 += 128) {
    for (int32_t k0 = 0; k0 < d.nk; k0 += 128) {
      const int32_t q1 = std::min(d.nq, q0 + 128), k1 = std::min(d.nk, k0 + 128);
      bool any = false;
      for (int32_t q = q0; q < q1; ++q) {
        for (int32_t k = k0; k < k1; ++k) any = any || d.at(q, k);
      }
      if (any) uniform_computed += int64_t{q1 - q0} * (k1 - k0);
    }
  }
  EXPECT_LT(stats.computed_pairs, uniform_computed);
}

}  // namespace
}  // namespace cm
