// Definitions behind fwd_launch.h, included once per instantiation file.
#pragma once

#include "fwd_kernel.cuh"
#include "fwd_launch.h"

#include <cutlass/numeric_types.h>

namespace cm::sm90 {

template <ElementKind kElement>
using ElementOf =
    std::conditional_t<kElement == ElementKind::kBFloat16, cutlass::bfloat16_t, cutlass::half_t>;

template <ElementKind kElement, int kHeadDim, bool kIntraOverlap, bool kModifiedLogits>
cudaError_t launch_forward(const FwdParams& params, const CUtensorMap& q, const CUtensorMap& k,
                           const CUtensorMap& v, int grid, cudaStream_t stream) {
  using Config = FwdConfig<ElementOf<kElement>, kHeadDim, kIntraOverlap, kModifiedLogits>;
  const auto kernel = fwd_kernel<Config>;
  const cudaError_t status = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Config::kSmemBytes));
  if (status != cudaSuccess) return status;
  kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(params, q, k, v);
  return cudaGetLastError();
}

}  // namespace cm::sm90

// Explicit instantiation of one (element, head dim, mainloop variant), with and without the cap.
#define CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, OVERLAP, MODIFIED)                   \
  template cudaError_t                                                                             \
  cm::sm90::launch_forward<cm::sm90::ElementKind::ELEMENT, HEAD_DIM, OVERLAP, MODIFIED>(           \
      const cm::sm90::FwdParams&, const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, int, \
      cudaStream_t);
#define CM_SM90_INSTANTIATE_FORWARD(ELEMENT, HEAD_DIM, OVERLAP)         \
  CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, OVERLAP, false) \
  CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, OVERLAP, true)
