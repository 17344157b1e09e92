// Forward kernel instantiation: bf16, head dim 128.
#include "fwd_launch.cuh"

CM_SM90_INSTANTIATE_FORWARD(kBFloat16, 128, 128, true)
CM_SM90_INSTANTIATE_FORWARD(kBFloat16, 128, 128, false)
