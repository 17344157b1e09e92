// Launching a kernel as the previous kernel's programmatic dependent (the forward's fwd_combine
// and fwd_nan_rows after the main kernel): it may be scheduled as the main kernel's blocks exit,
// not only after its completion and a launch (a few microseconds of a decoding step), and waits
// in griddepcontrol.wait until the main kernel's writes are visible.
#pragma once

#include "fwd_params.h"

#include <cuda_runtime_api.h>

namespace cm::sm90 {

template <class Kernel>
cudaError_t launch_dependent(Kernel kernel, dim3 grid, dim3 block, const FwdParams& params,
                             cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  cudaLaunchAttribute dependent{};
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &dependent;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, params);
}

// Waits until the primary kernel's writes are visible (a no-op without a primary).
__device__ __forceinline__ void wait_for_primary() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

}  // namespace cm::sm90
