// The visible tiles of every descriptor instance as padded index lists, the form the torch
// backward fallback (compilemask/_tile_backward.py) gathers keys with: decoded once per plan.
#pragma once

#include <cstdint>
#include <vector>

namespace cm::python {

// Mask slots every TileLists has: slot 0 is a fully visible tile, slot 1 a padding entry that
// sees nothing. Partial tiles get slots from 2 on.
inline constexpr int32_t kFullSlot = 0;
inline constexpr int32_t kPadSlot = 1;

struct TileLists {
  int32_t instances = 0;
  int32_t q_tiles = 0;
  int32_t k_tiles = 0;
  int32_t width = 0;  // entries per query tile: the most visible key tiles of any query tile
  int32_t tile_m = 0;
  int32_t tile_n = 0;
  int32_t slots = 0;
  std::vector<int32_t> key_tile;   // [instances][q_tiles][width]; padding entries hold k_tiles
  std::vector<int32_t> mask_slot;  // [instances][q_tiles][width]
  std::vector<uint8_t> masks;      // [slots][tile_m][tile_n], 1 = visible (tile-relative)
};

// Pre: `blob` is a valid descriptor (it came from Mask::specialize).
// Post: for every instance i and query tile m, the entries (key_tile, mask_slot) of row (i, m)
// list each non-empty key tile of the forward form once, in run order, then padding; the
// visible (q, k) pairs of the tile are exactly the set bits of masks[mask_slot]. Columns and
// rows past nk and nq are not cleared: callers mask them from the lengths. Partial tiles with
// the same tile-relative pattern share a slot; grid patterns, which depend on the tile's
// position, get one slot per tile; tiles that desc::partial_tile_nonempty rejects (gaps of
// sparse grid runs) are left out.
TileLists decode_tile_lists(const void* blob);

}  // namespace cm::python
