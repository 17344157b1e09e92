# The sm90 backward kernels, added to the targets of kernels/CMakeLists.txt; include this file
# at its end: include(sm90/bwd.cmake).
#   cm_cuda            + the backward launcher (include/compilemask/cuda_backward.h) and the
#                        kernel instantiations, one file per (dtype, head dim)
#   compilemask_cuda   + the extern "C" backward entry (bwd_c_api.cu), for Python ctypes
target_sources(cm_cuda PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/bwd_host.cu
  ${CMAKE_CURRENT_LIST_DIR}/bwd_bf16_hd64.cu
  ${CMAKE_CURRENT_LIST_DIR}/bwd_bf16_hd128.cu
  ${CMAKE_CURRENT_LIST_DIR}/bwd_fp16_hd64.cu
  ${CMAKE_CURRENT_LIST_DIR}/bwd_fp16_hd128.cu)
target_sources(compilemask_cuda PRIVATE ${CMAKE_CURRENT_LIST_DIR}/bwd_c_api.cu)
