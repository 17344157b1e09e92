// What the sm90 kernels of cuda.h and cuda_backward.h accept, in a header free of CUDA types,
// so that code built without CUDA (the command-line tool's argument checks) can check it too.
#pragma once

#include <cstdint>

namespace cm::cuda {

// Head dims: multiples of 8 (16-byte rows for TMA and the vector stores) from 8 to 128. The
// kernels for 64 and 128 run the others with zero-padded columns.
constexpr bool head_dim_supported(int32_t head_dim) {
  return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0;
}

// That rule as the error messages state it.
inline constexpr const char* kHeadDimRule = "a multiple of 8 from 8 to 128";

}  // namespace cm::cuda
