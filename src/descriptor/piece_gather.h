// Collects, for one query tile row, the tile-relative visible pieces of every row inside each
// partial key tile. Work is O(rows + intervals + pieces emitted): full and empty tiles are
// skipped through the sorted partial-tile list.
#pragma once

#include "descriptor/pattern_encode.h"
#include "specialize/row_intervals.h"

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

class PieceGatherer {
 public:
  explicit PieceGatherer(int32_t tile_n) : tile_n_(tile_n) {}

  // Pre: rows valid, 0 <= q0 < q1 <= rows.nq, q1 - q0 <= 256, `partial` strictly increasing
  // key tile indices. Post: pieces(i) holds the pieces of key tile partial[i], rows relative
  // to q0 and columns clipped to the tile, sorted by (row, lo).
  void gather(const RowIntervals& rows, int32_t q0, int32_t q1, std::span<const int32_t> partial);

  std::span<const RowPiece> pieces(size_t i) const { return slots_[i]; }

 private:
  int32_t tile_n_;
  std::vector<std::vector<RowPiece>> slots_;  // capacity is reused across tile rows
};

}  // namespace cm::descriptor
