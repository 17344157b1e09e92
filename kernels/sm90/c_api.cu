// The C entry points (include/compilemask/cuda_c.h, which documents them): each converts its
// arguments to the C++ API's and its exceptions to return codes and messages.
#include <compilemask/cuda.h>
#include <compilemask/cuda_backward.h>
#include <compilemask/cuda_c.h>
#include <compilemask/cuda_token_order.h>

#include <cstring>
#include <exception>

namespace {

void write_message(const char* message, char* error, size_t error_len) {
  if (error == nullptr || error_len == 0) return;
  std::strncpy(error, message, error_len - 1);
  error[error_len - 1] = '\0';
}

cm::cuda::TensorRef tensor(const void* data, const int64_t* strides_bsh) {
  return {data, strides_bsh[0], strides_bsh[1], strides_bsh[2]};
}

// The fields cm_cuda_forward and cm_cuda_backward share, from their C arguments.
cm::cuda::Problem problem(int dtype, int batch, int heads_q, int heads_kv, int nq, int nk,
                          int head_dim, int head_dim_v, float scale, float softcap,
                          const float* sinks, const float* alibi_slopes, const void* q,
                          const int64_t* q_strides, const void* k, const int64_t* k_strides,
                          const void* v, const int64_t* v_strides, const void* out,
                          const int64_t* out_strides, const float* lse, const int64_t* lse_strides,
                          const int32_t* q_offsets, const int32_t* k_offsets, int64_t total_q,
                          int64_t total_k, int write_rows_outside) {
  cm::cuda::Problem p;
  p.dtype = static_cast<cm::cuda::DType>(dtype);
  p.batch = batch;
  p.heads_q = heads_q;
  p.heads_kv = heads_kv;
  p.nq = nq;
  p.nk = nk;
  p.head_dim = head_dim;
  p.head_dim_v = head_dim_v;
  p.scale = scale;
  p.softcap = softcap;
  p.sinks = sinks;
  p.alibi_slopes = alibi_slopes;
  p.q = tensor(q, q_strides);
  p.k = tensor(k, k_strides);
  p.v = tensor(v, v_strides);
  p.out = tensor(out, out_strides);
  p.lse = lse;
  p.lse_stride_b = lse_strides[0];
  p.lse_stride_h = lse_strides[1];
  p.q_offsets = q_offsets;
  p.k_offsets = k_offsets;
  p.total_q = total_q;
  p.total_k = total_k;
  p.write_rows_outside_sequences = write_rows_outside != 0;
  return p;
}

// The arguments that the size queries read: the problem's sizes and the split count (the
// forward's num_splits, the backward's head_splits).
template <class Args>
Args sizes(int batch, int heads_q, int heads_kv, int head_dim, int head_dim_v, int splits,
           int32_t Args::*split_field) {
  Args args;
  args.batch = batch;
  args.heads_q = heads_q;
  args.heads_kv = heads_kv;
  args.head_dim = head_dim;
  args.head_dim_v = head_dim_v;
  args.*split_field = splits;
  return args;
}

// The arguments that the backward's size queries read: sizes' and the mode, whose dispatch
// order the automatic head splits replay.
cm::cuda::BackwardArgs backward_sizes(int batch, int heads_q, int heads_kv, int head_dim,
                                      int head_dim_v, int head_splits, int deterministic) {
  auto args = sizes(batch, heads_q, heads_kv, head_dim, head_dim_v, head_splits,
                    &cm::cuda::BackwardArgs::head_splits);
  args.deterministic = deterministic != 0;
  return args;
}

// call(), or 0 when it throws: the answer of a size query for what the entry point would reject.
template <typename Call>
auto zero_on_error(Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception&) {
    return 0;
  }
}

// Runs `call`; returns 0 on success, 1 for a rejected problem (cm::Error), 2 for a CUDA or
// other failure, with the message copied into error[error_len].
template <typename Call>
int return_code(Call&& call, char* error, size_t error_len) {
  try {
    call();
    return 0;
  } catch (const cm::Error& e) {
    write_message(e.what(), error, error_len);
    return 1;
  } catch (const std::exception& e) {
    write_message(e.what(), error, error_len);
    return 2;
  }
}

}  // namespace

extern "C" {

int cm_cuda_abi_version(void) {
  return CM_CUDA_ABI_VERSION;
}

size_t cm_cuda_forward_workspace_bytes_for(const void* descriptor_host,
                                           const void* descriptor_device, int batch, int heads_q,
                                           int heads_kv, int head_dim, int head_dim_v,
                                           int num_splits) {
  return zero_on_error([&] {
    return cm::cuda::forward_workspace_bytes({descriptor_host, descriptor_device},
                                             sizes(batch, heads_q, heads_kv, head_dim, head_dim_v,
                                                   num_splits, &cm::cuda::ForwardArgs::num_splits));
  });
}

int cm_cuda_forward_num_splits(const void* descriptor_host, const void* descriptor_device,
                               int batch, int heads_q, int heads_kv, int head_dim, int head_dim_v,
                               int num_splits) {
  return zero_on_error([&] {
    return cm::cuda::forward_num_splits({descriptor_host, descriptor_device},
                                        sizes(batch, heads_q, heads_kv, head_dim, head_dim_v,
                                              num_splits, &cm::cuda::ForwardArgs::num_splits));
  });
}

int cm_cuda_forward(const void* descriptor_host, const void* descriptor_device, int dtype,
                    int batch, int heads_q, int heads_kv, int nq, int nk, int head_dim,
                    int head_dim_v, float scale, float softcap, const float* sinks,
                    const float* alibi_slopes, int mainloop, int num_splits,
                    const int32_t* page_table, int64_t page_table_stride, int page_size,
                    int num_pages, const void* q, const int64_t* q_strides, const void* k,
                    const int64_t* k_strides, const void* v, const int64_t* v_strides, void* out,
                    const int64_t* out_strides, float* lse, const int64_t* lse_strides,
                    const int32_t* q_offsets, const int32_t* k_offsets, int64_t total_q,
                    int64_t total_k, int write_rows_outside, void* workspace,
                    size_t workspace_bytes, void* stream, char* error, size_t error_len) {
  return return_code(
      [&] {
        cm::cuda::ForwardArgs args;
        static_cast<cm::cuda::Problem&>(args) =
            problem(dtype, batch, heads_q, heads_kv, nq, nk, head_dim, head_dim_v, scale, softcap,
                    sinks, alibi_slopes, q, q_strides, k, k_strides, v, v_strides, out, out_strides,
                    lse, lse_strides, q_offsets, k_offsets, total_q, total_k, write_rows_outside);
        args.mainloop = static_cast<cm::cuda::Mainloop>(mainloop);
        args.num_splits = num_splits;
        args.paged = {page_table, page_table_stride, page_size, num_pages};
        cm::cuda::forward({descriptor_host, descriptor_device}, args, workspace, workspace_bytes,
                          static_cast<cudaStream_t>(stream));
      },
      error, error_len);
}

size_t cm_cuda_backward_workspace_bytes_for(const void* descriptor_host,
                                            const void* descriptor_device, int batch, int heads_q,
                                            int heads_kv, int head_dim, int head_dim_v,
                                            int head_splits, int deterministic) {
  return zero_on_error([&] {
    return cm::cuda::backward_workspace_bytes(
        {descriptor_host, descriptor_device},
        backward_sizes(batch, heads_q, heads_kv, head_dim, head_dim_v, head_splits, deterministic));
  });
}

int cm_cuda_backward_head_splits(const void* descriptor_host, const void* descriptor_device,
                                 int batch, int heads_q, int heads_kv, int head_dim, int head_dim_v,
                                 int head_splits, int deterministic) {
  return zero_on_error([&] {
    return cm::cuda::backward_head_splits(
        {descriptor_host, descriptor_device},
        backward_sizes(batch, heads_q, heads_kv, head_dim, head_dim_v, head_splits, deterministic));
  });
}

int cm_cuda_backward(const void* descriptor_host, const void* descriptor_device, int dtype,
                     int batch, int heads_q, int heads_kv, int nq, int nk, int head_dim,
                     int head_dim_v, float scale, float softcap, const float* sinks,
                     const float* alibi_slopes, const void* q, const int64_t* q_strides,
                     const void* k, const int64_t* k_strides, const void* v,
                     const int64_t* v_strides, const void* out, const int64_t* out_strides,
                     const void* dout, const int64_t* dout_strides, const float* lse,
                     const int64_t* lse_strides, const float* dlse, float* dsinks, void* dq,
                     const int64_t* dq_strides, void* dk, const int64_t* dk_strides, void* dv,
                     const int64_t* dv_strides, const int32_t* q_offsets, const int32_t* k_offsets,
                     int64_t total_q, int64_t total_k, int write_rows_outside, int deterministic,
                     int head_splits, void* workspace, size_t workspace_bytes, void* stream,
                     char* error, size_t error_len) {
  return return_code(
      [&] {
        const cm::cuda::BackwardArgs args{
            problem(dtype, batch, heads_q, heads_kv, nq, nk, head_dim, head_dim_v, scale, softcap,
                    sinks, alibi_slopes, q, q_strides, k, k_strides, v, v_strides, out, out_strides,
                    lse, lse_strides, q_offsets, k_offsets, total_q, total_k, write_rows_outside),
            tensor(dout, dout_strides),
            dlse,
            tensor(dq, dq_strides),
            tensor(dk, dk_strides),
            tensor(dv, dv_strides),
            dsinks,
            deterministic != 0,
            head_splits};
        cm::cuda::backward({descriptor_host, descriptor_device}, args, workspace, workspace_bytes,
                           static_cast<cudaStream_t>(stream));
      },
      error, error_len);
}

int cm_cuda_permute_rows(const void* src, const int64_t* src_strides, void* dst,
                         const int64_t* dst_strides, int batch, int heads, int rows, int head_dim,
                         const int32_t* order, void* stream, char* error, size_t error_len) {
  return return_code(
      [&] {
        cm::cuda::permute_rows(tensor(src, src_strides), tensor(dst, dst_strides), batch, heads,
                               rows, head_dim, order, static_cast<cudaStream_t>(stream));
      },
      error, error_len);
}

}  // extern "C"
