// Forward kernel instantiation: fp16, head dim 256.
#include "fwd_launch.cuh"

CM_SM90_INSTANTIATE_FORWARD(kFloat16, 256, 256, true)
CM_SM90_INSTANTIATE_FORWARD(kFloat16, 256, 256, false)
