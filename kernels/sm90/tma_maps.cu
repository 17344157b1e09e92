// TMA tensor maps over the 16-bit attention tensors (tma_maps.h).
#include "tma_maps.h"

#include <string>

namespace cm::cuda::host {
namespace {

constexpr int kBoxCols = 64;  // TMA box width in elements (128 bytes)

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled, found through the runtime (no link against libcuda).
EncodeTiled encode_tiled(const LaunchChecks& check) {
  static const EncodeTiled fn = [&check] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check.cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                cudaEnableDefault, &found),
               "looking up cuTensorMapEncodeTiled");
    if (found != cudaDriverEntryPointSuccess || ptr == nullptr) {
      throw CudaError(std::string(check.entry()) + ": the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<EncodeTiled>(ptr);
  }();
  return fn;
}

}  // namespace

CUtensorMap make_tile_map(const LaunchChecks& check, const TensorRef& t, DType dtype, int head_dim,
                          int64_t rows, int heads, int batch, bool packed, int box_rows,
                          int box_heads) {
  const cuuint64_t bytes = 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(packed ? 1 : batch)};
  const int64_t stride_b = packed ? t.stride_s * rows : t.stride_b;
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(t.stride_s) * bytes,
                                 static_cast<cuuint64_t>(t.stride_h) * bytes,
                                 static_cast<cuuint64_t>(stride_b) * bytes};
  const cuuint32_t box[4] = {kBoxCols, static_cast<cuuint32_t>(box_rows),
                             static_cast<cuuint32_t>(box_heads), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  check.bind_device_context();
  const CUresult status =
      encode_tiled(check)(&map,
                          dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                    : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                          4, const_cast<void*>(t.data), dims, strides, box, element_strides,
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status == CUDA_ERROR_INVALID_VALUE) {
    throw Error(std::string(check.entry()) +
                ": cuTensorMapEncodeTiled rejected a tensor; strides must be below 2^40 bytes and "
                "the rows below 2^32");
  }
  if (status != CUDA_SUCCESS) {
    throw CudaError(std::string(check.entry()) + ": cuTensorMapEncodeTiled failed (CUresult " +
                    std::to_string(static_cast<int>(status)) + ")");
  }
  return map;
}

}  // namespace cm::cuda::host
