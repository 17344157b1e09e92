// Masks on uniform blocks for FlexAttention (see block_grid.h).
#include "descriptor/block_grid.h"

#include "descriptor/expand_rows.h"
#include "descriptor/pattern_encode.h"
#include "descriptor/tile_axes.h"
#include "descriptor/tile_classify.h"

#include <algorithm>
#include <string>

namespace cm::descriptor {
namespace {

// Codes and bitmaps together stay below this, as the descriptor does (blob_writer.cpp).
constexpr int64_t kMaxGridBytes = int64_t{1} << 32;

void check_size(int64_t codes, int64_t bitmaps, size_t block_words) {
  const int64_t bytes = 4 * (codes + bitmaps * static_cast<int64_t>(block_words));
  if (bytes > kMaxGridBytes) {
    throw Error("block_grid: " + std::to_string(codes) + " block codes and " +
                std::to_string(bitmaps) + " bitmaps would exceed 4 GiB; use larger blocks or " +
                "fewer distinct masks");
  }
}

// Codes and bitmaps of one instance's rows, appended to the grid.
class GridWriter {
 public:
  GridWriter(BlockGrid& grid, int32_t nq, int32_t nk)
      : grid_(grid),
        nq_(nq),
        keys_(TileAxis::uniform(nk, grid.block_k)),
        classifier_(keys_),
        block_words_(static_cast<size_t>(grid.block_q) * static_cast<size_t>(grid.words_per_row)) {}

  // Two passes, so that the bitmaps are allocated once: codes first, then the bits.
  void add(const RowIntervals& rows) {
    const size_t first_code = grid_.codes.size();
    grid_.codes.resize(first_code + static_cast<size_t>(grid_.q_blocks) * grid_.k_blocks,
                       BlockGrid::kEmpty);
    auto codes_of = [&](int32_t i) {
      return grid_.codes.data() + first_code + static_cast<size_t>(i) * grid_.k_blocks;
    };
    auto bitmaps = static_cast<int64_t>(grid_.bits.size() / block_words_);
    for (int32_t i = 0; i < grid_.q_blocks; ++i) {
      const int32_t q0 = i * grid_.block_q;
      const int32_t q1 = std::min(nq_, q0 + grid_.block_q);
      classifier_.add_rows(rows, q0, q1);
      classifier_.finish(q1 - q0, segments_);
      classify(q1 - q0 == grid_.block_q, codes_of(i), bitmaps);
    }
    check_size(static_cast<int64_t>(grid_.codes.size()), bitmaps, block_words_);
    grid_.bits.resize(static_cast<size_t>(bitmaps) * block_words_, 0u);
    for (int32_t i = 0; i < grid_.q_blocks; ++i) {
      const int32_t q0 = i * grid_.block_q;
      fill_partial(rows, q0, std::min(nq_, q0 + grid_.block_q), codes_of(i));
    }
  }

 private:
  // Codes the blocks of the segments, numbering the partial ones' bitmaps from `bitmaps` on.
  // Codes past int32 are never kept: check_size rejects far fewer bitmaps.
  void classify(bool whole_rows, int32_t* codes, int64_t& bitmaps) const {
    for (const TileSegment& s : segments_) {
      for (int32_t j = s.first; j < s.end; ++j) {
        const bool whole = whole_rows && keys_.end(j) - keys_.start(j) == grid_.block_k;
        codes[j] = s.listed_full && whole ? BlockGrid::kFull : static_cast<int32_t>(bitmaps++);
      }
    }
  }

  // Sets the visible bits of rows [q0, q1), whose block row has `codes`, in its partial blocks'
  // bitmaps.
  void fill_partial(const RowIntervals& rows, int32_t q0, int32_t q1, const int32_t* codes) {
    partial_.clear();
    for (int32_t j = 0; j < grid_.k_blocks; ++j) {
      if (codes[j] >= 2) partial_.push_back(j);
    }
    if (partial_.empty()) return;
    const int32_t bk = grid_.block_k;
    for (int32_t q = q0; q < q1; ++q) {
      const size_t row_offset = static_cast<size_t>(q - q0) * grid_.words_per_row;
      for (const Interval* it = rows.row(q); it != rows.row(q) + rows.row_size(q); ++it) {
        // The partial blocks meeting [lo, hi), in key order.
        auto p = std::lower_bound(partial_.begin(), partial_.end(), it->lo / bk);
        for (; p != partial_.end() && *p * bk < it->hi; ++p) {
          const int32_t base = *p * bk;
          uint32_t* row =
              grid_.bits.data() + static_cast<size_t>(codes[*p]) * block_words_ + row_offset;
          set_bits(row, std::max(it->lo, base) - base, std::min(it->hi, base + bk) - base);
        }
      }
    }
  }

  BlockGrid& grid_;
  int32_t nq_;
  TileAxis keys_;
  TileRowClassifier classifier_;
  size_t block_words_;
  std::vector<TileSegment> segments_;
  std::vector<int32_t> partial_;  // fill_partial's block row's partial blocks, ascending
};

}  // namespace

BlockGrid block_grid(const std::vector<InstanceRows>& instances, std::vector<int32_t> instance_map,
                     const Tiling& tiling) {
  const int32_t nq = instances.front().listed().nq;
  const int32_t nk = instances.front().listed().nk;
  BlockGrid grid;
  grid.block_q = tiling.m;
  grid.block_k = tiling.n;
  grid.q_blocks = (nq + tiling.m - 1) / tiling.m;
  grid.k_blocks = (nk + tiling.n - 1) / tiling.n;
  grid.words_per_row = bitmap_words_per_row(tiling.n);
  grid.instance_of = std::move(instance_map);
  const size_t block_words =
      static_cast<size_t>(tiling.m) * static_cast<size_t>(grid.words_per_row);
  check_size(static_cast<int64_t>(instances.size()) * grid.q_blocks * grid.k_blocks, 2,
             block_words);
  // Bitmaps kEmpty and kFull.
  grid.bits.assign(2 * block_words, 0u);
  for (int32_t y = 0; y < tiling.m; ++y) {
    set_bits(grid.bits.data() + block_words + static_cast<size_t>(y) * grid.words_per_row, 0,
             tiling.n);
  }
  GridWriter writer(grid, nq, nk);
  for (const InstanceRows& instance : instances) {
    if (instance.formulas.empty()) {
      writer.add(instance.all);
    } else {
      writer.add(complete_rows(instance));
    }
  }
  return grid;
}

}  // namespace cm::descriptor
