// Backward kernel instantiation: bf16, head dim 128.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kBFloat16, 128, 128)
