// Backward kernel instantiation: fp16, head dim 64.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kFloat16, 64, 64)
