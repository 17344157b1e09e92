// Expected times of a plan's sm90 kernels on an H200 at head dim 128, from its tile counts
// (Mask::count_tiles or PlanStats). They exist to rank plans that mean the same attention, such
// as a row-major plan and a strip plan with its token order (compilemask.PlanChoice in Python,
// `compilemask compile --estimate`): only how two estimates compare is meant to hold.
//
// Calibration (docs/perf-notes.md, sessions 18, 22 and 23):
// - the forward computes whole tiles: 1.62 µs of one SM for a full 128 x 128 tile and 2.0 µs
//   for a partial one (1.78 on doc_causal's causal diagonals to 2.2 on clear's disks);
// - the backward skips the 64-row halves of a tile that see nothing, so its work is counted in
//   halves, the tiles of backward_halves(tiling): 2.8 µs for a half of a full tile and 3.8 µs
//   for one of a partial tile (fitted to eleven masks and orders of run 150, each within 10%);
// - 132 SMs; a query tile's fixed cost is left out, as plans of one meaning share their query
//   tiles; other tile sizes and head dims scale the terms alike.
#pragma once

#include <compilemask/compilemask.h>

#include <cstdint>

namespace cm {

// Seconds for one forward over `masks` = batch x heads masks, of which `counts` holds the
// distinct ones (each standing for an equal share).
double estimated_forward_seconds(const TileCounts& counts, const Tiling& tiling, int64_t masks);

// The tiling whose tiles are the backward's halves of `tiling`'s.
Tiling backward_halves(const Tiling& tiling);

// Seconds for one backward; `halves` are the plan's mask counted at halves_tiling =
// backward_halves(the plan's tiling).
double estimated_backward_seconds(const TileCounts& halves, const Tiling& halves_tiling,
                                  int64_t masks);

// Seconds for one pass's gathers into a token order and back, as compilemask.attention runs
// them (cm::cuda::permute_rows, 0.075 ms per 134 MB): q, k and v in and out back in the
// forward; the gradient of out in and dq, dk and dv back in the backward. Four
// [batch, rows, heads, 128] bf16 tensors.
double estimated_gather_seconds(int64_t batch, int64_t rows, int64_t heads);

}  // namespace cm
