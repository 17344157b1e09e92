// Finds, for one query tile row, the tile-relative visible pieces of every row inside each
// partial key tile, and fits each tile's bands as its pieces arrive (pieces are not stored).
// Work is O(rows + intervals + pieces): full and empty tiles are skipped through the sorted
// partial-tile list.
#pragma once

#include "descriptor/pattern_encode.h"
#include "descriptor/tile_div.h"
#include "specialize/row_intervals.h"

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

class PieceGatherer {
 public:
  explicit PieceGatherer(int32_t tile_n) : tile_n_(tile_n), div_(tile_n) {}

  // Pre: rows valid, 0 <= q0 < q1 <= rows.nq, q1 - q0 <= 256, `partial` strictly increasing
  // key tile indices. Post: bands(i) fits the pieces of key tile partial[i] (rows relative to
  // q0, columns clipped to the tile); has_pieces(i) says whether it has any.
  void gather(const RowIntervals& rows, int32_t q0, int32_t q1, std::span<const int32_t> partial);

  const std::vector<desc::RowBand>& bands(size_t i) const { return fitters_[i].bands(); }
  bool has_pieces(size_t i) const { return !fitters_[i].bands().empty(); }

  // Pre: as for gather, for the single key tile n. Post: `pieces` (cleared first) holds the
  // tile's pieces sorted by (row, lo), for patterns that need them (bitmaps).
  void pieces_of(const RowIntervals& rows, int32_t q0, int32_t q1, int32_t n,
                 std::vector<RowPiece>& pieces) const;

 private:
  int32_t tile_n_;
  TileDiv div_;
  std::vector<BandFitter> fitters_;  // one per partial tile; storage reused across tile rows
};

}  // namespace cm::descriptor
