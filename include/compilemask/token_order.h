// Token orders on the host: the permutation between a model's row-major grid of tokens and the
// strip order a mask may be stated in (docs/language.md, "Strip order").
//
// A mask written on `strip_grid(start, rows, cols, strip)` expects its grid tokens strip by
// strip, each strip row by row. Attention commutes with a permutation of the tokens, so a
// caller holding row-major tensors gathers them into that order (cm::cuda::permute_rows,
// cuda_token_order.h), attends with the strip plan, and gathers the result back:
//
//   std::vector<int64_t> order = cm::strip_order({.start = 512, .rows = 180, .cols = 180,
//                                                 .strip = 16}, 512 + 180 * 180);
//   // position i of the mask's sequence is row-major token order[i]
#pragma once

#include <cstdint>
#include <vector>

namespace cm {

// A grid of frames x rows x cols tokens from token `start`, each frame cut into strips of
// `strip` columns (the last one narrower when strip does not divide cols; strip >= cols is
// row-major).
struct StripGrid {
  int64_t start = 0;
  int64_t frames = 1;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t strip = 0;
};

// The permutation `order` of [0, total): position i of the strip-ordered sequence holds
// row-major token order[i]; tokens outside the grid keep their places. It places each token
// with the function the compiler and the kernels use for strip grids (desc::grid_offset).
// Throws cm::Error naming the rule for a start below 0, a frames, rows, cols or strip below 1,
// a grid that does not fit in `total` tokens, or a total of 2^31 tokens or more (the kernels
// index tokens with 32 bits).
std::vector<int64_t> strip_order(const StripGrid& grid, int64_t total);

}  // namespace cm
