// Finds, for one query tile row, the tile-relative visible pieces of every row inside each
// partial key tile, and fits each tile's bands as its pieces arrive (pieces are not stored).
// Work is O(rows + intervals + pieces): full and empty tiles are skipped through the sorted
// partial-tile list.
#pragma once

#include "descriptor/pattern_encode.h"
#include "descriptor/tile_axes.h"
#include "specialize/row_intervals.h"

#include <cstdint>
#include <span>
#include <vector>

namespace cm::descriptor {

class PieceGatherer {
 public:
  // Pre: `keys` outlives the gatherer.
  explicit PieceGatherer(const TileAxis& keys) : keys_(keys) {}

  // Pre: rows valid, 0 <= q0 < q1 <= rows.nq, q1 - q0 <= 256, `partial` strictly increasing
  // key tile indices. Post: bands(i) fits the pieces of key tile partial[i] (rows relative to
  // q0, columns clipped to the tile); has_pieces(i) says whether it has any.
  void gather(const RowIntervals& rows, int32_t q0, int32_t q1, std::span<const int32_t> partial);

  const std::vector<desc::RowBand>& bands(size_t i) const { return fitters_[i].bands(); }
  bool has_pieces(size_t i) const { return !fitters_[i].bands().empty(); }
  // The most pieces one row of key tile partial[i] holds.
  int32_t most_pieces_per_row(size_t i) const { return fitters_[i].most_pieces_per_row(); }

  // Pre: as for gather, for the single key tile n. Post: `pieces` (cleared first) holds the
  // tile's pieces sorted by (row, lo), for patterns that need them (bitmaps).
  void pieces_of(const RowIntervals& rows, int32_t q0, int32_t q1, int32_t n,
                 std::vector<RowPiece>& pieces) const;

 private:
  // True if rows q-2, q-1, q hold the same number of intervals, each moving by the same int8
  // step from q-1 to q as from q-2 to q-1 and keeping the key tiles of its first and last key.
  // Then each row's pieces in every tile are those of the row before, moved affinely. Pre:
  // rows q-2 .. q exist.
  bool steady(const RowIntervals& rows, int32_t q) const;

  // Pre: steady(rows, q). Returns the last row e in [q, q_end) such that every row of
  // (q, e] moves each interval by the same step as row q did from q - 1, keeping its tiles.
  int32_t stretch_end(const RowIntervals& rows, int32_t q, int32_t q_end);
  // How many steps of `step` keep `key` inside its key tile (unbounded for step 0).
  int64_t rows_in_tile(int32_t key, int32_t step) const;

  const TileAxis& keys_;
  std::vector<BandFitter> fitters_;  // one per partial tile; storage reused across tile rows
  std::vector<size_t> touched_;      // fitters of the row before a stretch
  std::vector<Interval> steps_;      // per interval of a stretch: its lo and hi step per row
};

}  // namespace cm::descriptor
