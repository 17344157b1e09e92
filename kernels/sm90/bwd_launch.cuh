// Definitions behind bwd_launch.h, included once per instantiation file.
#pragma once

#include "bwd_kernel.cuh"
#include "bwd_launch.h"
#include "bwd_prepost.cuh"
#include "logit_mods.h"
#include "with_flags.h"

#include <cutlass/numeric_types.h>

#include <type_traits>

namespace cm::sm90 {

template <ElementKind kElement>
using BwdElement =
    std::conditional_t<kElement == ElementKind::kBFloat16, cutlass::bfloat16_t, cutlass::half_t>;

template <class Config, bool kDeterministic, int kLogitMods, bool kHeadSplits>
cudaError_t launch_bwd_main(const BwdMainParams& params, const CUtensorMap& q, const CUtensorMap& k,
                            const CUtensorMap& v, const CUtensorMap& dout, cudaStream_t stream) {
  const auto kernel = bwd_kernel<Config, kDeterministic, kLogitMods, kHeadSplits>;
  const cudaError_t status = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Config::kSmemBytes));
  if (status != cudaSuccess) return status;
  const dim3 grid = bwd_main_grid(params.shape, Config::kKeyParts);
  kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(params, q, k, v, dout);
  return cudaGetLastError();
}

template <ElementKind kElement, int kHeadDim, int kHeadDimV>
cudaError_t launch_backward(const BwdPrepParams& prep, const BwdMainParams& main,
                            const BwdPostParams& post, const BwdKvPostParams& kv_post,
                            const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                            const CUtensorMap& dout, bool deterministic, cudaStream_t stream) {
  using Element = BwdElement<kElement>;
  using Config = BwdConfig<Element, kHeadDim, kHeadDimV>;
  const BwdShape& s = prep.shape;
  const dim3 prep_grid(static_cast<unsigned>(s.rows_padded / kPrepostRows),
                       static_cast<unsigned>(s.heads_q), static_cast<unsigned>(s.batch));
  bwd_preprocess<Element, kHeadDim><<<prep_grid, kPrepostThreads, 0, stream>>>(prep);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;

  status = with_flags(
      [&]<bool kDeterministic, bool kCapped, bool kAlibi, bool kHeadSplits>() {
        return launch_bwd_main<Config, kDeterministic, logit_mods(kCapped, kAlibi), kHeadSplits>(
            main, q, k, v, dout, stream);
      },
      deterministic, main.softcap_scale != 0.f, main.alibi_slopes != nullptr, s.head_splits > 1);
  if (status != cudaSuccess) return status;

  const dim3 post_grid(static_cast<unsigned>(s.rows_padded / kPrepostRows),
                       static_cast<unsigned>(s.heads_q), static_cast<unsigned>(s.batch));
  bwd_postprocess<Element, kHeadDim><<<post_grid, kPrepostThreads, 0, stream>>>(post);
  if (s.head_splits == 1) return cudaGetLastError();
  status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  const dim3 kv_grid(static_cast<unsigned>(s.k_rows_padded / kPrepostRows),
                     static_cast<unsigned>(s.heads_kv), static_cast<unsigned>(s.batch));
  bwd_kv_postprocess<Element, kHeadDim, kHeadDimV>
      <<<kv_grid, kPrepostThreads, 0, stream>>>(kv_post);
  return cudaGetLastError();
}

}  // namespace cm::sm90

// Explicit instantiation of one (element, head dims).
#define CM_SM90_INSTANTIATE_BACKWARD(ELEMENT, HEAD_DIM, HEAD_DIM_V)                         \
  template cudaError_t                                                                      \
  cm::sm90::launch_backward<cm::sm90::ElementKind::ELEMENT, HEAD_DIM, HEAD_DIM_V>(          \
      const cm::sm90::BwdPrepParams&, const cm::sm90::BwdMainParams&,                       \
      const cm::sm90::BwdPostParams&, const cm::sm90::BwdKvPostParams&, const CUtensorMap&, \
      const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, bool, cudaStream_t);
