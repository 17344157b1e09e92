// Forward kernel instantiation: fp16, head dim 64.
#include "fwd_launch.cuh"

CM_SM90_INSTANTIATE_FORWARD(kFloat16, 64, 64, true)
CM_SM90_INSTANTIATE_FORWARD(kFloat16, 64, 64, false)
