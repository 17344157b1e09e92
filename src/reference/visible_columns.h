// Decodes the visible key columns of one query row from the descriptor, in either form: the
// whole row from the forward form, or one (query tile, key tile) pair from the transposed form.
#pragma once

#include <compilemask/descriptor.h>

#include "specialize/row_intervals.h"

#include <cstdint>
#include <vector>

namespace cm::reference {

// Reusable per-thread decoder. Results are absolute key columns in [0, nk), as sorted,
// disjoint, non-empty half-open intervals.
class VisibleColumns {
 public:
  explicit VisibleColumns(const void* blob);

  // All visible columns of query row q of query tile m, whose forward-form row is `tile_row`.
  // Precondition: q lies in query tile m.
  const std::vector<Interval>& row(const desc::TileRow& tile_row, int m, int q);

  // Visible columns of query row q (of query tile m) inside key tile n. `pattern` is the
  // partial pattern of tile (m, n), or nullptr for a full tile.
  const std::vector<Interval>& tile(const desc::Pattern* pattern, int m, int n, int q);

 private:
  // Appends the visible columns of row q in tile (m, n) to intervals_, in increasing order.
  void append_tile(const desc::Pattern* pattern, int m, int n, int q);

  // Per member tile of tile_row's partial runs, in run order: whether it is non-empty. Sparse
  // grid runs bridge empty tiles, which a kernel skips and so does the reference. Computed once
  // per tile row (a TileRow address names one (instance, query tile)) and reused by its rows.
  const std::vector<uint8_t>& partial_members(const desc::TileRow& tile_row, int m);

  const void* blob_;
  std::vector<uint8_t> column_mask_;  // one tile row; pattern intervals may overlap
  std::vector<Interval> intervals_;
  const desc::TileRow* members_row_ = nullptr;
  std::vector<uint8_t> members_nonempty_;
};

}  // namespace cm::reference
