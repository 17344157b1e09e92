// The C entry points of libcompilemask_cuda.so: the forward and backward kernels of
// compilemask/cuda.h and cuda_backward.h and the row gather of cuda_token_order.h, for foreign
// callers (Python ctypes with torch tensors' data pointers, other languages' FFIs), in the same
// process as other attention kernels. Errors come back as a return code and a message, never as
// an exception crossing the C boundary: the size queries answer 0 for what the entry point
// would reject, and the entry points return 0 on success, 1 for a rejected problem (with the C++
// API's cm::Error message, naming the entry point and the rule, copied into error[error_len]
// and cut to fit) and 2 for a CUDA failure. Pointers and strides are as the C++ API's.
#ifndef COMPILEMASK_CUDA_C_H
#define COMPILEMASK_CUDA_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The version of the entry points' signatures: 2 added `softcap` after `scale` in
// cm_cuda_forward and cm_cuda_backward (builds without this function are version 1); 3 added
// `num_splits` after `mainloop` in cm_cuda_forward, cm_cuda_forward_workspace_bytes_for in place
// of cm_cuda_forward_workspace_bytes(void), and cm_cuda_forward_num_splits; 4 added the paged
// K/V arguments (`page_table` to `num_pages`) after `num_splits` in cm_cuda_forward; 5 added
// `write_rows_outside` after `total_k` in cm_cuda_forward and cm_cuda_backward, `head_splits`
// after `deterministic` in cm_cuda_backward, `heads_kv` and `head_splits` to
// cm_cuda_backward_workspace_bytes_for, and cm_cuda_backward_head_splits; 6 added
// `deterministic` after `head_splits` in cm_cuda_backward_workspace_bytes_for and
// cm_cuda_backward_head_splits (the automatic count replays the mode's dispatch order); 7 added
// `sinks` after `softcap` in cm_cuda_forward and cm_cuda_backward, and `dsinks` after `dlse` in
// cm_cuda_backward; 8 added `alibi_slopes` after `sinks` in cm_cuda_forward and
// cm_cuda_backward; 9 added `head_dim_v` after `head_dim` in every entry point but
// cm_cuda_permute_rows.
// CM_CUDA_ABI_VERSION is the version this header declares: a caller compiled with it can check
// that the library it loads answers the same.
#define CM_CUDA_ABI_VERSION 9
int cm_cuda_abi_version(void);

// Workspace bytes for cm_cuda_forward with this descriptor, problem size and num_splits, or 0
// for descriptors and sizes it would reject.
size_t cm_cuda_forward_workspace_bytes_for(const void* descriptor_host,
                                           const void* descriptor_device, int batch, int heads_q,
                                           int heads_kv, int head_dim, int head_dim_v,
                                           int num_splits);

// The key parts cm_cuda_forward uses for this descriptor, problem size and num_splits on the
// current device (cm::cuda::forward_num_splits), or 0 for what it would reject.
int cm_cuda_forward_num_splits(const void* descriptor_host, const void* descriptor_device,
                               int batch, int heads_q, int heads_kv, int head_dim, int head_dim_v,
                               int num_splits);

// Strides are element strides {batch, row, head} for q, k, v and out, {batch, head} for lse.
// dtype: 0 bf16, 1 fp16. head_dim: the columns of q and k; head_dim_v: of v and out, 0 meaning
// head_dim. scale: 0 means 1/sqrt(head_dim); softcap: 0 means no logit cap; sinks:
// null, or device float32 [heads_q] attention-sink logits; alibi_slopes: null, or device float32
// [heads_q] ALiBi slopes (cm::cuda::Problem). mainloop: 0 auto, 1
// serial, 2 pingpong (cm::cuda::Mainloop). num_splits: 0 automatic, 1 none, else that many key
// parts (cm::cuda::ForwardArgs). page_table: null, or device int32 page indices for K and V in
// pages (cm::cuda::PagedKV: k and v are then pools of num_pages pages of page_size rows, their
// strides {page, row, head}). q_offsets/k_offsets: null, or device int32[batch] (packed layout; a
// sequence outside its tensors gets NaN rows, and the rows outside every sequence are left as they
// are, or, with write_rows_outside 1, written as rows that see no key: cm::cuda::Problem). Returns
// 0 on success, 1 for a rejected problem (cm::Error), 2 for a CUDA failure.
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
                    size_t workspace_bytes, void* stream, char* error, size_t error_len);

// Workspace bytes for cm_cuda_backward with this descriptor, problem size, head_splits and
// deterministic, or 0 for descriptors and sizes it would reject.
size_t cm_cuda_backward_workspace_bytes_for(const void* descriptor_host,
                                            const void* descriptor_device, int batch, int heads_q,
                                            int heads_kv, int head_dim, int head_dim_v,
                                            int head_splits, int deterministic);

// The head splits cm_cuda_backward uses for this descriptor, problem size, head_splits and
// deterministic on the current device (cm::cuda::backward_head_splits), or 0 for what it would
// reject.
int cm_cuda_backward_head_splits(const void* descriptor_host, const void* descriptor_device,
                                 int batch, int heads_q, int heads_kv, int head_dim, int head_dim_v,
                                 int head_splits, int deterministic);

// Strides are element strides {batch, row, head} for the tensors, {batch, head} for lse, as
// in cm_cuda_forward, and so are scale, softcap, sinks and alibi_slopes. dtype: 0 bf16, 1 fp16.
// dlse: null, or the LSE's gradient in the LSE's layout. dsinks: null, or device float32 [heads_q]
// that receives the sinks' gradient (cm::cuda::BackwardArgs; needs sinks). q_offsets/k_offsets and
// write_rows_outside as in cm_cuda_forward. deterministic: 0 or 1. head_splits: 0 automatic, 1
// none, else that many parts of each kv group (cm::cuda::BackwardArgs). Returns 0 on success, 1 for
// a rejected problem (cm::Error), 2 for a CUDA failure.
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
                     char* error, size_t error_len);

// Row s of dst is row order[s] of src (cm::cuda::permute_rows): strides are element strides
// {batch, row, head}; order is device int32[rows]. Returns 0 on success, 1 for rejected sizes
// or strides (cm::Error), 2 for a CUDA failure.
int cm_cuda_permute_rows(const void* src, const int64_t* src_strides, void* dst,
                         const int64_t* dst_strides, int batch, int heads, int rows, int head_dim,
                         const int32_t* order, void* stream, char* error, size_t error_len);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // COMPILEMASK_CUDA_C_H
