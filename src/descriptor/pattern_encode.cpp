// Band fitting and bitmap filling for partial tiles (see pattern_encode.h).
#include "descriptor/pattern_encode.h"

#include <algorithm>

namespace cm::descriptor {
namespace {

// A band being grown: rows [first, last] so far, slopes known once it has two rows.
struct OpenBand {
  int32_t first = 0;
  int32_t last = -2;  // never adjacent to a real row while closed
  int32_t lo0 = 0;
  int32_t hi0 = 0;
  int32_t lo_slope = 0;
  int32_t hi_slope = 0;
};

bool fits_int8(int32_t v) {
  return v >= -128 && v <= 127;
}

desc::RowBand to_band(const OpenBand& open) {
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

// True if piece (row, lo, hi) continues `open` on the next row; sets the slopes on the
// second row.
bool extend(OpenBand& open, const RowPiece& piece) {
  if (open.last != piece.row - 1) return false;
  const int32_t d = piece.row - open.first;
  if (d == 1) {
    const int32_t lo_slope = piece.lo - open.lo0;
    const int32_t hi_slope = piece.hi - open.hi0;
    if (!fits_int8(lo_slope) || !fits_int8(hi_slope)) return false;
    open.lo_slope = lo_slope;
    open.hi_slope = hi_slope;
  } else if (open.lo0 + open.lo_slope * d != piece.lo || open.hi0 + open.hi_slope * d != piece.hi) {
    return false;
  }
  open.last = piece.row;
  return true;
}

}  // namespace

void fit_bands(std::span<const RowPiece> pieces, std::vector<desc::RowBand>& bands) {
  bands.clear();
  std::vector<OpenBand> open;  // slot k grows from the k-th piece of each row
  size_t i = 0;
  while (i < pieces.size()) {
    const int32_t row = pieces[i].row;
    size_t k = 0;
    for (; i < pieces.size() && pieces[i].row == row; ++i, ++k) {
      if (k == open.size()) open.emplace_back();
      if (extend(open[k], pieces[i])) continue;
      if (open[k].last >= 0) bands.push_back(to_band(open[k]));
      open[k] = OpenBand{row, row, pieces[i].lo, pieces[i].hi, 0, 0};
    }
    // Slots this row does not reach stop here.
    for (; k < open.size(); ++k) {
      if (open[k].last >= 0) bands.push_back(to_band(open[k]));
      open[k] = OpenBand{};
    }
  }
  for (const OpenBand& band : open) {
    if (band.last >= 0) bands.push_back(to_band(band));
  }
}

int32_t bitmap_words_per_row(int32_t tile_n) {
  return (tile_n + 31) / 32;
}

size_t bitmap_bytes(int32_t tile_m, int32_t tile_n) {
  return static_cast<size_t>(tile_m) * static_cast<size_t>(bitmap_words_per_row(tile_n)) *
         sizeof(uint32_t);
}

void fill_bitmap(std::span<const RowPiece> pieces, int32_t tile_m, int32_t tile_n,
                 std::vector<uint32_t>& words) {
  const int32_t per_row = bitmap_words_per_row(tile_n);
  words.assign(static_cast<size_t>(tile_m) * static_cast<size_t>(per_row), 0u);
  for (const RowPiece& piece : pieces) {
    uint32_t* row = words.data() + static_cast<size_t>(piece.row) * per_row;
    for (int32_t c = piece.lo; c < piece.hi; ++c) row[c / 32] |= 1u << (c % 32);
  }
}

}  // namespace cm::descriptor
