// Encodes the visible set of one partial tile as affine row bands or as a bitmap.
#pragma once

#include <compilemask/descriptor.h>

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

// Pre: pieces sorted by (row, lo); within a row disjoint; 0 <= lo < hi <= tile_n; row < 256.
// Post: `bands` (cleared first) holds RowBands whose union, row by row, equals the pieces.
// Greedy: the k-th piece of consecutive rows extends the k-th open band while its lo and hi
// both keep one constant int8 slope; otherwise that band closes and a new one opens.
void fit_bands(std::span<const RowPiece> pieces, std::vector<desc::RowBand>& bands);

// Words in one bitmap row and bytes of one bitmap pattern.
int32_t bitmap_words_per_row(int32_t tile_n);
size_t bitmap_bytes(int32_t tile_m, int32_t tile_n);

// Pre: as for fit_bands. Post: `words` (resized to tile_m * words_per_row) has bit c of row r
// set exactly when some piece of row r contains c.
void fill_bitmap(std::span<const RowPiece> pieces, int32_t tile_m, int32_t tile_n,
                 std::vector<uint32_t>& words);

}  // namespace cm::descriptor
