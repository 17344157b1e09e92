// What the sm90 kernels of cuda.h and cuda_backward.h accept, in a header free of CUDA types,
// so that code built without CUDA (the command-line tool's argument checks) can check it too.
#pragma once

#include <cstdint>

namespace cm::cuda {

enum class Pass { kForward, kBackward };

// Head dims: multiples of 8 (16-byte rows for TMA and the vector stores). The forward has
// kernels for 64, 128 and 256, the backward for 64 and 128; each runs the head dims between
// on the next larger kernel with zero-padded columns. The backward stops at 128: a CTA keeps
// dK and dV of its 128 keys in registers, which at head dim 256 would take the whole register
// file (docs/perf-notes.md, "Head dim 256").
constexpr int32_t max_head_dim(Pass pass) {
  return pass == Pass::kForward ? 256 : 128;
}

constexpr bool head_dim_supported(int32_t head_dim, Pass pass) {
  return head_dim >= 8 && head_dim <= max_head_dim(pass) && head_dim % 8 == 0;
}

// That rule as the error messages state it.
constexpr const char* head_dim_rule(Pass pass) {
  return pass == Pass::kForward ? "a multiple of 8 from 8 to 256 (the backward: to 128)"
                                : "a multiple of 8 from 8 to 128 (the forward: to 256)";
}

}  // namespace cm::cuda
