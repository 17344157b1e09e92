// Masks on uniform blocks for FlexAttention (see block_grid.h).
#include "descriptor/block_grid.h"

#include "descriptor/expand_rows.h"
#include "descriptor/pattern_encode.h"
#include "descriptor/tile_axes.h"
#include "descriptor/tile_classify.h"
#include "parallel/parallel_for.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

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

// Rows of one work item: a band of whole block rows of one instance, about this many query
// rows, so that one large mask spreads over the workers as many small ones do.
constexpr int32_t kBandRows = 2048;

// Block rows [first, end) of instance `instance`.
struct Band {
  size_t instance;
  int32_t first;
  int32_t end;
};

// Rows [q0, q1) of an instance: the instance's own rows when it lists them all, or its grid
// formulas expanded to intervals (CompleteRowWriter) for these rows only.
class BandRows {
 public:
  BandRows() = default;
  BandRows(const InstanceRows& instance, int32_t q0, int32_t q1) {
    if (instance.formulas.empty()) {
      whole_ = &instance.all;
      return;
    }
    base_ = q0;
    CompleteRowWriter(instance).write_rows(q0, q1, expanded_);
  }

  const RowIntervals& rows() const { return whole_ ? *whole_ : expanded_; }
  int32_t index(int32_t q) const { return q - base_; }  // query row q's index in rows()

 private:
  const RowIntervals* whole_ = nullptr;  // the instance's own rows, when it lists them all
  RowIntervals expanded_;                // otherwise rows [base_, base_ + expanded_.nq)
  int32_t base_ = 0;
};

// Codes and bitmaps of one band at a time, in two passes, so that the grid's bitmaps are
// allocated once for all bands: classify writes a band's codes, numbering its partial blocks
// from kFirstBitmap; fill, once every band's count is known, moves them to the band's first
// bitmap in the grid and sets their bits. One writer per worker (its classifier and lists are
// scratch); all share the grid's key axis.
class BandGridWriter {
 public:
  static constexpr int32_t kFirstBitmap = 2;  // after kEmpty and kFull

  BandGridWriter(const BlockGrid& grid, int32_t nq, const TileAxis& keys)
      : grid_(grid),
        nq_(nq),
        keys_(keys),
        classifier_(keys),
        block_words_(static_cast<size_t>(grid.block_q) * static_cast<size_t>(grid.words_per_row)) {}

  // Writes the band's codes to `codes` (those of its first block row); returns its partial
  // blocks.
  int64_t classify(const BandRows& rows, const Band& band, int32_t* codes) {
    int64_t partial = 0;
    for (int32_t i = band.first; i < band.end; ++i) {
      const int32_t q0 = i * grid_.block_q;
      const int32_t q1 = std::min(nq_, q0 + grid_.block_q);
      classifier_.add_rows(rows.rows(), rows.index(q0), rows.index(q1));
      classifier_.finish(q1 - q0, segments_);
      classify_segments(q1 - q0 == grid_.block_q,
                        codes + static_cast<size_t>(i - band.first) * grid_.k_blocks, partial);
    }
    return partial;
  }

  // Renumbers classify's partial codes from `first_bitmap` on and sets their visible bits in
  // `bits`, the grid's bitmaps.
  void fill(const BandRows& rows, const Band& band, int32_t* codes, int64_t first_bitmap,
            uint32_t* bits) {
    const auto shift = static_cast<int32_t>(first_bitmap - kFirstBitmap);
    const size_t count = static_cast<size_t>(band.end - band.first) * grid_.k_blocks;
    for (size_t c = 0; c < count; ++c) {
      if (codes[c] >= kFirstBitmap) codes[c] += shift;
    }
    for (int32_t i = band.first; i < band.end; ++i) {
      const int32_t q0 = i * grid_.block_q;
      fill_partial(rows, q0, std::min(nq_, q0 + grid_.block_q),
                   codes + static_cast<size_t>(i - band.first) * grid_.k_blocks, bits);
    }
  }

 private:
  // Codes the blocks of the segments, numbering the partial ones from kFirstBitmap + partial.
  // Codes past int32 are never kept: check_size rejects far fewer blocks and bitmaps.
  void classify_segments(bool whole_rows, int32_t* codes, int64_t& partial) const {
    for (const TileSegment& s : segments_) {
      for (int32_t j = s.first; j < s.end; ++j) {
        const bool whole = whole_rows && keys_.end(j) - keys_.start(j) == grid_.block_k;
        codes[j] = s.listed_full && whole ? BlockGrid::kFull
                                          : static_cast<int32_t>(kFirstBitmap + partial++);
      }
    }
  }

  // Sets the visible bits of rows [q0, q1), whose block row has `codes`, in its partial blocks'
  // bitmaps.
  void fill_partial(const BandRows& band_rows, int32_t q0, int32_t q1, const int32_t* codes,
                    uint32_t* bits) {
    partial_.clear();
    for (int32_t j = 0; j < grid_.k_blocks; ++j) {
      if (codes[j] >= kFirstBitmap) partial_.push_back(j);
    }
    if (partial_.empty()) return;
    const RowIntervals& rows = band_rows.rows();
    const int32_t bk = grid_.block_k;
    for (int32_t q = q0; q < q1; ++q) {
      const size_t row_offset = static_cast<size_t>(q - q0) * grid_.words_per_row;
      const int32_t r = band_rows.index(q);
      for (const Interval* it = rows.row(r); it != rows.row(r) + rows.row_size(r); ++it) {
        // The partial blocks meeting [lo, hi), in key order.
        auto p = std::lower_bound(partial_.begin(), partial_.end(), it->lo / bk);
        for (; p != partial_.end() && *p * bk < it->hi; ++p) {
          const int32_t base = *p * bk;
          uint32_t* row = bits + static_cast<size_t>(codes[*p]) * block_words_ + row_offset;
          set_bits(row, std::max(it->lo, base) - base, std::min(it->hi, base + bk) - base);
        }
      }
    }
  }

  const BlockGrid& grid_;
  int32_t nq_;
  const TileAxis& keys_;
  TileRowClassifier classifier_;
  size_t block_words_;
  std::vector<TileSegment> segments_;
  std::vector<int32_t> partial_;  // fill_partial's block row's partial blocks, ascending
};

// The grid's work in parallel::workers_for_work's units (rows): each row, and each interval it
// lists or its grid formula reaches (at most one per grid line within the radii).
int64_t grid_work(const std::vector<InstanceRows>& instances) {
  int64_t work = 0;
  for (const InstanceRows& instance : instances) {
    work += instance.listed().nq + static_cast<int64_t>(instance.listed().intervals.size());
    for (const desc::GridFormula& f : instance.formulas) {
      work += int64_t{f.q_hi - f.q_lo} * (2 * f.rt + 1) * (2 * f.ry + 1);
    }
  }
  return work;
}

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
  // Bands are independent: each worker classifies, then fills, whole bands, and the bitmaps
  // are numbered in the grid's order, as one thread would number them. Bands of rows given as
  // formulas are expanded once and kept between the passes.
  const int32_t band_blocks = std::max(1, kBandRows / tiling.m);
  std::vector<Band> bands;
  for (size_t i = 0; i < instances.size(); ++i) {
    for (int32_t first = 0; first < grid.q_blocks; first += band_blocks) {
      bands.push_back({i, first, std::min(grid.q_blocks, first + band_blocks)});
    }
  }
  grid.codes.assign(instances.size() * static_cast<size_t>(grid.q_blocks) * grid.k_blocks,
                    BlockGrid::kEmpty);
  auto codes_of = [&](const Band& band) {
    return grid.codes.data() +
           (band.instance * static_cast<size_t>(grid.q_blocks) + static_cast<size_t>(band.first)) *
               grid.k_blocks;
  };
  const TileAxis keys = TileAxis::uniform(nk, tiling.n);
  const auto count = static_cast<int64_t>(bands.size());
  const int workers = parallel::workers_for_work(count, grid_work(instances));
  std::vector<BandGridWriter> writers(static_cast<size_t>(workers), BandGridWriter(grid, nq, keys));
  std::vector<BandRows> rows(bands.size());
  std::vector<int64_t> first_bitmap(bands.size());
  parallel::parallel_for(count, workers, {}, [&](int64_t item, int worker) {
    const auto i = static_cast<size_t>(item);
    const Band& band = bands[i];
    rows[i] = BandRows(instances[band.instance], band.first * tiling.m,
                       std::min(nq, band.end * tiling.m));
    first_bitmap[i] = writers[static_cast<size_t>(worker)].classify(rows[i], band, codes_of(band));
  });
  int64_t bitmaps = BandGridWriter::kFirstBitmap;
  for (int64_t& first : first_bitmap) bitmaps += std::exchange(first, bitmaps);
  check_size(static_cast<int64_t>(grid.codes.size()), bitmaps, block_words);
  grid.bits.resize(static_cast<size_t>(bitmaps) * block_words, 0u);
  parallel::parallel_for(count, workers, {}, [&](int64_t item, int worker) {
    const auto i = static_cast<size_t>(item);
    writers[static_cast<size_t>(worker)].fill(rows[i], bands[i], codes_of(bands[i]),
                                              first_bitmap[i], grid.bits.data());
  });
  return grid;
}

}  // namespace cm::descriptor
