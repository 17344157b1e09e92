// The gradient of the attention sinks (cm::cuda::BackwardArgs::dsinks). A sink is a key of logit
// sinks[h] and value 0 in every row of query head h, so its dP is 0 and its dS in a row is
// P_sink (0 - dsum) with P_sink = exp(sink - LSE): dsinks[h] = -sum over the head's rows of every
// batch row of exp2(sink log2(e) - lse_log2) dsum, from the preprocess's workspace rows
// (bwd_params.h), whose padding rows (lse_log2 +inf, dsum 0) add exactly 0. One block per head
// sums in a fixed order, so the result is bitwise reproducible in either mode. A packed sequence
// that does not fit its tensors makes its heads' gradients NaN, as it makes its rows NaN.
#include "bwd_launch.h"
#include "thread_helpers.cuh"

namespace cm::sm90 {
namespace {

constexpr int kSinkThreads = 512;
constexpr int kSinkWarps = kSinkThreads / 32;

__global__ void __launch_bounds__(kSinkThreads)
    bwd_sink_gradient(const __grid_constant__ SinkGradientParams p) {
  const int h = static_cast<int>(blockIdx.x);
  const BwdShape& s = p.shape;
  const float sink_log2 = p.sinks[h] * 1.4426950408889634f;
  float sum = 0.f;
  if (sink_log2 != kNegInf) {  // else no sink: exp2(-inf - lse_log2) could be NaN
    for (int b = 0; b < s.batch; ++b) {
      if (!sequence_fits(s, b)) sum = __builtin_nanf("");
      const int64_t rows = (int64_t{b} * s.heads_q + h) * s.rows_padded;
#pragma unroll 4
      for (int r = static_cast<int>(threadIdx.x); r < s.rows_padded; r += kSinkThreads) {
        sum -= exp2f(sink_log2 - p.lse_log2[rows + r]) * p.dsum[rows + r];
      }
    }
  }
  for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  __shared__ float warp_sums[kSinkWarps];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int w = 0; w < kSinkWarps; ++w) total += warp_sums[w];
    p.dsinks[h] = total;
  }
}

}  // namespace

cudaError_t launch_sink_gradient(const SinkGradientParams& params, cudaStream_t stream) {
  bwd_sink_gradient<<<static_cast<unsigned>(params.shape.heads_q), kSinkThreads, 0, stream>>>(
      params);
  return cudaGetLastError();
}

}  // namespace cm::sm90
