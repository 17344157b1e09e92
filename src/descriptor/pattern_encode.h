// Encodes the visible set of one partial tile as affine row bands, per-row ranges or a bitmap.
#pragma once

#include <compilemask/descriptor.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

// One visible column run of one tile row, tile-relative: row `row` sees [lo, hi).
struct RowPiece {
  int32_t row;
  int32_t lo;
  int32_t hi;
};

// Fits affine row bands to pieces fed one at a time, so that a tile's bands grow while its
// pieces are found, without storing them. Keeps its working storage across tiles.
// Greedy: the k-th piece of consecutive rows extends the k-th open band while its lo and hi
// both keep one constant int8 slope; otherwise that band closes and a new one opens.
class BandFitter {
 public:
  // Starts a new tile.
  void reset();
  // Pre: pieces arrive sorted by (row, lo); within a row disjoint; 0 <= lo < hi <= tile_n;
  // row < 256.
  [[gnu::always_inline]] void add(int32_t row, int32_t lo, int32_t hi) {
    if (row != row_) {
      if (k_ < open_.size()) close_unreached();
      row_ = row;
      k_ = 0;
    }
    if (k_ < open_.size() && extend(open_[k_], row, lo, hi)) {
      ++k_;
      return;
    }
    restart(row, lo, hi);
  }
  // Pre: the rows after the latest row, up to `row`, each repeat the latest row's pieces, and
  // every one of those pieces extends its slot's band with the slope that band already has
  // (the band holds at least two rows). Post: as if their pieces had been added one by one.
  // Cost: O(slots), whatever the number of rows.
  void extend_to(int32_t row);
  // Post: bands() holds RowBands whose union, row by row, equals the pieces added since reset.
  void finish();
  const std::vector<desc::RowBand>& bands() const { return bands_; }
  // The most pieces any one row added since reset: one slot opens per piece of the richest row.
  int32_t most_pieces_per_row() const { return static_cast<int32_t>(open_.size()); }

  // A band being grown: rows [first, last] so far, slopes known once it has two rows.
  struct OpenBand {
    int32_t first = 0;
    int32_t last = -2;  // never adjacent to a real row while closed
    int32_t lo0 = 0;
    int32_t hi0 = 0;
    int32_t lo_slope = 0;
    int32_t hi_slope = 0;
  };

 private:
  // True if piece (row, lo, hi) continues `open` on the next row; sets the slopes on the
  // second row.
  static bool extend(OpenBand& open, int32_t row, int32_t lo, int32_t hi) {
    if (open.last != row - 1) return false;
    const int32_t d = row - open.first;
    if (d == 1) {
      const int32_t lo_slope = lo - open.lo0, hi_slope = hi - open.hi0;
      if (lo_slope < -128 || lo_slope > 127 || hi_slope < -128 || hi_slope > 127) return false;
      open.lo_slope = lo_slope;
      open.hi_slope = hi_slope;
    } else if (open.lo0 + open.lo_slope * d != lo || open.hi0 + open.hi_slope * d != hi) {
      return false;
    }
    open.last = row;
    return true;
  }
  void close_unreached();  // closes the slots from k_ on, which the finished row did not reach
  void restart(int32_t row, int32_t lo, int32_t hi);  // closes slot k_, opens it with the piece
  void close(OpenBand& open);

  std::vector<OpenBand> open_;  // slot k grows from the k-th piece of each row
  std::vector<desc::RowBand> bands_;
  int32_t row_ = -1;  // row of the latest piece
  size_t k_ = 0;      // slot of the next piece of row_
};

// Pattern::empty_halves of a tile_m-row tile whose pieces `bands` fitted (BandFitter, so every
// row a band covers sees a key): bit h set when no band covers a row of half h.
uint8_t fitted_bands_empty_halves(std::span<const desc::RowBand> bands, int32_t tile_m);

// Words in one bitmap row and bytes of one bitmap pattern.
int32_t bitmap_words_per_row(int32_t tile_n);
size_t bitmap_bytes(int32_t tile_m, int32_t tile_n);

// Sets bits [lo, hi) of one bitmap row (0 <= lo <= hi <= its columns).
inline void set_bits(uint32_t* row, int32_t lo, int32_t hi) {
  for (int32_t c = lo; c < hi;) {  // a word's share of the run at a time
    const int32_t word_end = std::min(hi, (c / 32 + 1) * 32);
    const uint64_t ones = (uint64_t{1} << (word_end - c)) - 1;
    row[c / 32] |= static_cast<uint32_t>(ones << (c % 32));
    c = word_end;
  }
}

// Bytes of a row-ranges pattern with `per_row` ranges per row.
size_t row_ranges_bytes(int32_t tile_m, int32_t per_row);

// Pre: `bands` fitted by a BandFitter (its pieces within [0, tile_n)), whose richest row had
// `per_row` pieces. Post: `ranges` (resized to tile_m * per_row) holds row r's pieces sorted by
// column from index r * per_row, its other slots desc::kEmptyRowRange: a kPatternRowRanges
// pattern. Cost O(pieces + tile_m * per_row): each piece lies in exactly one band.
void row_ranges_from_bands(std::span<const desc::RowBand> bands, int32_t tile_m, int32_t tile_n,
                           int32_t per_row, std::vector<desc::RowRange>& ranges);

// Pre: as for BandFitter::add. Post: `words` (resized to tile_m * words_per_row) has bit c of row r
// set exactly when some piece of row r contains c.
void fill_bitmap(std::span<const RowPiece> pieces, int32_t tile_m, int32_t tile_n,
                 std::vector<uint32_t>& words);

}  // namespace cm::descriptor
