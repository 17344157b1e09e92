// Forward kernel instantiation: fp16, head dim 192 for Q and K and 128 for V and O (DeepSeek's
// multi-head latent attention).
#include "fwd_launch.cuh"

CM_SM90_INSTANTIATE_FORWARD(kFloat16, 192, 128, true)
CM_SM90_INSTANTIATE_FORWARD(kFloat16, 192, 128, false)
