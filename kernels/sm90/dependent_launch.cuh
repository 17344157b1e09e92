// Launching a kernel as the previous kernel's programmatic dependent (the forward's fwd_combine
// after the main kernel, packed_rows.cu after each pass): it may be scheduled as the previous
// kernel's blocks exit, not only after its completion and a launch (a few microseconds of a
// decoding step), and waits in griddepcontrol.wait until that kernel's writes are visible.
#pragma once

#include <cuda_runtime_api.h>

namespace cm::sm90 {

template <class Kernel, class Params>
cudaError_t launch_dependent(Kernel kernel, dim3 grid, dim3 block, const Params& params,
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

// Waits until the primary kernel's writes are visible (a no-op without a primary). Every block
// of a dependent calls it, also one with nothing to do: the kernels after the dependent in the
// stream wait for the dependent alone, so its completion must imply the primary's.
__device__ __forceinline__ void wait_for_primary() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}

}  // namespace cm::sm90
