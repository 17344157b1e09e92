// Packed query heads in the forward (PackGQA, as FlashAttention 3's). The query heads of a GQA
// group read the same key and value tiles, and with few query rows (decoding) each 128-row query
// tile is mostly padding: every row costs a whole tile's products. A packed work item holds the
// rows of all the group's heads instead: tile row t is row t % rows_per_head of query head
// h + t / rows_per_head, and the heads share one walk over the key tiles. Host and device code.
#pragma once

#include "problem_shape.h"

#include <compilemask/descriptor.h>

namespace cm::sm90 {

// Query heads per work item: the GQA group (heads_q / heads_kv) when its heads can share one
// tile and one mask: the group divides the tile's 128 rows, the descriptor has one mask for
// every head (desc_heads == 1), and each head's nq rows fit its share of the tile
// (nq <= 128 / group; then every query tile of the descriptor does). Else 1.
CM_HD int heads_per_item(int heads_q, int heads_kv, int desc_heads, int nq) {
  const int group = heads_q / heads_kv;
  const bool packs =
      group > 1 && kKernelTile % group == 0 && desc_heads == 1 && nq <= kKernelTile / group;
  return packs ? group : 1;
}

}  // namespace cm::sm90
