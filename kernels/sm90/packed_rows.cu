// The packed layout's rows that no main kernel writes (packed_rows.h). Grid: (blocks of
// kCoverRows rows of the longer axis, one per axis). A block classifies its rows by the
// sequences that hold them, lists the rows left to it and writes them; a block with none only
// waits for the pass (every block, when all sequences fit and the caller keeps the rows outside
// them).
#include "dependent_launch.cuh"
#include "packed_rows.h"

namespace cm::sm90 {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    packed_rows(const __grid_constant__ PackedRowsParams p) {
  const RowsAxis& axis = p.axes[blockIdx.y];
  const int64_t total = axis.keys ? p.shape.total_k : p.shape.total_q;
  const int64_t first = int64_t{blockIdx.x} * kCoverRows;
  const int64_t rest = total - first;  // <= 0 in the blocks past the shorter axis
  const int count = static_cast<int>(rest <= 0 ? 0 : rest < kCoverRows ? rest : kCoverRows);
  const int t = static_cast<int>(threadIdx.x);

  __shared__ uint32_t cover[kCoverRows];
  __shared__ int32_t left[kCoverRows];  // the rows left to this block, in any order
  __shared__ int num_left;
  for (int r = t; r < kCoverRows; r += kThreads) cover[r] = 0;
  if (t == 0) num_left = 0;
  __syncthreads();
  cover_rows(p.shape, axis.keys, first, count, t, kThreads, cover);
  __syncthreads();
  for (int r = t; r < count; r += kThreads) {
    if (row_left(cover[r], p.write_outside)) left[atomicAdd(&num_left, 1)] = r;
  }
  __syncthreads();
  // The pass's writes first: a NaN row stays NaN where a sequence that fits shares it. Every
  // block waits, also one with no row to write, so that this kernel completes after the pass's
  // and the kernels that follow in the stream see the pass's writes.
  wait_for_primary();
  const int rows = num_left;
  if (rows == 0) return;
  for (int i = 0; i < axis.num_tensors; ++i) {
    const RowsTensor& tensor = axis.tensors[i];
    const int words = tensor.row_bytes / 4;
    const int row_words = axis.heads * words;
    for (int w = t; w < rows * row_words; w += kThreads) {
      const int r = left[w / row_words];
      const int h = w % row_words / words;
      char* at = static_cast<char*>(tensor.base) + (first + r) * tensor.row_stride +
                 h * tensor.head_stride + 4 * (w % words);
      *reinterpret_cast<uint32_t*>(at) = row_word(cover[r], tensor.outside_word);
    }
  }
}

}  // namespace

cudaError_t launch_packed_rows(const PackedRowsParams& params, cudaStream_t stream) {
  int64_t longest = 0;
  for (int i = 0; i < params.num_axes; ++i) {
    const int64_t total = params.axes[i].keys ? params.shape.total_k : params.shape.total_q;
    longest = total > longest ? total : longest;
  }
  const dim3 grid(static_cast<unsigned>((longest + kCoverRows - 1) / kCoverRows),
                  static_cast<unsigned>(params.num_axes));
  return launch_dependent(packed_rows, grid, dim3(kThreads), params, stream);
}

}  // namespace cm::sm90
