// Backward kernel instantiation: fp16, head dim 256 for Q and K and 128 for V and O, which runs
// DeepSeek's multi-head latent attention (192 and 128) with Q's and K's columns zero-padded.
#include "bwd_launch.cuh"

CM_SM90_INSTANTIATE_BACKWARD(kFloat16, 256, 128)
