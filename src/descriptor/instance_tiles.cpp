// Per-instance tile encoding: classification, pattern choice, deduplication and forward runs
// (see instance_tiles.h).
#include "descriptor/instance_tiles.h"

#include "descriptor/formula_bitmaps.h"
#include "descriptor/pattern_encode.h"
#include "descriptor/piece_gather.h"
#include "descriptor/tile_row_tiles.h"

#include <algorithm>
#include <array>
#include <memory>

namespace cm::descriptor {
namespace {

// The most bands a plain pattern keeps: a kernel walks every band for every row.
constexpr size_t kMaxWalkedBands = 4;

// Adds one tile row's tiles and pairs to `counts`.
void count_row(const TileRowTiles& tiles, TileCounts& counts) {
  counts.visible_pairs += tiles.visible_pairs;
  counts.computed_pairs += tiles.computed_pairs;
  for (const TileRowTiles::Run& run : tiles.full) counts.full_tiles += run.end - run.first;
  counts.partial_tiles += static_cast<int64_t>(tiles.partial.size());
}

template <class T>
std::span<const unsigned char> as_bytes_of(const std::vector<T>& v) {
  return {reinterpret_cast<const unsigned char*>(v.data()), v.size() * sizeof(T)};
}

// Turns one partial tile's fitted bands into a pattern index.
class TileEncoder {
 public:
  TileEncoder(const InstanceRows& instance, const Tiling& tiling, const TileAxes& axes,
              PatternTable& table)
      : instance_(instance),
        tiling_(tiling),
        axes_(axes),
        table_(table),
        strips_(instance.formulas.size()),
        strip_patterns_(instance.formulas.size()) {}

  // Starts a query tile row: its row table is written when a tile first needs it.
  void begin_tile_row() {
    row_table_per_row_ = kNotCounted;
    row_table_offset_ = -1;
    row_table_patterns_.fill(-1);
  }

  // Partial tile i of the gatherer as bands while a row has few of them to walk. Past that, as
  // the query tile's row table when its rows hold few intervals each: a kernel reads a row's
  // intervals in one load each, and one table serves every key tile of the query tile, so
  // bounds drawn per row cost O(rows) bytes instead of a pattern per tile. Else as per-row
  // ranges, or as a bitmap when the ranges would take more bytes. Windows drawn per row fit a
  // band per row or two: walked by every row, 25 bands cost random_window's forward 2.6 ms of
  // 4.3 at 32K (perf-notes, session 27).
  uint32_t plain(const PieceGatherer& gatherer, size_t i, const RowIntervals& rows, int32_t r0,
                 int32_t r1, int32_t n) {
    const std::vector<desc::RowBand>& bands = gatherer.bands(i);
    if (bands.size() <= kMaxWalkedBands) {
      return table_.add(desc::kPatternBands, -1, static_cast<uint16_t>(bands.size()),
                        as_bytes_of(bands));
    }
    if (row_table_per_row(rows, r0, r1) <= kMaxWalkedBands) {
      return row_table_pattern(rows, r0, r1, fitted_bands_empty_halves(bands, tiling_.m));
    }
    const int32_t per_row = gatherer.most_pieces_per_row(i);
    if (row_ranges_bytes(tiling_.m, per_row) <= bitmap_bytes(tiling_.m, tiling_.n)) {
      row_ranges_from_bands(bands, tiling_.m, tiling_.n, per_row, ranges_);
      return table_.add(desc::kPatternRowRanges, -1, static_cast<uint16_t>(per_row),
                        as_bytes_of(ranges_));
    }
    gatherer.pieces_of(rows, r0, r1, n, pieces_);
    fill_bitmap(pieces_, tiling_.m, tiling_.n, bitmap_);
    return table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(bitmap_));
  }

  // Partial tile i (tile (m, n)), reached by strip-layout formula f, as a bitmap of the
  // formula's keys and the tile's listed pieces (disjoint from them). Strip tiles repeat few
  // bitmaps (FormulaBitmaps), and a kernel reads a bitmap row with a few word operations
  // instead of walking the formula. A tile without listed pieces takes its geometry's pattern.
  uint32_t strip_bitmap(const PieceGatherer& gatherer, size_t i, const RowIntervals& rows,
                        int32_t f, int32_t m, int32_t n) {
    if (strips_[static_cast<size_t>(f)] == nullptr) {
      strips_[static_cast<size_t>(f)] =
          std::make_unique<FormulaBitmaps>(instance_, f, tiling_, axes_);
    }
    FormulaBitmaps& formula = *strips_[static_cast<size_t>(f)];
    const int32_t id = formula.geometry(m, n);
    if (!gatherer.has_pieces(i)) {
      std::vector<int64_t>& patterns = strip_patterns_[static_cast<size_t>(f)];
      if (static_cast<size_t>(id) >= patterns.size())
        patterns.resize(static_cast<size_t>(id) + 1, -1);
      int64_t& pattern = patterns[static_cast<size_t>(id)];
      if (pattern < 0)
        pattern = table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(formula.bitmap(id)));
      return static_cast<uint32_t>(pattern);
    }
    gatherer.pieces_of(rows, axes_.q.start(m), axes_.q.end(m), n, pieces_);
    fill_bitmap(pieces_, tiling_.m, tiling_.n, bitmap_);
    const std::vector<uint32_t>& words = formula.bitmap(id);
    for (size_t w = 0; w < words.size(); ++w) bitmap_[w] |= words[w];
    return table_.add(desc::kPatternBitmap, -1, 0, as_bytes_of(bitmap_));
  }

  // A grid formula, alone (sparse kind) or with partial tile i's listed pieces as bands.
  uint32_t grid(const PieceGatherer& gatherer, size_t i, int32_t formula) {
    if (!gatherer.has_pieces(i)) return table_.add(desc::kPatternGridSparse, formula, 0, {});
    const std::vector<desc::RowBand>& bands = gatherer.bands(i);
    return table_.add(desc::kPatternGrid, formula, static_cast<uint16_t>(bands.size()),
                      as_bytes_of(bands));
  }

 private:
  // The most intervals a row of [r0, r1) holds, counted once per query tile row.
  size_t row_table_per_row(const RowIntervals& rows, int32_t r0, int32_t r1) {
    if (row_table_per_row_ == kNotCounted) {
      row_table_per_row_ = 0;
      for (int32_t q = r0; q < r1; ++q) {
        row_table_per_row_ = std::max(row_table_per_row_, static_cast<size_t>(rows.row_size(q)));
      }
    }
    return row_table_per_row_;
  }

  // The query tile row's kPatternRowTable pattern for tiles with `empty_halves`; writes the
  // table (rows [r0, r1), then empty rows up to tile_m) on first use.
  uint32_t row_table_pattern(const RowIntervals& rows, int32_t r0, int32_t r1,
                             uint8_t empty_halves) {
    int64_t& pattern = row_table_patterns_[empty_halves];
    if (pattern >= 0) return static_cast<uint32_t>(pattern);
    const auto per_row = static_cast<uint16_t>(row_table_per_row_);
    if (row_table_offset_ < 0) {
      row_table_.assign(static_cast<size_t>(tiling_.m) * per_row, desc::KeyInterval{0, 0});
      for (int32_t q = r0; q < r1; ++q) {
        desc::KeyInterval* out = row_table_.data() + static_cast<size_t>(q - r0) * per_row;
        for (const Interval& interval :
             std::span(rows.row(q), static_cast<size_t>(rows.row_size(q)))) {
          *out++ = {interval.lo, interval.hi};
        }
      }
      row_table_offset_ = table_.add_row_table(row_table_);
    }
    pattern = table_.add_row_table_pattern(static_cast<uint32_t>(row_table_offset_), per_row,
                                           empty_halves);
    return static_cast<uint32_t>(pattern);
  }

  static constexpr size_t kNotCounted = ~size_t{0};

  const InstanceRows& instance_;
  const Tiling& tiling_;
  const TileAxes& axes_;
  PatternTable& table_;
  std::vector<RowPiece> pieces_;
  std::vector<desc::RowRange> ranges_;
  std::vector<uint32_t> bitmap_;
  // The current query tile row's row table: intervals per row, data offset (-1 until written)
  // and pattern per empty_halves value (-1 until needed).
  size_t row_table_per_row_ = kNotCounted;
  int64_t row_table_offset_ = -1;
  std::array<int64_t, 4> row_table_patterns_{};
  std::vector<desc::KeyInterval> row_table_;
  // Per formula of a strip layout, once reached: its bitmaps by geometry, and the pattern of
  // each geometry (-1 until a tile without listed pieces needs it).
  std::vector<std::unique_ptr<FormulaBitmaps>> strips_;
  std::vector<std::vector<int64_t>> strip_patterns_;
};

}  // namespace

EncodedInstance encode_instance(const InstanceRows& instance, const Tiling& tiling,
                                const TileAxes& axes, PatternTable& table) {
  std::vector<int32_t> global_formula(instance.formulas.size(), -1);
  EncodedInstance out;
  TileRowTileFinder finder(instance, axes);
  PieceGatherer gatherer(axes.k);
  TileEncoder encoder(instance, tiling, axes, table);
  RunFormBuilder builder(table);

  for (int32_t m = 0; m < axes.q.count(); ++m) {
    const TileRowTiles& tiles = finder.find(m);
    const int32_t f = tiles.formula;
    count_row(tiles, out.counts);
    builder.begin_row();
    encoder.begin_tile_row();
    for (const TileRowTiles::Run& run : tiles.full) builder.add_full(run.first, run.end);
    gatherer.gather(*tiles.rows, tiles.r0, tiles.r1, tiles.partial);
    const desc::GridFormula* formula =
        f >= 0 ? &instance.formulas[static_cast<size_t>(f)] : nullptr;
    const bool strips = formula != nullptr && formula->strip < formula->cols;
    if (formula != nullptr && !strips && global_formula[f] < 0)
      global_formula[f] = table.add_formula(*formula);
    for (size_t i = 0; i < tiles.partial.size(); ++i) {
      const int32_t n = tiles.partial[i];
      uint32_t pattern;
      if (!tiles.reached[i]) {
        pattern = encoder.plain(gatherer, i, *tiles.rows, tiles.r0, tiles.r1, n);
      } else if (strips) {
        pattern = encoder.strip_bitmap(gatherer, i, *tiles.rows, f, m, n);
      } else {
        pattern = encoder.grid(gatherer, i, global_formula[f]);
      }
      builder.add_partial(n, pattern);
      out.partial.push_back({m, n, pattern});
    }
    builder.end_row();
  }
  out.forward = builder.finish();
  return out;
}

TileCounts count_instance_tiles(const InstanceRows& instance, const TileAxes& axes) {
  TileCounts counts;
  TileRowTileFinder finder(instance, axes);
  for (int32_t m = 0; m < axes.q.count(); ++m) count_row(finder.find(m), counts);
  return counts;
}

}  // namespace cm::descriptor
