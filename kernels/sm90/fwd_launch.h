// Host-side entry to the sm90 forward kernel instantiations (one .cu file per element type and
// head dims, so they compile in parallel). Callers validate the problem first (launch.cu).
#pragma once

#include "fwd_params.h"
#include "problem_shape.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace cm::sm90 {

enum class ElementKind { kBFloat16, kFloat16 };

// Keys per K/V pipeline stage (and per product) of the kernel whose O has kernel_head_dim_v
// columns: a whole 128-key tile, or at 256 half of one, whose scores and O then fit the
// consumers' registers (fwd_config.cuh). The launcher's K and V tensor maps load boxes of that
// many rows.
constexpr int forward_keys_per_stage(int kernel_head_dim_v) {
  return kernel_head_dim_v == 256 ? 64 : 128;
}

// The forward kernel that runs head dims d and dv: (64, 64) up to 64, (128, 128) up to 128,
// (192, 128) for Q and K up to 192 with V up to 128 (DeepSeek's MLA), else (256, 256).
constexpr KernelDims forward_kernel_dims(int d, int dv) {
  const int widest = d > dv ? d : dv;
  if (widest <= 64) return {64, 64};
  if (widest <= 128) return {128, 128};
  if (d <= 192 && dv <= 128) return {192, 128};
  return {256, 256};
}

// Launches the persistent kernel on `grid` CTAs. Returns the launch's error code. kLogitMods:
// the logits' modifications that params asks for (logit_mods.h).
template <ElementKind kElement, int kHeadDim, int kHeadDimV, bool kIntraOverlap, int kLogitMods>
cudaError_t launch_forward(const FwdParams& params, const CUtensorMap& q, const CUtensorMap& k,
                           const CUtensorMap& v, int grid, cudaStream_t stream);

// Launches the combine kernel of split keys (fwd_combine.cu) after the forward kernel: O and the
// LSE of every row from its params.num_splits parts.
cudaError_t launch_combine(ElementKind element, const FwdParams& params, cudaStream_t stream);

}  // namespace cm::sm90
