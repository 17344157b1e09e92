// Token orders on the GPU: the rows of a tensor gathered into a permutation of its sequence.
//
// A mask may be stated on its tokens in another order than the model's: CLEAR's image in
// strips of 16 columns computes about half the tiles of its row-major order (docs/language.md,
// "Strip order"). Attention commutes with a permutation of the tokens, so a caller gathers q, k
// and v into the mask's order, attends, and gathers the results back with the inverse order.
// cm::strip_order (token_order.h) gives the order of a strip grid; compilemask.attention does
// all of this itself for a plan with a token order (docs/python.md).
//
//   cm::cuda::permute_rows(q, q_in_mask_order, batch, heads, rows, head_dim, order, stream);
//
// permute_rows is stream-ordered, allocates nothing and can be captured in a CUDA graph.
#pragma once

#include <compilemask/cuda.h>

#include <cstdint>

namespace cm::cuda {

// Row s of dst is row order[s] of src, for every batch and head: rows of head_dim 16-bit
// elements (bf16 or fp16) of [batch, rows, heads, head_dim] tensors by element strides
// (TensorRef; src and dst may have different strides, and must not overlap). order: device
// int32[rows], a permutation of [0, rows) (compilemask.Plan checks one when it is given; here
// it is not read on the host). An entry outside [0, rows) gives a row of NaN instead of a read
// out of bounds. Throws cm::Error naming the rule for bad sizes, strides or alignment (head_dim
// a multiple of 8, strides positive multiples of 8 elements, data 16-byte aligned) and
// CudaError for a failed launch.
void permute_rows(const TensorRef& src, const TensorRef& dst, int32_t batch, int32_t heads,
                  int32_t rows, int32_t head_dim, const int32_t* order, cudaStream_t stream);

}  // namespace cm::cuda
