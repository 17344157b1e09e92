// The work walks of both kernels (kernels/sm90/fwd_work.cuh and bwd_work.cuh), run on the
// host over descriptors of the bundled examples and of random masks, against dense masks made
// without the descriptor (the brute-force oracle of tests/support, mask_fixtures' random
// instances):
//   * forward: decode_item maps the work indices onto every (b, h, query tile, key part) once
//     (with packed heads, h the first of a group of heads): the instances (b, h) in pairs whose
//     two instances alternate, each one's query tiles in the descriptor's longest-first order,
//     a query tile's parts consecutive. KeyTileCursor
//     yields a part's key tiles in ascending order, with the pattern of their run (-1 for a
//     full run), and done() right after the last; a query tile's parts, joined in order, are its
//     listed key tiles once each, and their sizes differ by at most one. Every key tile holding
//     a visible pair is listed, every tile listed as full is fully visible, and tile_needs_mask
//     holds for exactly the partial tiles and the key tile that nk cuts.
//   * backward: StepCursor yields, for a key tile of a kv head and each head split in turn (1,
//     2, 3 and the group's size), each query head of the group, each query tile holding a
//     visible pair with that key tile (in the transposed form's run order, or descending in
//     deterministic mode), and every 64-row half of it with a visible pair, once each and head
//     by head, a split only its split_range of the heads; it skips the halves that a bands or
//     bitmap pattern marks empty. dq_rank counts, for each step, the lower key tiles whose
//     walks hold the same step: the dQ adds that deterministic mode orders before it.
//   * backward items: bwd_main_grid's CTAs decode (bwd_item_at) onto every (b, kv head, key
//     tile, part, head split) once, and with head splits their dkv_parts rows cover what the kv
//     postprocess reads, once (check_backward_items).
//   * packed layout: the items of a sequence outside its tensors walk nothing, and cover_rows
//     (packed_rows.h) classifies the rows that packed_rows.cu writes after each pass.
#include "bwd_work.cuh"
#include "fwd_work.cuh"
#include "kernel_cases.h"
#include "packed_rows.h"

#include <compilemask/descriptor.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace cm::sm90 {
namespace {

using kernel_test::KernelCase;
using kernel_test::kTile;
static_assert(kTile == kBwdTile && kTile == kMaskTileN, "both kernels walk 128 x 128 tiles");

enum class TileState { kEmpty, kPartial, kFull };

// The state of each tile of mask (b, h) of a case.
class DenseTiles {
 public:
  DenseTiles(const KernelCase& c, int32_t b, int32_t h) : c_(c), b_(b), h_(h) {}

  TileState state(int32_t m, int32_t n) const {
    const desc::TileSpan rows = desc::q_tile_span(c_.descriptor(), m);
    return rows_state(rows.begin, rows.end, n);
  }
  // The state of the 64 rows of half `half` of query tile m against key tile n.
  TileState half_state(int32_t m, int32_t half, int32_t n) const {
    const desc::TileSpan rows = desc::q_tile_span(c_.descriptor(), m);
    const int32_t q0 = rows.begin + half * kBwdStepRows;
    return rows_state(q0, std::min(rows.end, q0 + kBwdStepRows), n);
  }

 private:
  // Rows [q0, q1) against the columns of key tile n (descriptor.h: k_tile_span).
  TileState rows_state(int32_t q0, int32_t q1, int32_t n) const {
    int64_t visible = 0, area = 0;
    const desc::TileSpan keys = desc::k_tile_span(c_.descriptor(), n);
    for (int32_t q = q0; q < q1; ++q) {
      for (int32_t k = keys.begin; k < keys.end; ++k) {
        visible += c_.visible(b_, h_, q, k);
        ++area;
      }
    }
    return visible == 0 ? TileState::kEmpty
                        : (visible == area ? TileState::kFull : TileState::kPartial);
  }

  const KernelCase& c_;
  int32_t b_, h_;
};

// The case's problem with its own heads on heads_kv kv heads.
ProblemShape shape_of(const KernelCase& c, int32_t heads_kv) {
  return kernel_test::problem_shape_of(c.descriptor(), c.batch, c.heads, heads_kv);
}

// The tiles a TileRow lists, (tile, pattern; -1 for full), in run order: the partial runs'
// tiles, then the full runs', each run's ascending.
std::vector<std::pair<int, int>> run_tiles(const void* blob, const desc::TileRow& row) {
  std::vector<std::pair<int, int>> tiles;
  const desc::PartialRun* partial = desc::partial_runs(blob, row);
  for (int i = 0; i < row.partial_count; ++i) {
    for (int t = partial[i].first; t < partial[i].first + partial[i].count; ++t) {
      tiles.push_back({t, static_cast<int>(partial[i].pattern)});
    }
  }
  const desc::FullRun* full = desc::full_runs(blob, row);
  for (int i = 0; i < row.full_count; ++i) {
    for (int t = full[i].first; t < full[i].first + full[i].count; ++t) tiles.push_back({t, -1});
  }
  return tiles;
}

// The listed key tiles of a query tile, (n, pattern) by ascending n, taken from the runs.
std::vector<std::pair<int, int>> listed_key_tiles(const void* blob, const desc::TileRow& row) {
  std::vector<std::pair<int, int>> tiles = run_tiles(blob, row);
  std::sort(tiles.begin(), tiles.end());
  return tiles;
}

// The forward's walk with its key tiles in `splits` parts (1: whole) and heads_per_item query
// heads per item (packed heads; 1: one).
void check_forward_walk(const KernelCase& c, int splits, int heads_per_item) {
  FwdParams p{};
  static_cast<ProblemShape&>(p) = shape_of(c, c.heads);
  p.descriptor = c.descriptor();
  p.num_splits = splits;
  p.heads_per_item = heads_per_item;
  p.rows_per_head = kTile / heads_per_item;
  p.total_items = p.num_q_tiles * c.batch * (c.heads / heads_per_item) * splits;
  std::set<std::tuple<int, int, int, int>> seen;                                // (b, h, m, split)
  std::map<std::tuple<int, int, int>, std::vector<std::pair<int, int>>> walks;  // parts joined
  std::map<std::tuple<int, int, int>, std::vector<size_t>> part_sizes;
  std::map<int, float> previous_cost;  // per instance (b * heads + h) / heads_per_item
  int previous_instance = -1;
  for (int index = 0; index < p.total_items; ++index) {
    const WorkItem item = decode_item(p, index);
    SCOPED_TRACE(c.name + " in " + std::to_string(splits) + " parts, " +
                 std::to_string(heads_per_item) + " heads per item, work item " +
                 std::to_string(index));
    ASSERT_TRUE(seen.insert({item.b, item.h, item.m, item.split}).second) << "decoded twice";
    ASSERT_EQ(item.h % heads_per_item, 0) << "an item starts a group of heads";
    ASSERT_EQ(item.split, index % splits) << "a query tile's parts are consecutive items";
    const int unit = index / splits;  // the query tile's place in the paired order
    const int instance = (item.b * c.heads + item.h) / heads_per_item;
    const int pair = unit / (2 * p.num_q_tiles);
    ASSERT_EQ(pair, instance / 2) << "instances are taken in pairs";
    const int instances = c.batch * c.heads / heads_per_item;
    if (item.split == 0 && unit % (2 * p.num_q_tiles) != 0 && 2 * pair + 1 < instances) {
      EXPECT_NE(instance, previous_instance) << "a pair's instances alternate";
    }
    previous_instance = instance;
    const desc::Instance& inst = desc::mask_of(c.descriptor(), item.b, item.h);
    ASSERT_EQ(item.row, &desc::q_tile(c.descriptor(), inst, item.m));
    const desc::TileSpan rows = desc::q_tile_span(c.descriptor(), item.m);
    ASSERT_EQ(item.q0, rows.begin);
    ASSERT_EQ(item.rows, rows.size());
    ASSERT_EQ(item.q_row0, rows.begin);
    if (item.split == 0 && previous_cost.count(instance) != 0) {
      EXPECT_LE(item.row->cost, previous_cost[instance]) << "not longest-first";
    }
    previous_cost[instance] = item.row->cost;

    const std::vector<std::pair<int, int>> listed = listed_key_tiles(c.descriptor(), *item.row);
    ASSERT_EQ(desc::listed_tiles(c.descriptor(), *item.row), static_cast<int>(listed.size()));
    KeyTileCursor cursor(c.descriptor(), item);
    std::vector<std::pair<int, int>> part;
    std::vector<bool> done;
    int n, pattern;
    while (cursor.next(n, pattern)) {
      part.push_back({n, pattern});
      done.push_back(cursor.done());
      // Unmasked means all 128 K rows loaded are the tile's and all of them are visible.
      if (!tile_needs_mask(pattern, desc::k_tile_span(c.descriptor(), n).size())) {
        EXPECT_EQ(desc::k_tile_span(c.descriptor(), n).size(), kTile) << "key tile " << n;
        EXPECT_LT(pattern, 0) << "key tile " << n;
      }
    }
    ASSERT_EQ(item.has_key_tiles, !part.empty());
    for (size_t i = 0; i < done.size(); ++i) {
      ASSERT_EQ(done[i], i + 1 == done.size()) << "done() at the part's tile " << i;
    }
    const auto tile = std::make_tuple(item.b, item.h, item.m);
    walks[tile].insert(walks[tile].end(), part.begin(), part.end());
    part_sizes[tile].push_back(part.size());
  }
  EXPECT_EQ(static_cast<int>(seen.size()), p.total_items);

  for (const auto& [tile, walked] : walks) {
    const auto [b, h, m] = tile;
    SCOPED_TRACE(c.name + " in " + std::to_string(splits) + " parts, (b, h, m) = (" +
                 std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(m) + ")");
    const desc::Instance& inst = desc::mask_of(c.descriptor(), b, h);
    ASSERT_EQ(walked, listed_key_tiles(c.descriptor(), desc::q_tile(c.descriptor(), inst, m)))
        << "the parts, joined in order, are not the listed tiles";
    const auto [fewest, most] =
        std::minmax_element(part_sizes[tile].begin(), part_sizes[tile].end());
    EXPECT_LE(*most - *fewest, 1u) << "the parts are not balanced";
    const DenseTiles tiles(c, b, h);
    for (const auto& [n, pattern] : walked) {
      if (pattern < 0) EXPECT_EQ(tiles.state(m, n), TileState::kFull) << "key tile " << n;
    }
    for (int k = 0; k < p.num_k_tiles; ++k) {
      if (tiles.state(m, k) == TileState::kEmpty) continue;
      EXPECT_TRUE(std::any_of(walked.begin(), walked.end(),
                              [&](const std::pair<int, int>& t) { return t.first == k; }))
          << "key tile " << k << " holds visible pairs but is not walked";
    }
  }
}

// The query tiles of a key tile's row in the transposed form in the order each mode walks them:
// run order (the default mode), or descending (deterministic mode).
std::vector<int> walk_order(const void* blob, const desc::TileRow& row, bool descending) {
  std::vector<int> tiles;
  for (const auto& [m, pattern] : run_tiles(blob, row)) tiles.push_back(m);
  if (descending) std::sort(tiles.rbegin(), tiles.rend());
  return tiles;
}

// StepCursor<kDescending>: the walk of deterministic mode (true) or the default mode's.
template <bool kDescending>
void check_backward_walk(const KernelCase& c, int32_t heads_kv, int head_splits) {
  BwdMainParams p{};
  static_cast<ProblemShape&>(p.shape) = shape_of(c, heads_kv);
  p.shape.rows_padded = p.shape.num_q_tiles * kTile;
  p.shape.head_splits = head_splits;
  p.descriptor = c.descriptor();
  const int group = c.heads / heads_kv;
  for (int b = 0; b < c.batch; ++b) {
    for (int hk = 0; hk < heads_kv; ++hk) {
      for (int n = 0; n < p.shape.num_k_tiles; ++n) {
        SCOPED_TRACE(c.name + " kv heads " + std::to_string(heads_kv) + " head splits " +
                     std::to_string(head_splits) + " (b, hk, n) = (" + std::to_string(b) + ", " +
                     std::to_string(hk) + ", " + std::to_string(n) + ")" +
                     (kDescending ? " descending" : ""));
        std::vector<std::tuple<int, int, int>> walked;  // (h, m, half), the splits in order
        for (int split = 0; split < head_splits; ++split) {
          const TileRange heads = split_range(group, split, head_splits);
          StepCursor<kDescending> steps(p, BwdItem{b, hk, n, 0, split, 0}, head_splits);
          BwdStep step;
          while (steps.next(step)) {
            walked.push_back({step.h, step.m, step.half});
            EXPECT_GE(step.h, hk * group + heads.begin) << "a head of another split";
            EXPECT_LT(step.h, hk * group + heads.begin + heads.count) << "a head of another split";
            if (step.half == 1) {
              EXPECT_GT(desc::q_tile_span(c.descriptor(), step.m).size(), kBwdStepRows)
                  << "a second half past the tile's end";
            }
            const desc::Instance& inst = desc::mask_of(c.descriptor(), b, step.h);
            const std::vector<std::pair<int, int>> listed =
                listed_key_tiles(c.descriptor(), desc::q_tile(c.descriptor(), inst, step.m));
            const auto it =
                std::find_if(listed.begin(), listed.end(),
                             [&](const std::pair<int, int>& t) { return t.first == n; });
            ASSERT_NE(it, listed.end()) << "step on query tile " << step.m << " not listed";
            EXPECT_EQ(step.pattern, it->second) << "query tile " << step.m;
            // A step walked as full (pattern -1) is masked at most at nk in the consumers: its
            // tile must be fully visible below nk.
            const DenseTiles tiles(c, b, step.h);
            if (step.pattern < 0) {
              EXPECT_EQ(tiles.state(step.m, n), TileState::kFull)
                  << "query tile " << step.m << " walked as full";
            } else if (!desc::is_grid_kind(
                           desc::pattern(c.descriptor(), static_cast<uint32_t>(step.pattern))
                               .kind)) {
              EXPECT_NE(tiles.half_state(step.m, step.half, n), TileState::kEmpty)
                  << "an empty half of query tile " << step.m << " walked";
            }
            int lower = 0;  // lower key tiles of the kv head whose walks hold this step
            for (int n_lower = 0; n_lower < n; ++n_lower) {
              StepCursor<kDescending> others(p, BwdItem{b, hk, n_lower, 0, split, 0}, head_splits);
              BwdStep other;
              while (others.next(other)) {
                lower += other.h == step.h && other.m == step.m && other.half == step.half;
              }
            }
            EXPECT_EQ(dq_rank(p, BwdItem{b, hk, n, 0, split, 0}, step.h, step.m, step.half), lower)
                << "query tile " << step.m << " half " << step.half;
          }
        }
        // Every half of a query tile with visible pairs must be walked, once. Other steps
        // (empty members of sparse runs, empty halves of partial tiles) add nothing, as the
        // backward masks them. Within a head the query tiles come in the mode's walk_order (less
        // those with no half walked), each one's halves lowest first.
        std::map<int, std::set<std::pair<int, int>>> got;
        std::map<int, std::vector<int>> tile_order;  // per head, the query tiles as walked
        std::vector<int> head_order;
        for (size_t i = 0; i < walked.size(); ++i) {
          const auto [h, m, half] = walked[i];
          if (head_order.empty() || head_order.back() != h) head_order.push_back(h);
          ASSERT_TRUE(got[h].insert({m, half}).second) << "step walked twice";
          if (i > 0 && std::get<0>(walked[i - 1]) == h && std::get<1>(walked[i - 1]) == m) {
            EXPECT_LT(std::get<2>(walked[i - 1]), half) << "query tile " << m << "'s halves";
          } else {
            tile_order[h].push_back(m);
          }
        }
        for (const auto& [h, tiles] : tile_order) {
          const desc::Instance& inst = desc::mask_of(c.descriptor(), b, h);
          std::vector<int> expected;
          for (const int m :
               walk_order(c.descriptor(), desc::k_tile(c.descriptor(), inst, n), kDescending)) {
            if (std::find(tiles.begin(), tiles.end(), m) != tiles.end()) expected.push_back(m);
          }
          EXPECT_EQ(tiles, expected) << "head " << h << "'s query tiles out of order";
        }
        for (int g = 0; g < group; ++g) {
          const int h = hk * group + g;
          const DenseTiles tiles(c, b, h);
          for (int m = 0; m < p.shape.num_q_tiles; ++m) {
            for (int half = 0; half < 2; ++half) {
              if (tiles.half_state(m, half, n) == TileState::kEmpty) continue;
              EXPECT_TRUE(got[h].count({m, half}))
                  << "head " << h << " query tile " << m << " half " << half;
            }
          }
        }
        for (size_t i = 1; i < head_order.size(); ++i) {
          EXPECT_LT(head_order[i - 1], head_order[i]) << "heads not walked one after another";
        }
      }
    }
  }
}

// The backward main kernel's grid (bwd_main_grid, bwd_item_at) in both modes and both orders
// (paired, interleaved), with one or two items per key tile: every (b, kv head, key tile,
// part, head split) is one CTA's item, each kv slice's ranks (the dq_accum zeroing's chunks) are
// 0 to its items - 1, and in deterministic mode each (b, kv head, head split) dispatches its key
// tiles' parts in ascending order, which its ordered dQ adds wait on (dq_rank). With
// head splits, the rows of dkv_parts that the items write (dkv_part_row, bwd_consumer.cuh) hold
// every row that bwd_kv_postprocess reads (each split's key rows inside their tiles), once.
void check_backward_items(const KernelCase& c, int32_t heads_kv, int head_splits) {
  BwdMainParams p{};
  static_cast<ProblemShape&>(p.shape) = shape_of(c, heads_kv);
  p.shape.rows_padded = p.shape.num_q_tiles * kTile;
  p.shape.k_rows_padded = p.shape.num_k_tiles * kTile;
  p.shape.head_splits = head_splits;
  p.descriptor = c.descriptor();
  const int slices = c.batch * heads_kv;
  for (const int order : {0, 1, 2, 3}) {  // paired, interleaved; default, deterministic
    const bool deterministic = order >= 2;
    p.shape.slice_group = order % 2 == 0 ? kPairedInstances : slices;
    for (const int parts : {1, 2}) {
      SCOPED_TRACE(c.name + " kv heads " + std::to_string(heads_kv) + " head splits " +
                   std::to_string(head_splits) + " parts " + std::to_string(parts) +
                   (order % 2 == 0 ? " paired" : " interleaved") +
                   (deterministic ? " deterministic" : ""));
      const dim3 grid = bwd_main_grid(p.shape, parts);
      std::set<std::tuple<int, int, int, int, int>> items;
      std::map<std::tuple<int, int, int>, int> last_part;  // deterministic: by (b, hk, split)
      std::map<int, std::set<int>> ranks;                  // by kv slice
      std::map<int64_t, int> written;                      // dkv_parts rows
      const int keys = kTile / parts;
      for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
          for (unsigned x = 0; x < grid.x; ++x) {
            const BwdItem it =
                bwd_item_at(p, deterministic, parts, head_splits, dim3(x, y, z), grid);
            ASSERT_TRUE(it.b >= 0 && it.b < c.batch && it.hk >= 0 && it.hk < heads_kv);
            ASSERT_TRUE(it.n >= 0 && it.n < p.shape.num_k_tiles && it.part >= 0 &&
                        it.part < parts && it.split >= 0 && it.split < head_splits);
            EXPECT_TRUE(items.insert({it.b, it.hk, it.n, it.part, it.split}).second)
                << "item (" << it.b << ", " << it.hk << ", " << it.n << ", " << it.part << ", "
                << it.split << ") twice";
            ranks[kv_slice(p.shape, it.b, it.hk)].insert(it.rank);
            if (deterministic) {
              const auto [at, first] =
                  last_part.insert({{it.b, it.hk, it.split}, it.n * parts + it.part});
              EXPECT_TRUE(first || at->second < it.n * parts + it.part)
                  << "key tile " << it.n << " part " << it.part << " after a higher one";
              at->second = it.n * parts + it.part;
            }
            for (int key = 0; key < keys; ++key) {
              ++written[dkv_part_row<1>(p.shape, it.split, kv_slice(p.shape, it.b, it.hk),
                                        it.n * kTile + it.part * keys + key)];
            }
          }
        }
      }
      EXPECT_EQ(items.size(), size_t(slices) * p.shape.num_k_tiles * parts * head_splits);
      for (const auto& [slice, got] : ranks) {
        EXPECT_EQ(got.size(), size_t(bwd_slice_items(p.shape, parts, head_splits)))
            << "slice " << slice;
        EXPECT_EQ(*got.rbegin(), bwd_slice_items(p.shape, parts, head_splits) - 1)
            << "slice " << slice;
      }
      for (int split = 0; split < head_splits; ++split) {
        for (int slice = 0; slice < slices; ++slice) {
          for (int n = 0; n < p.shape.num_k_tiles; ++n) {
            for (int r = 0; r < desc::k_tile_span(c.descriptor(), n).size(); ++r) {
              const int64_t row = dkv_part_row<1>(p.shape, split, slice, n * kTile + r);
              EXPECT_EQ(written.count(row) ? written.at(row) : 0, 1)
                  << "split " << split << " slice " << slice << " key tile " << n << " row " << r;
            }
          }
        }
      }
    }
  }
}

// Both walks of one case, the backward's for every kv grouping of its query heads.
void check_walks(const KernelCase& c) {
  for (const int splits : {1, 2, 3, 7}) check_forward_walk(c, splits, 1);
  if (c.heads % 2 == 0) check_forward_walk(c, 2, 2);
  for (int32_t heads_kv = 1; heads_kv <= c.heads; ++heads_kv) {
    if (c.heads % heads_kv != 0) continue;
    const int group = c.heads / heads_kv;
    for (const int splits : std::set<int>{1, std::min(2, group), std::min(3, group), group}) {
      check_backward_walk<false>(c, heads_kv, splits);
      check_backward_walk<true>(c, heads_kv, splits);
      check_backward_items(c, heads_kv, splits);
    }
  }
}

// grouped_unit (problem_shape.h), which orders both kernels' work: a bijection of the indices
// onto (instance, rank) that takes instances in groups (pairs, three, all of them), visits the
// group's instances in turn, and each instance's units in rank order; a short last group holds
// the instances left.
TEST(KernelWalks, GroupedOrder) {
  for (const int instances : {1, 2, 3, 4, 7}) {
    for (const int units : {1, 2, 5}) {
      for (const int group : {1, kPairedInstances, 3, instances}) {
        SCOPED_TRACE(std::to_string(instances) + " instances x " + std::to_string(units) +
                     " in groups of " + std::to_string(group));
        std::vector<int> next_rank(instances, 0);
        int previous = -1;
        for (int index = 0; index < instances * units; ++index) {
          const GroupedUnit u = grouped_unit(index, units, instances, group);
          ASSERT_GE(u.instance, 0);
          ASSERT_LT(u.instance, instances);
          const int first = index / (group * units) * group;
          EXPECT_EQ(u.instance / group * group, first) << "index " << index;
          EXPECT_EQ(u.rank, next_rank[u.instance]++) << "index " << index;
          if (index % (group * units) != 0) {  // the next instance of the group, in turn
            const int width = std::min(group, instances - first);
            EXPECT_EQ(u.instance, previous + 1 == first + width ? first : previous + 1)
                << "index " << index;
          }
          previous = u.instance;
        }
        for (int i = 0; i < instances; ++i) EXPECT_EQ(next_rank[i], units) << "instance " << i;
      }
    }
  }
}

// query_tile and key_tile (problem_shape.h) give the descriptor's spans from its tables and,
// without them, the uniform spans, which the launch picks only when the tables hold them.
void check_tile_spans(const KernelCase& c) {
  SCOPED_TRACE(c.name);
  ProblemShape tables = shape_of(c, c.heads), computed = tables;
  computed.q_starts = computed.k_starts = nullptr;
  const desc::Header& h = desc::header(c.descriptor());
  bool uniform = true;    // the computed spans are the descriptor's
  bool restarts = false;  // some tile starts off a multiple of 128
  const auto check_axis = [&](int count, auto descriptor_span, auto kernel_span) {
    for (int t = 0; t < count; ++t) {
      const desc::TileSpan want = descriptor_span(t);
      EXPECT_EQ(kernel_span(tables, t).begin, want.begin) << "tile " << t;
      EXPECT_EQ(kernel_span(tables, t).end, want.end) << "tile " << t;
      uniform = uniform && kernel_span(computed, t).begin == want.begin &&
                kernel_span(computed, t).end == want.end;
      restarts = restarts || want.begin % kTile != 0;
    }
  };
  check_axis(
      h.num_q_tiles, [&](int m) { return desc::q_tile_span(c.descriptor(), m); },
      [](const ProblemShape& s, int m) { return query_tile(s, m); });
  check_axis(
      h.num_k_tiles, [&](int n) { return desc::k_tile_span(c.descriptor(), n); },
      [](const ProblemShape& s, int n) { return key_tile(s, n); });
  EXPECT_EQ(uniform, !restarts) << "the uniform spans hold exactly when no tile restarts";
}

// Packed offsets that put a sequence outside its tensors (sequence_fits, problem_shape.h): the
// sequence's forward items walk no key tile and hold no rows, so that the forward's consumers
// read and write none of them; the other sequences walk as before. (The backward skips such an item
// in bwd_kernel.cuh.) Sequence b of six, at its boundary: ending exactly at T (fits), one row past
// it, starting at -1, and the same three for the keys.
TEST(KernelWalks, PackedSequencesOutsideTheirTensors) {
  std::mt19937 rng(11);
  const KernelCase c = kernel_test::random_case(rng, 300, 260, false, "random");
  constexpr int kBatch = 6;
  const int64_t total_q = 1000, total_k = 900;
  const int32_t last_q = static_cast<int32_t>(total_q - c.nq);
  const int32_t last_k = static_cast<int32_t>(total_k - c.nk);
  const int32_t q_offsets[kBatch] = {last_q, last_q + 1, -1, 0, 0, 0};
  const int32_t k_offsets[kBatch] = {0, 0, 0, last_k, last_k + 1, -1};
  const bool fits[kBatch] = {true, false, false, true, false, false};
  FwdParams p{};
  static_cast<ProblemShape&>(p) = shape_of(c, 1);
  p.batch = kBatch;
  p.q_offsets = q_offsets;
  p.k_offsets = k_offsets;
  p.total_q = total_q;
  p.total_k = total_k;
  for (int b = 0; b < kBatch; ++b) EXPECT_EQ(sequence_fits(p, b), fits[b]) << "sequence " << b;
  p.total_q = 0;  // the strided layouts: no offsets, every sequence fits
  p.q_offsets = p.k_offsets = nullptr;
  for (int b = 0; b < kBatch; ++b) EXPECT_TRUE(sequence_fits(p, b)) << "strided, sequence " << b;
  p.q_offsets = q_offsets;
  p.k_offsets = k_offsets;
  p.total_q = total_q;

  p.descriptor = c.descriptor();
  p.heads_per_item = 1;
  p.rows_per_head = kTile;
  for (const int splits : {1, 3}) {
    p.num_splits = splits;
    p.total_items = p.num_q_tiles * kBatch * splits;
    std::vector<int> walked_items(kBatch, 0);
    for (int index = 0; index < p.total_items; ++index) {
      const WorkItem item = decode_item(p, index);
      SCOPED_TRACE(std::to_string(splits) + " parts, work item " + std::to_string(index));
      walked_items[item.b] += item.has_key_tiles;
      if (!fits[item.b]) {
        EXPECT_FALSE(item.has_key_tiles) << "sequence " << item.b;
        EXPECT_EQ(item.rows, 0) << "sequence " << item.b << ": the consumers write no row";
      }
    }
    for (int b = 0; b < kBatch; ++b) {
      if (fits[b]) EXPECT_GT(walked_items[b], 0) << "sequence " << b << " walks no key tile";
    }
  }
}

// The packed layout's rows that packed_rows.cu writes after a pass (packed_rows.h), classified
// by cover_rows: q rows [0, 40) with sequences of 10 rows at 0 (fits), 15 (fits), 20 (its keys
// start at -1: does not fit) and 35 (runs past 40). Two callers share the cover, each taking
// every other sequence, over rows [8, 38), as two threads of a block do.
TEST(KernelWalks, PackedRowsOutsideTheSequences) {
  constexpr int kBatch = 4;
  const int32_t q_offsets[kBatch] = {0, 15, 20, 35};
  const int32_t k_offsets[kBatch] = {0, 10, -1, 20};
  ProblemShape s{};
  s.batch = kBatch;
  s.nq = 10;
  s.nk = 10;
  s.q_offsets = q_offsets;
  s.k_offsets = k_offsets;
  s.total_q = 40;
  s.total_k = 100;
  constexpr int64_t kFirst = 8;
  constexpr int kCount = 30;
  uint32_t cover[kCoverRows] = {};
  cover_rows(s, false, kFirst, kCount, 0, 2, cover);
  cover_rows(s, false, kFirst, kCount, 1, 2, cover);
  // Row ranges [begin, end) and their cover bits, by hand from the offsets above.
  const struct {
    int64_t begin, end;
    uint32_t bits;
  } expected[] = {
      {8, 10, kCoverFit},    {10, 15, 0}, {15, 20, kCoverFit},  {20, 25, kCoverFit | kCoverUnfit},
      {25, 30, kCoverUnfit}, {30, 35, 0}, {35, 38, kCoverUnfit}};
  for (const auto& range : expected) {
    for (int64_t r = range.begin; r < range.end; ++r) {
      EXPECT_EQ(cover[r - kFirst], range.bits) << "row " << r;
    }
  }
  for (int r = kCount; r < kCoverRows; ++r) EXPECT_EQ(cover[r], 0u) << "past the block's rows";

  // What each cover gets: NaN wherever a sequence that does not fit lies, the caller's word on
  // the rows of no sequence only when asked, nothing on the rows of sequences that fit.
  const uint32_t outside = kNegInfWord;
  for (const bool write_outside : {false, true}) {
    EXPECT_FALSE(row_left(kCoverFit, write_outside));
    EXPECT_TRUE(row_left(kCoverUnfit, write_outside));
    EXPECT_TRUE(row_left(kCoverFit | kCoverUnfit, write_outside));
    EXPECT_EQ(row_left(0, write_outside), write_outside);
  }
  EXPECT_EQ(row_word(kCoverUnfit, outside), kNanWord);
  EXPECT_EQ(row_word(kCoverFit | kCoverUnfit, outside), kNanWord);
  EXPECT_EQ(row_word(0, outside), outside);
}

TEST(KernelWalks, TileSpans) {
  kernel_test::for_each_example(check_tile_spans);
}

TEST(KernelWalks, BundledExamples) {
  kernel_test::for_each_example(check_walks);
}

TEST(KernelWalks, RandomInstances) {
  std::mt19937 rng(7);
  for (int iteration = 0; iteration < 60; ++iteration) {
    // Every third draw ends a query tile at its first half, where the second half is skipped.
    const int32_t nq =
        iteration % 3 == 0
            ? kTile * std::uniform_int_distribution<int32_t>(0, 6)(rng) + kBwdStepRows
            : std::uniform_int_distribution<int32_t>(1, 900)(rng);
    const int32_t nk = std::uniform_int_distribution<int32_t>(1, 900)(rng);
    check_walks(kernel_test::random_case(rng, nq, nk, iteration % 2 == 1,
                                         "iteration " + std::to_string(iteration)));
  }
}

}  // namespace
}  // namespace cm::sm90
