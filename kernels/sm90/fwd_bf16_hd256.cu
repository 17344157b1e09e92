// Forward kernel instantiation: bf16, head dim 256.
#include "fwd_launch.cuh"

CM_SM90_INSTANTIATE_FORWARD(kBFloat16, 256, 256, true)
CM_SM90_INSTANTIATE_FORWARD(kBFloat16, 256, 256, false)
