// Host-side entry to the sm90 backward kernels, one instantiation file per element type and
// head dim (bwd_<dtype>_hd<D>.cu) so they compile in parallel. Callers validate the problem
// and lay out the workspace first (bwd_launch.cu).
#pragma once

#include "bwd_params.h"
#include "fwd_launch.h"  // ElementKind

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace cm::sm90 {

// Enqueues preprocess, main kernel and postprocess on `stream`. The main kernel's grid is
// (batch * heads_kv, num_k_tiles). Returns the first launch error.
template <ElementKind kElement, int kHeadDim>
cudaError_t launch_backward(const BwdPrepParams& prep, const BwdMainParams& main,
                            const BwdPostParams& post, const CUtensorMap& q, const CUtensorMap& k,
                            const CUtensorMap& v, const CUtensorMap& dout, bool deterministic,
                            cudaStream_t stream);

}  // namespace cm::sm90
