// cm::cuda::to_storage_bits and from_storage_bits (include/compilemask/cuda.h), through CUDA's
// own host conversions, so that host data rounds exactly as the kernels' inputs do.
#include <compilemask/cuda.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cm::cuda {

uint16_t to_storage_bits(float x, DType dtype) {
  if (dtype == DType::kBFloat16) return static_cast<__nv_bfloat16_raw>(__float2bfloat16(x)).x;
  return static_cast<__half_raw>(__float2half(x)).x;
}

float from_storage_bits(uint16_t bits, DType dtype) {
  if (dtype == DType::kBFloat16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

}  // namespace cm::cuda
