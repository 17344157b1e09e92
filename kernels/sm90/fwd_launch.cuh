// Definitions behind fwd_launch.h, included once per instantiation file.
#pragma once

#include "fwd_kernel.cuh"
#include "fwd_launch.h"

#include <cutlass/numeric_types.h>

namespace cm::sm90 {

template <ElementKind kElement>
using ElementOf =
    std::conditional_t<kElement == ElementKind::kBFloat16, cutlass::bfloat16_t, cutlass::half_t>;

template <ElementKind kElement, int kHeadDim, int kHeadDimV, bool kIntraOverlap, int kLogitMods>
cudaError_t launch_forward(const FwdParams& params, const CUtensorMap& q, const CUtensorMap& k,
                           const CUtensorMap& v, int grid, cudaStream_t stream) {
  using Config = FwdConfig<ElementOf<kElement>, kHeadDim, kHeadDimV, kIntraOverlap, kLogitMods>;
  const auto kernel = fwd_kernel<Config>;
  const cudaError_t status = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Config::kSmemBytes));
  if (status != cudaSuccess) return status;
  kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(params, q, k, v);
  return cudaGetLastError();
}

}  // namespace cm::sm90

// Explicit instantiation of one (element, head dims, mainloop variant), for each combination of
// the logits' modifications (logit_mods.h).
#define CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP, MODS)           \
  template cudaError_t                                                                             \
  cm::sm90::launch_forward<cm::sm90::ElementKind::ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP, MODS>(   \
      const cm::sm90::FwdParams&, const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, int, \
      cudaStream_t);
#define CM_SM90_INSTANTIATE_FORWARD(ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP)     \
  CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP, 0) \
  CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP,    \
                                     cm::sm90::kCappedLogits)                   \
  CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP,    \
                                     cm::sm90::kAlibiLogits)                    \
  CM_SM90_INSTANTIATE_FORWARD_LOGITS(ELEMENT, HEAD_DIM, HEAD_DIM_V, OVERLAP,    \
                                     cm::sm90::kCappedLogits | cm::sm90::kAlibiLogits)
