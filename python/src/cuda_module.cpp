// compilemask._cuda: the sm90 forward kernel (include/compilemask/cuda.h) for the torch operator
// in compilemask/_torch_ops.py, which passes tensors as data pointers and element strides so
// that this module needs no torch headers. cm::Error becomes ValueError, CudaError RuntimeError.
#include <compilemask/cuda.h>

#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>

#include <array>
#include <cstdint>

namespace nb = nanobind;

namespace {

using Strides3 = std::array<int64_t, 3>;  // element strides {batch, row, head}

template <class T>
T* pointer(uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

cm::cuda::TensorRef tensor(uintptr_t data, const Strides3& s) {
  return {pointer<const void>(data), s[0], s[1], s[2]};
}

}  // namespace

NB_MODULE(_cuda, m) {
  m.doc() = "CompileMask sm90 forward kernel (used by compilemask.attention)";
  m.def("workspace_bytes", &cm::cuda::forward_workspace_bytes);
  // dims: (dtype 0 bf16 / 1 fp16, batch, heads_q, heads_kv, nq, nk, head_dim). Pointers are
  // addresses; 0 means none (q_offsets, k_offsets outside the packed layout).
  m.def(
      "forward",
      [](uintptr_t descriptor_host, uintptr_t descriptor_device, std::array<int, 7> dims,
         float scale, uintptr_t q, const Strides3& q_strides, uintptr_t k,
         const Strides3& k_strides, uintptr_t v, const Strides3& v_strides, uintptr_t out,
         const Strides3& out_strides, uintptr_t lse, std::array<int64_t, 2> lse_strides,
         uintptr_t q_offsets, uintptr_t k_offsets, int64_t total_q, int64_t total_k,
         uintptr_t workspace, size_t workspace_bytes, uintptr_t stream) {
        cm::cuda::ForwardArgs args;
        args.dtype = static_cast<cm::cuda::DType>(dims[0]);
        args.batch = dims[1];
        args.heads_q = dims[2];
        args.heads_kv = dims[3];
        args.nq = dims[4];
        args.nk = dims[5];
        args.head_dim = dims[6];
        args.scale = scale;
        args.q = tensor(q, q_strides);
        args.k = tensor(k, k_strides);
        args.v = tensor(v, v_strides);
        args.out = tensor(out, out_strides);
        args.lse = pointer<float>(lse);
        args.lse_stride_b = lse_strides[0];
        args.lse_stride_h = lse_strides[1];
        args.q_offsets = pointer<const int32_t>(q_offsets);
        args.k_offsets = pointer<const int32_t>(k_offsets);
        args.total_q = total_q;
        args.total_k = total_k;
        cm::cuda::forward(
            {pointer<const void>(descriptor_host), pointer<const void>(descriptor_device)}, args,
            pointer<void>(workspace), workspace_bytes, pointer<CUstream_st>(stream));
      },
      nb::arg("descriptor_host"), nb::arg("descriptor_device"), nb::arg("dims"), nb::arg("scale"),
      nb::arg("q"), nb::arg("q_strides"), nb::arg("k"), nb::arg("k_strides"), nb::arg("v"),
      nb::arg("v_strides"), nb::arg("out"), nb::arg("out_strides"), nb::arg("lse"),
      nb::arg("lse_strides"), nb::arg("q_offsets"), nb::arg("k_offsets"), nb::arg("total_q"),
      nb::arg("total_k"), nb::arg("workspace"), nb::arg("workspace_bytes"), nb::arg("stream"));
}
