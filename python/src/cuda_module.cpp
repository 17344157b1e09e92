// compilemask._cuda: the sm90 forward and backward kernels (include/compilemask/cuda.h,
// cuda_backward.h) and the row gather of token orders (cuda_token_order.h) for the torch operators
// in compilemask/_torch_ops.py, which pass tensors as data pointers and element strides so that
// this module needs no torch headers. cm::Error becomes ValueError, CudaError RuntimeError.
#include <compilemask/cuda.h>
#include <compilemask/cuda_backward.h>
#include <compilemask/cuda_token_order.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>

#include <array>
#include <cstdint>
#include <utility>

namespace nb = nanobind;

namespace {

using Strides3 = std::array<int64_t, 3>;  // element strides {batch, row, head}
using Strided = std::pair<uintptr_t, Strides3>;

// (dtype 0 bf16 / 1 fp16, batch, heads_q, heads_kv, nq, nk, head_dim, head_dim_v)
using Dims = std::array<int, 8>;

template <class T>
T* pointer(uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

cm::cuda::TensorRef tensor(uintptr_t data, const Strides3& s) {
  return {pointer<const void>(data), s[0], s[1], s[2]};
}

cm::cuda::DescriptorView descriptor(uintptr_t host, uintptr_t device) {
  return {pointer<const void>(host), pointer<const void>(device)};
}

// Packed layout: the offsets (0 means none, the strided layouts) and the total rows of q and k.
struct Packing {
  uintptr_t q_offsets, k_offsets;
  int64_t total_q, total_k;
};

// Fills the sizes and packing of the problem ForwardArgs and BackwardArgs share.
void set_common(cm::cuda::Problem& args, const Dims& dims, float scale, float softcap,
                uintptr_t sinks, uintptr_t alibi_slopes, const Packing& packing) {
  args.dtype = static_cast<cm::cuda::DType>(dims[0]);
  args.batch = dims[1];
  args.heads_q = dims[2];
  args.heads_kv = dims[3];
  args.nq = dims[4];
  args.nk = dims[5];
  args.head_dim = dims[6];
  args.head_dim_v = dims[7];
  args.scale = scale;
  args.softcap = softcap;
  args.sinks = pointer<const float>(sinks);
  args.alibi_slopes = pointer<const float>(alibi_slopes);
  args.q_offsets = pointer<const int32_t>(packing.q_offsets);
  args.k_offsets = pointer<const int32_t>(packing.k_offsets);
  args.total_q = packing.total_q;
  args.total_k = packing.total_k;
  // The operator's outputs are fresh tensors: their rows outside every sequence read as rows
  // that see no key (compilemask._torch_ops allocates them empty).
  args.write_rows_outside_sequences = packing.q_offsets != 0;
}

void forward(uintptr_t descriptor_host, uintptr_t descriptor_device, const Dims& dims, float scale,
             float softcap, uintptr_t sinks, uintptr_t alibi_slopes, uintptr_t q,
             const Strides3& q_strides, uintptr_t k, const Strides3& k_strides, uintptr_t v,
             const Strides3& v_strides, uintptr_t out, const Strides3& out_strides, uintptr_t lse,
             std::array<int64_t, 2> lse_strides, uintptr_t q_offsets, uintptr_t k_offsets,
             int64_t total_q, int64_t total_k, int num_splits, uintptr_t page_table,
             int64_t page_table_stride, int32_t page_size, int32_t num_pages, uintptr_t workspace,
             size_t workspace_bytes, uintptr_t stream) {
  cm::cuda::ForwardArgs args;
  set_common(args, dims, scale, softcap, sinks, alibi_slopes,
             {q_offsets, k_offsets, total_q, total_k});
  args.num_splits = num_splits;
  args.paged = {pointer<const int32_t>(page_table), page_table_stride, page_size, num_pages};
  args.q = tensor(q, q_strides);
  args.k = tensor(k, k_strides);
  args.v = tensor(v, v_strides);
  args.out = tensor(out, out_strides);
  args.lse = pointer<float>(lse);
  args.lse_stride_b = lse_strides[0];
  args.lse_stride_h = lse_strides[1];
  cm::cuda::forward(descriptor(descriptor_host, descriptor_device), args, pointer<void>(workspace),
                    workspace_bytes, pointer<CUstream_st>(stream));
}

// Tensors come as (address, strides) pairs, in the order q, k, v, out, dout, dq, dk, dv. dlse
// (0: none) has the LSE's strides; dsinks (0: none) receives the sinks' gradient.
void backward(uintptr_t descriptor_host, uintptr_t descriptor_device, const Dims& dims, float scale,
              float softcap, uintptr_t sinks, uintptr_t alibi_slopes,
              const std::array<Strided, 8>& tensors, uintptr_t lse,
              std::array<int64_t, 2> lse_strides, uintptr_t dlse, uintptr_t dsinks,
              uintptr_t q_offsets, uintptr_t k_offsets, int64_t total_q, int64_t total_k,
              bool deterministic, int32_t head_splits, uintptr_t workspace, size_t workspace_bytes,
              uintptr_t stream) {
  cm::cuda::BackwardArgs args;
  set_common(args, dims, scale, softcap, sinks, alibi_slopes,
             {q_offsets, k_offsets, total_q, total_k});
  cm::cuda::TensorRef* targets[8] = {&args.q,    &args.k,  &args.v,  &args.out,
                                     &args.dout, &args.dq, &args.dk, &args.dv};
  for (size_t i = 0; i < tensors.size(); ++i) {
    *targets[i] = tensor(tensors[i].first, tensors[i].second);
  }
  args.lse = pointer<const float>(lse);
  args.lse_stride_b = lse_strides[0];
  args.lse_stride_h = lse_strides[1];
  args.dlse = pointer<const float>(dlse);
  args.dsinks = pointer<float>(dsinks);
  args.deterministic = deterministic;
  args.head_splits = head_splits;
  cm::cuda::backward(descriptor(descriptor_host, descriptor_device), args, pointer<void>(workspace),
                     workspace_bytes, pointer<CUstream_st>(stream));
}

// The arguments the backward's size queries read (cm::cuda::backward_head_splits).
cm::cuda::BackwardArgs backward_sizes(const Dims& dims, int32_t head_splits, bool deterministic) {
  cm::cuda::BackwardArgs args;
  set_common(args, dims, 0.f, 0.f, 0, 0, {0, 0, 0, 0});
  args.head_splits = head_splits;
  args.deterministic = deterministic;
  return args;
}

// Row s of dst is row order[s] of src, for tensors of `dims` = (batch, heads, rows, head_dim).
void permute_rows(uintptr_t src, const Strides3& src_strides, uintptr_t dst,
                  const Strides3& dst_strides, std::array<int, 4> dims, uintptr_t order,
                  uintptr_t stream) {
  cm::cuda::permute_rows(tensor(src, src_strides), tensor(dst, dst_strides), dims[0], dims[1],
                         dims[2], dims[3], pointer<const int32_t>(order),
                         pointer<CUstream_st>(stream));
}

}  // namespace

NB_MODULE(_cuda, m) {
  m.doc() = "CompileMask sm90 attention kernels (used by compilemask.attention)";
  // Pointers are addresses; 0 means none (q_offsets, k_offsets outside the packed layout;
  // page_table when K and V are not paged; dlse without a gradient of the LSE; sinks without
  // attention sinks, dsinks without their gradient, alibi_slopes without ALiBi). softcap 0 means
  // no logit cap.
  m.def(
      "workspace_bytes",
      [](uintptr_t descriptor_host, uintptr_t descriptor_device, const Dims& dims,
         int32_t num_splits) {
        cm::cuda::ForwardArgs args;
        set_common(args, dims, 0.f, 0.f, 0, 0, {0, 0, 0, 0});
        args.num_splits = num_splits;
        return cm::cuda::forward_workspace_bytes(descriptor(descriptor_host, descriptor_device),
                                                 args);
      },
      nb::arg("descriptor_host"), nb::arg("descriptor_device"), nb::arg("dims"),
      nb::arg("num_splits"));
  m.def("forward", &forward, nb::arg("descriptor_host"), nb::arg("descriptor_device"),
        nb::arg("dims"), nb::arg("scale"), nb::arg("softcap"), nb::arg("sinks"),
        nb::arg("alibi_slopes"), nb::arg("q"), nb::arg("q_strides"), nb::arg("k"),
        nb::arg("k_strides"), nb::arg("v"), nb::arg("v_strides"), nb::arg("out"),
        nb::arg("out_strides"), nb::arg("lse"), nb::arg("lse_strides"), nb::arg("q_offsets"),
        nb::arg("k_offsets"), nb::arg("total_q"), nb::arg("total_k"), nb::arg("num_splits"),
        nb::arg("page_table"), nb::arg("page_table_stride"), nb::arg("page_size"),
        nb::arg("num_pages"), nb::arg("workspace"), nb::arg("workspace_bytes"), nb::arg("stream"));
  // The backward's size queries: head_splits 0 automatic, else that many parts
  // (cm::cuda::BackwardArgs). The automatic count replays the grid's dispatch (up to about 60 us
  // of host time), so the operator asks for it once and passes the answer to the workspace query
  // and the launch.
  const auto def_backward_query = [&m](const char* name, auto query) {
    m.def(
        name,
        [query](uintptr_t descriptor_host, uintptr_t descriptor_device, const Dims& dims,
                int32_t head_splits, bool deterministic) {
          return query(descriptor(descriptor_host, descriptor_device),
                       backward_sizes(dims, head_splits, deterministic));
        },
        nb::arg("descriptor_host"), nb::arg("descriptor_device"), nb::arg("dims"),
        nb::arg("head_splits"), nb::arg("deterministic"));
  };
  def_backward_query("backward_head_splits", &cm::cuda::backward_head_splits);
  def_backward_query("backward_workspace_bytes", &cm::cuda::backward_workspace_bytes);
  m.def("backward", &backward, nb::arg("descriptor_host"), nb::arg("descriptor_device"),
        nb::arg("dims"), nb::arg("scale"), nb::arg("softcap"), nb::arg("sinks"),
        nb::arg("alibi_slopes"), nb::arg("tensors"), nb::arg("lse"), nb::arg("lse_strides"),
        nb::arg("dlse"), nb::arg("dsinks"), nb::arg("q_offsets"), nb::arg("k_offsets"),
        nb::arg("total_q"), nb::arg("total_k"), nb::arg("deterministic"), nb::arg("head_splits"),
        nb::arg("workspace"), nb::arg("workspace_bytes"), nb::arg("stream"));
  m.def("permute_rows", &permute_rows, nb::arg("src"), nb::arg("src_strides"), nb::arg("dst"),
        nb::arg("dst_strides"), nb::arg("dims"), nb::arg("order"), nb::arg("stream"));
}
