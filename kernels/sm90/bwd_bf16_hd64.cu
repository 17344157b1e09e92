// Backward kernel instantiation: bf16, head dim 64.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kBFloat16, 64, 64)
