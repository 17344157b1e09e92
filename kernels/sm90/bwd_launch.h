// Host-side entry to the sm90 backward kernels, one instantiation file per element type and
// head dims (bwd_<dtype>_hd<D>.cu) so they compile in parallel. Callers validate the problem
// and lay out the workspace first (bwd_launch.cu).
#pragma once

#include "bwd_params.h"
#include "fwd_launch.h"  // ElementKind

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace cm::sm90 {

// Keys per CTA of the backward main kernel whose Q and K have kernel_head_dim columns: a whole
// 128-key tile, or above 128 (192 and 256) half of one, whose dK and dV then fit the consumers'
// registers (bwd_config.cuh). The launcher's K and V tensor maps load boxes of that many rows.
constexpr int backward_keys_per_item(int kernel_head_dim) {
  return kernel_head_dim > 128 ? 64 : 128;
}

// The backward kernel that runs head dims d and dv: (64, 64) up to 64, (128, 128) up to 128,
// (256, 128) for Q and K above 128 with V up to 128 (DeepSeek's MLA: 192 and 128), else
// (256, 256). Q's and K's columns stay 256 there: the design above 128 splits them between the
// two warpgroups, and 192's halves (96) are not whole 128-byte swizzle atoms of the MN-major
// operands of dK and dQ.
constexpr KernelDims backward_kernel_dims(int d, int dv) {
  const int widest = d > dv ? d : dv;
  if (widest <= 64) return {64, 64};
  if (widest <= 128) return {128, 128};
  if (dv <= 128) return {256, 128};
  return {256, 256};
}

// Enqueues preprocess, main kernel and postprocess on `stream`, and the kv postprocess when
// BwdShape::head_splits is more than 1. The main kernel runs one CTA per backward_keys_per_item
// keys of every key tile of every kv slice and head split. Returns the first launch error.
template <ElementKind kElement, int kHeadDim, int kHeadDimV>
cudaError_t launch_backward(const BwdPrepParams& prep, const BwdMainParams& main,
                            const BwdPostParams& post, const BwdKvPostParams& kv_post,
                            const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                            const CUtensorMap& dout, bool deterministic, cudaStream_t stream);

// Enqueues bwd_sink_gradient (bwd_sink_gradient.cu) on `stream`, after the preprocess that
// fills the workspace rows it reads: dsinks[h] for every query head h.
cudaError_t launch_sink_gradient(const SinkGradientParams& params, cudaStream_t stream);

}  // namespace cm::sm90
