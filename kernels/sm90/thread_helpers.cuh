// Per-thread helpers shared by the sm90 forward and backward kernels.
#pragma once

#include <cstdint>

namespace cm::sm90 {

inline constexpr float kNegInf = -__builtin_huge_valf();

// threadIdx.x, re-read from %tid.x where it is used and unknown to the optimiser: addresses
// computed from it are computed there, instead of being hoisted out of a mainloop into
// registers that the mainloop then spills.
__device__ __forceinline__ int fresh_thread_index() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// tanh by the special function unit (tanh.approx.f32, relative error about 2^-11), for
// soft-capped logits: one instruction, where an accurate tanh takes an exponential and a
// reciprocal on the same unit that the softmax's exponentials already load.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Stores x and y, converted to Element, as the adjacent elements dst[0] and dst[1] in one
// 32-bit store (dst 4-byte aligned). Assigning a two-element cute::array instead compiled to
// two 16-bit stores in the backward, which measured 4-11% slower (bench/gpu/ab.py).
template <class Element, class T>
__device__ __forceinline__ void store_pair(Element* dst, T x, T y) {
  static_assert(sizeof(Element) == 2, "a pair of 16-bit elements");
  const Element pair[2] = {static_cast<Element>(x), static_cast<Element>(y)};
  *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(pair);
}

}  // namespace cm::sm90
