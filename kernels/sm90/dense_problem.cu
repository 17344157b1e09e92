// cm::cuda::dense_bhsd and dense_problem (include/compilemask/cuda.h): problems over contiguous
// [B, H, S, D] tensors, the layout of the CPU reference.
#include <compilemask/cuda.h>

namespace cm::cuda {

TensorRef dense_bhsd(const void* data, int32_t heads, int32_t rows, int32_t head_dim) {
  const int64_t d = head_dim;
  return TensorRef{data, int64_t{heads} * rows * d, d, int64_t{rows} * d};
}

Problem dense_problem(DType dtype, const AttentionShape& shape, const void* q, const void* k,
                      const void* v, const void* out, const float* lse) {
  Problem p;
  p.dtype = dtype;
  p.batch = shape.batch;
  p.heads_q = shape.heads_q;
  p.heads_kv = shape.heads_kv;
  p.nq = shape.nq;
  p.nk = shape.nk;
  p.head_dim = shape.head_dim;
  p.head_dim_v = shape.head_dim_v;
  const int32_t dv = cm::value_head_dim(shape);
  p.q = dense_bhsd(q, shape.heads_q, shape.nq, shape.head_dim);
  p.k = dense_bhsd(k, shape.heads_kv, shape.nk, shape.head_dim);
  p.v = dense_bhsd(v, shape.heads_kv, shape.nk, dv);
  p.out = dense_bhsd(out, shape.heads_q, shape.nq, dv);
  p.lse = lse;
  p.lse_stride_b = int64_t{shape.heads_q} * shape.nq;
  p.lse_stride_h = shape.nq;
  return p;
}

}  // namespace cm::cuda
