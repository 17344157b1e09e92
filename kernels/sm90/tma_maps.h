// TMA tensor maps over the 16-bit attention tensors, shared by the sm90 forward and backward
// launchers. Encoding goes through the driver's cuTensorMapEncodeTiled, found through the
// runtime, so nothing links against libcuda.
#pragma once

#include "host_checks.h"

#include <compilemask/cuda.h>

#include <cuda.h>

#include <cstdint>

namespace cm::cuda::host {

// A 4-D map (head_dim, rows, heads, batch) over `t` with boxes of 64 columns by box_rows rows by
// box_heads heads (laid out head by head) and 128-byte swizzle; rows outside the tensor read as
// zeros. A packed tensor is one batch of `rows` rows. Throws through `check` (naming its entry
// point) when the driver has no encoder or rejects the tensor.
CUtensorMap make_tile_map(const LaunchChecks& check, const TensorRef& t, DType dtype, int head_dim,
                          int64_t rows, int heads, int batch, bool packed, int box_rows,
                          int box_heads = 1);

}  // namespace cm::cuda::host
