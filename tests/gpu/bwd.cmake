# GPU tests of the sm90 backward kernel; include this file at the end of
# tests/gpu/CMakeLists.txt: include(bwd.cmake).
#   gpu_bwd_layout_test     host only (no GPU needed): the kernel's hand-computed shared-memory
#                           offsets and fragment coordinates against CuTe's layouts
#   gpu_backward_test       C++: the kernel against the float64 CPU reference from the
#                           descriptor for every example mask, determinism, graph capture,
#                           launcher validation (skips without a Hopper GPU)
#   gpu_backward_dense      Python/torch: against dense float64 references from the
#                           workloads.py predicates; exit code 77 means skipped
cm_add_gtest(gpu_bwd_layout_test LABEL unit
  LIBS cm_cuda_flags
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/bwd_layout_test.cu)
target_include_directories(gpu_bwd_layout_test PRIVATE ${PROJECT_SOURCE_DIR}/kernels/sm90)
set_target_properties(gpu_bwd_layout_test PROPERTIES CUDA_ARCHITECTURES OFF CUDA_STANDARD 20)

cm_add_gtest(gpu_backward_test LABEL gpu
  LIBS cm_cuda compilemask
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/bwd_reference_test.cpp)

find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME gpu_backward_dense
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/bwd_test.py
      --cli $<TARGET_FILE:compilemask_cli> --lib $<TARGET_FILE:compilemask_cuda>
      --examples ${PROJECT_SOURCE_DIR}/examples
      --workloads ${PROJECT_SOURCE_DIR}/../shared/reference)
  set_tests_properties(gpu_backward_dense PROPERTIES LABELS gpu SKIP_RETURN_CODE 77)
endif()
