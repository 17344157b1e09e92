// Backward kernel instantiation: bf16, head dim 256.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kBFloat16, 256, 256)
