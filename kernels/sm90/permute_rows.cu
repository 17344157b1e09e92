// cm::cuda::permute_rows (include/compilemask/cuda_token_order.h): a gather of rows by 16-byte
// chunks. It moves bytes only, so one kernel serves bf16 and fp16.
#include "host_checks.h"

#include <compilemask/cuda_token_order.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

namespace cm::cuda {
namespace {

constexpr int kChunkElements = 8;  // 16 bytes of 16-bit elements
constexpr int kThreads = 256;

struct RowGather {
  const uint4* src;
  uint4* dst;
  int64_t src_b, src_s, src_h;  // strides in chunks
  int64_t dst_b, dst_s, dst_h;
  int32_t heads, rows, chunks_per_row;
  int64_t chunks;  // batch * rows * heads * chunks_per_row
};

// Chunk i is (b, s, h, c) with c fastest, then h: a token's heads are read together, so each
// order entry is read once per token and, in [B, S, H, D], a token's row is one run.
__global__ void __launch_bounds__(kThreads)
    permute_rows_kernel(const RowGather g, const int32_t* order) {
  const int64_t step = int64_t{gridDim.x} * kThreads;
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i < g.chunks; i += step) {
    const int64_t c = i % g.chunks_per_row;
    const int64_t token = i / g.chunks_per_row;
    const int64_t h = token % g.heads;
    const int64_t s = token / g.heads % g.rows;
    const int64_t b = token / g.heads / g.rows;
    const int32_t from = order[s];
    // 0xffff is a NaN in both bf16 and fp16.
    uint4 value = make_uint4(~0u, ~0u, ~0u, ~0u);
    if (from >= 0 && from < g.rows) value = g.src[b * g.src_b + from * g.src_s + h * g.src_h + c];
    g.dst[b * g.dst_b + s * g.dst_s + h * g.dst_h + c] = value;
  }
}

}  // namespace

void permute_rows(const TensorRef& src, const TensorRef& dst, int32_t batch, int32_t heads,
                  int32_t rows, int32_t head_dim, const int32_t* order, cudaStream_t stream) {
  const host::LaunchChecks check("cm::cuda::permute_rows");
  check.require(batch >= 1 && heads >= 1 && rows >= 1, "batch, heads and rows must be >= 1");
  check.require(head_dim >= kChunkElements && head_dim % kChunkElements == 0,
                "head_dim must be a positive multiple of 8");
  check.tensor(src, "src", false);
  check.tensor(dst, "dst", false);
  check.require(order != nullptr, "order is null");
  check.require(src.data != dst.data, "src and dst must not overlap (they are one tensor)");

  const auto chunks = [](int64_t stride) { return stride / kChunkElements; };
  RowGather g{static_cast<const uint4*>(src.data),
              static_cast<uint4*>(const_cast<void*>(dst.data)),
              chunks(src.stride_b),
              chunks(src.stride_s),
              chunks(src.stride_h),
              chunks(dst.stride_b),
              chunks(dst.stride_s),
              chunks(dst.stride_h),
              heads,
              rows,
              head_dim / kChunkElements,
              int64_t{batch} * rows * heads * (head_dim / kChunkElements)};
  const int sms = check.multiprocessors();
  // Enough blocks to fill every SM several times over; each thread then strides.
  const int64_t wanted = (g.chunks + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::min<int64_t>(wanted, int64_t{sms} * 16));
  permute_rows_kernel<<<blocks, kThreads, 0, stream>>>(g, order);
  check.cuda(cudaGetLastError(), "launch");
}

}  // namespace cm::cuda
