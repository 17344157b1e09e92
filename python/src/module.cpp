// compilemask._core: the framework-neutral core of the Python package. Python wraps it in
// compilemask/*.py; nothing here is meant to be called by users directly.
#include "bindings.h"

#include <compilemask/cuda_limits.h>

NB_MODULE(_core, m) {
  m.doc() = "CompileMask core bindings (use the compilemask package, not this module)";
  cm::python::bind_plan(m);
  cm::python::bind_mask(m);
  cm::python::bind_reference(m);
  // The sm90 kernels' head-dim and page-size rules (cuda_limits.h, free of CUDA types), which
  // cm.attention checks before anything reaches the GPU; exported so that Python does not
  // restate them.
  m.def("head_dim_supported", &cm::cuda::head_dim_supported, nanobind::arg("head_dim"));
  m.attr("MAX_HEAD_DIM") = cm::cuda::kMaxHeadDim;
  m.attr("HEAD_DIM_RULE") = cm::cuda::kHeadDimRule;
  m.attr("MAX_SPLITS") = cm::cuda::kMaxSplits;
  m.def("page_size_supported", &cm::cuda::page_size_supported, nanobind::arg("page_size"));
  m.attr("PAGE_SIZE_RULE") = cm::cuda::kPageSizeRule;
}
