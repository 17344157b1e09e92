// Device helpers shared by the sm90 forward and backward kernels: issuing one warpgroup GEMM
// as a committed wgmma group, and the fast base-2 exponential of the softmax.
#pragma once

#include <cute/tensor.hpp>

#include <type_traits>

namespace cm::sm90 {

// Issues the wgmma k-blocks of C (+)= A B and commits them as one group; the caller waits
// (warpgroup_wait). C is zeroed first when kZeroInit. An A operand held in registers is fenced
// like the accumulator, so that the compiler does not defer its definition past the issue.
// Callers fence the accumulator (and a register A) again right after the matching wait, so
// that no read or write of those registers is scheduled while the wgmma may still use them.
template <bool kZeroInit, class Mma, class TA, class TB, class TC>
__device__ __forceinline__ void wgmma(Mma& mma, TA& a, const TB& b, TC& c) {
  constexpr bool kRegisterA =
      !std::is_same_v<std::remove_cv_t<typename TA::value_type>, cute::GmmaDescriptor>;
  if constexpr (kRegisterA) cute::warpgroup_fence_operand(a);
  cute::warpgroup_fence_operand(c);
  cute::warpgroup_arrive();
  mma.accumulate_ = kZeroInit ? cute::GMMA::ScaleOut::Zero : cute::GMMA::ScaleOut::One;
  CUTE_UNROLL
  for (int kb = 0; kb < cute::size<2>(a); ++kb) {
    cute::gemm(mma, a(cute::_, cute::_, kb), b(cute::_, cute::_, kb), c);
    mma.accumulate_ = cute::GMMA::ScaleOut::One;
  }
  cute::warpgroup_commit_batch();
  cute::warpgroup_fence_operand(c);
  if constexpr (kRegisterA) cute::warpgroup_fence_operand(a);
}

// 2^x by the special function unit (flushes denormals; exact 0 for x = -inf).
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace cm::sm90
