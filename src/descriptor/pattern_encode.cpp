// Band fitting and bitmap filling for partial tiles (see pattern_encode.h).
#include "descriptor/pattern_encode.h"

#include <algorithm>

namespace cm::descriptor {
namespace {

desc::RowBand to_band(const BandFitter::OpenBand& open) {
  desc::RowBand band;
  band.row_first = static_cast<uint8_t>(open.first);
  band.row_last = static_cast<uint8_t>(open.last);
  // A one-row band keeps slope 0 so that equal single rows encode identically.
  band.lo_slope = static_cast<int8_t>(open.first == open.last ? 0 : open.lo_slope);
  band.hi_slope = static_cast<int8_t>(open.first == open.last ? 0 : open.hi_slope);
  band.lo0 = static_cast<int16_t>(open.lo0);
  band.hi0 = static_cast<int16_t>(open.hi0);
  return band;
}

}  // namespace

void BandFitter::reset() {
  open_.clear();
  bands_.clear();
  row_ = -1;
  k_ = 0;
}

void BandFitter::close(OpenBand& open) {
  if (open.last >= 0) bands_.push_back(to_band(open));
  open = OpenBand{};
}

void BandFitter::close_unreached() {
  for (size_t k = k_; k < open_.size(); ++k) {
    if (open_[k].last >= 0) close(open_[k]);
  }
}

void BandFitter::restart(int32_t row, int32_t lo, int32_t hi) {
  if (k_ == open_.size()) {
    open_.emplace_back();
  } else {
    close(open_[k_]);
  }
  open_[k_++] = OpenBand{row, row, lo, hi, 0, 0};
}

void BandFitter::extend_to(int32_t row) {
  if (k_ < open_.size()) close_unreached();  // as add() does at the first piece of a new row
  for (size_t k = 0; k < k_; ++k) open_[k].last = row;
  row_ = row;
}

void BandFitter::finish() {
  close_unreached();  // the last row's unreached slots close first, as at every row change
  for (OpenBand& open : open_) close(open);
}

uint8_t fitted_bands_empty_halves(std::span<const desc::RowBand> bands, int32_t tile_m) {
  const int32_t half = tile_m / 2;
  bool seen[2] = {false, false};
  for (const desc::RowBand& band : bands) {
    seen[0] = seen[0] || band.row_first < half;
    seen[1] = seen[1] || band.row_last >= half;
  }
  return static_cast<uint8_t>((seen[0] ? 0u : 1u) | (seen[1] ? 0u : 2u));
}

int32_t bitmap_words_per_row(int32_t tile_n) {
  return (tile_n + 31) / 32;
}

size_t bitmap_bytes(int32_t tile_m, int32_t tile_n) {
  return static_cast<size_t>(tile_m) * static_cast<size_t>(bitmap_words_per_row(tile_n)) *
         sizeof(uint32_t);
}

void row_ranges_from_bands(std::span<const desc::RowBand> bands, int32_t tile_m, int32_t tile_n,
                           int32_t per_row, std::vector<desc::RowRange>& ranges) {
  const auto width = static_cast<size_t>(per_row);
  ranges.assign(static_cast<size_t>(tile_m) * width, desc::kEmptyRowRange);
  // A row's taken slots come first: its next piece goes to the first empty one.
  auto taken = [&](const desc::RowRange* row) {
    int lo, hi;
    int k = 0;
    while (k < per_row && desc::row_range(row, per_row, 0, k, lo, hi)) ++k;
    return k;
  };
  for (const desc::RowBand& band : bands) {
    for (int32_t r = band.row_first; r <= band.row_last; ++r) {
      int lo, hi;
      if (!desc::band_row(band, r, tile_n, lo, hi)) continue;
      desc::RowRange* row = ranges.data() + static_cast<size_t>(r) * width;
      row[taken(row)] = {static_cast<uint8_t>(lo), static_cast<uint8_t>(hi - 1)};
    }
  }
  if (per_row == 1) return;
  // Bands list a row's pieces in slot order; sorting by column makes equal sets equal bytes.
  for (int32_t r = 0; r < tile_m; ++r) {
    desc::RowRange* row = ranges.data() + static_cast<size_t>(r) * width;
    std::sort(row, row + taken(row),
              [](desc::RowRange a, desc::RowRange b) { return a.first < b.first; });
  }
}

void fill_bitmap(std::span<const RowPiece> pieces, int32_t tile_m, int32_t tile_n,
                 std::vector<uint32_t>& words) {
  const int32_t per_row = bitmap_words_per_row(tile_n);
  words.assign(static_cast<size_t>(tile_m) * static_cast<size_t>(per_row), 0u);
  for (const RowPiece& piece : pieces) {
    set_bits(words.data() + static_cast<size_t>(piece.row) * per_row, piece.lo, piece.hi);
  }
}

size_t row_ranges_bytes(int32_t tile_m, int32_t per_row) {
  return static_cast<size_t>(tile_m) * static_cast<size_t>(per_row) * sizeof(desc::RowRange);
}

}  // namespace cm::descriptor
