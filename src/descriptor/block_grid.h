// A mask's distinct instances on a uniform grid of blocks (compilemask.h, BlockGrid), the form
// of FlexAttention's BlockMask: blocks classified by the descriptor's tile classifier on
// uniform axes, and the visibility bits of the partial ones.
#pragma once

#include <compilemask/compilemask.h>

#include "specialize/row_intervals.h"

#include <vector>

namespace cm::descriptor {

// Pre: `instances` are non-empty, each valid for one (nq, nk) (check_instance); tiling passed
// check_tiling; every entry of instance_map indexes `instances`.
// Post: BlockGrid's rules (compilemask.h): instance_of = instance_map; codes per instance; a
// block is full only when it holds tiling.m x tiling.n pairs, all visible, and a partial
// block sees at least one pair and misses at least one.
// Cost: O(rows + intervals + blocks + the partial blocks' words), on parallel workers in bands
// of whole block rows (workers_for_work); rows given as grid formulas are expanded to
// intervals band by band, once, and held until their bits are set.
BlockGrid block_grid(const std::vector<InstanceRows>& instances, std::vector<int32_t> instance_map,
                     const Tiling& tiling);

}  // namespace cm::descriptor
