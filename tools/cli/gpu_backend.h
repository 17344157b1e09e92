// The GPU backend of `compilemask run --gpu`: the sm90 forward and backward kernels of
// include/compilemask/cuda.h and cuda_backward.h on the run's random problem. gpu_backend.cpp
// is compiled only in builds that have the cm_cuda library (they define CM_CLI_GPU); this
// header names no CUDA type.
#pragma once

#include "attention_backend.h"

namespace cm::cli {

enum class GpuDType { kBFloat16, kFloat16 };

// Checks that device 0 can run the sm90 kernels and returns the backend for `dtype`.
// Throws std::runtime_error "no CUDA device: ..." when the driver or the device is missing, and
// one naming the device when it is not compute capability 9.0.
//
// The backend's run(): uploads Q, K, V (and dO) in `dtype`, [B, H, S, D] layout (with
// BackendOptions::page_size, K and V in shuffled pools of pages [pages, H, page_size, D] whose
// slots without a key hold NaN); fills the outputs with NaN so that unwritten elements show;
// runs forward() (then backward() on the forward's own O and LSE) once to warm up and five more
// times; reports the median time by CUDA events and the key and head splits it ran with
// (AttentionResult::schedule: BackendOptions' counts, or the automatic ones for 0); returns the
// outputs converted to float. Its round_to_storage rounds to `dtype`. Preconditions (checked by
// `run` before): head_dim_supported(head_dim) (cuda_limits.h), the descriptor's tiles are
// 128x128, and no backward with pages.
AttentionBackend gpu_backend(GpuDType dtype);

}  // namespace cm::cli
