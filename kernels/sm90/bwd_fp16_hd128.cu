// Backward kernel instantiation: fp16, head dim 128.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kFloat16, 128, 128)
