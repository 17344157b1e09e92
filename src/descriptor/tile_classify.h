// Classifies the key tiles of one query tile row as empty, full or partial, in
// O(rows + intervals + span of touched tiles), using difference arrays over key tiles.
#pragma once

#include "specialize/row_intervals.h"

#include <cstdint>
#include <vector>

namespace cm::descriptor {

class TileRowClassifier {
 public:
  TileRowClassifier(int32_t nk, int32_t tile_n);

  // Pre: rows is valid (input_checks.h), 0 <= q0 < q1 <= rows.nq.
  // Post: `full` and `partial` hold, in increasing order, the key tiles whose clipped area
  // [k0, min(k0 + tile_n, nk)) is fully visible to every row in [q0, q1), respectively visible
  // to some but not all of the pairs. Tiles in neither list are empty.
  void classify(const RowIntervals& rows, int32_t q0, int32_t q1, std::vector<int32_t>& full,
                std::vector<int32_t>& partial);

 private:
  int32_t nk_;
  int32_t tile_n_;
  int32_t num_tiles_;
  // Difference arrays, all zero between calls: intervals touching a tile, and intervals
  // covering a whole (clipped) tile.
  std::vector<int32_t> touch_;
  std::vector<int32_t> cover_;
};

}  // namespace cm::descriptor
