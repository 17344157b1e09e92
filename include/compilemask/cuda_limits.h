// What the sm90 kernels of cuda.h and cuda_backward.h accept, in a header free of CUDA types,
// so that code built without CUDA (the command-line tool's argument checks) can check it too.
#pragma once

#include <cstdint>

namespace cm::cuda {

// Head dims: multiples of 8 (16-byte rows for TMA and the vector stores). The forward and the
// backward have kernels for 64, 128 and 256, and the forward one for 192 with V's 128 (MLA);
// each runs the head dims between on the next larger kernel with zero-padded columns.
inline constexpr int32_t kMaxHeadDim = 256;

constexpr bool head_dim_supported(int32_t head_dim) {
  return head_dim >= 8 && head_dim <= kMaxHeadDim && head_dim % 8 == 0;
}

// That rule as the error messages state it.
inline constexpr const char* kHeadDimRule = "a multiple of 8 from 8 to 256";

// PagedKV::page_size: 16, 32 or 64 rows (each divides the 64 and 128 keys of a K/V stage, so a
// page is one TMA box and no box crosses a page), or a multiple of 128 (a stage lies in a page).
inline constexpr int32_t kMinPageSize = 16;

constexpr bool page_size_supported(int32_t page_size) {
  return page_size == 16 || page_size == 32 || page_size == 64 ||
         (page_size > 0 && page_size % 128 == 0);
}

// That rule as the error messages state it.
inline constexpr const char* kPageSizeRule = "16, 32, 64 or a multiple of 128";

// ForwardArgs::num_splits: 0 (automatic), 1 (keys not split) or up to kMaxSplits key parts.
inline constexpr int32_t kMaxSplits = 256;

}  // namespace cm::cuda
