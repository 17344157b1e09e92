// Forward kernel instantiation: bf16, head dim 64.
#include "fwd_launch.cuh"

CM_SM90_INSTANTIATE_FORWARD(kBFloat16, 64, 64, true)
CM_SM90_INSTANTIATE_FORWARD(kBFloat16, 64, 64, false)
