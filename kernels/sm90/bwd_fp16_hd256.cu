// Backward kernel instantiation: fp16, head dim 256.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kFloat16, 256, 256)
