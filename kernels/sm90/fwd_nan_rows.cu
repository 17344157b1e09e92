// The packed layout's sequences that do not fit their tensors (sequence_fits, problem_shape.h),
// to which the main kernel gives no rows (fwd_work.cuh): NaN on their rows of O and the LSE that
// lie in the tensors (nan_rows.cuh). Launched after the main kernel for the packed layout
// without split parts (fwd_combine writes those rows itself). A separate kernel, not a branch
// of the main kernel's loader, where the code changed ptxas's work for the mask warps and
// doc_causal's forward measured 1-2% slower (runs 226-228).
#include "dependent_launch.cuh"
#include "fwd_launch.h"
#include "nan_rows.cuh"

namespace cm::sm90 {
namespace {

constexpr int kThreads = 128;

// One block per (sequence, query head); the blocks of a sequence that fits exit at once.
__global__ void __launch_bounds__(kThreads) fwd_nan_rows(const __grid_constant__ FwdParams p) {
  const int b = static_cast<int>(blockIdx.x) / p.heads_q;
  const int h = static_cast<int>(blockIdx.x) % p.heads_q;
  if (sequence_fits(p, b)) return;
  wait_for_primary();            // the rows are NaN, whatever an overlapping sequence wrote there
  constexpr int64_t kBytes = 2;  // bf16 and fp16
  const int64_t first = p.q_offsets[b];
  const int t = static_cast<int>(threadIdx.x);
  fill_nan_rows(static_cast<char*>(p.out) + h * p.out_stride_h * kBytes, first, p.nq, p.total_q,
                p.out_stride_s * kBytes, p.head_dim * int{kBytes}, t, kThreads);
  fill_nan_rows(p.lse + h * p.lse_stride_h, first, p.nq, p.total_q, sizeof(float), sizeof(float), t,
                kThreads);
}

}  // namespace

cudaError_t launch_nan_rows(const FwdParams& params, cudaStream_t stream) {
  return launch_dependent(fwd_nan_rows, dim3(static_cast<unsigned>(params.batch * params.heads_q)),
                          dim3(kThreads), params, stream);
}

}  // namespace cm::sm90
