// Host launcher of the sm90 backward kernels (include/compilemask/cuda_backward.h): checks the
// problem against the descriptor, lays out the workspace, encodes the TMA tensor maps and
// enqueues preprocess, main kernel and postprocess. Allocates nothing.
#include <compilemask/cuda_backward.h>
#include <compilemask/descriptor.h>

#include "bwd_launch.h"

#include <cuda.h>

#include <cmath>
#include <string>

namespace cm::cuda {
namespace {

constexpr int kTile = sm90::kBwdTile;
constexpr int kBoxCols = 64;   // TMA box width in elements (128 bytes)
constexpr int64_t kAlign = 8;  // elements per 16 bytes: TMA and vector-access granularity
constexpr size_t kSectionAlign = 256;

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CudaError(std::string("cm::cuda::backward: ") + what + ": " + cudaGetErrorString(status));
  }
}

void require(bool ok, const std::string& rule) {
  if (!ok) throw Error("cm::cuda::backward: " + rule);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

void check_tensor(const TensorRef& t, const char* name, bool packed) {
  const std::string n = name;
  require(t.data != nullptr, n + ".data is null");
  require(aligned16(t.data), n + ".data must be 16-byte aligned");
  require(t.stride_s > 0 && t.stride_s % kAlign == 0,
          n + ".stride_s must be a positive multiple of 8 elements");
  require(t.stride_h > 0 && t.stride_h % kAlign == 0,
          n + ".stride_h must be a positive multiple of 8 elements");
  if (!packed) {
    require(t.stride_b > 0 && t.stride_b % kAlign == 0,
            n + ".stride_b must be a positive multiple of 8 elements");
  }
}

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

// Byte offsets of the workspace sections (bwd_params.h) and the total size.
struct WorkspaceLayout {
  int64_t rows_padded;
  size_t lse_log2, dsum, dq_accum, semaphores, total;
};

WorkspaceLayout workspace_layout(int32_t batch, int32_t heads_q, int32_t nq, int32_t head_dim) {
  require(batch >= 1 && batch <= 65535, "batch must be in [1, 65535]");
  require(heads_q >= 1 && heads_q <= 65535, "heads_q must be in [1, 65535]");
  require(nq >= 1, "nq must be >= 1");
  require(head_dim == 64 || head_dim == 128,
          "head_dim " + std::to_string(head_dim) + " is not supported (64 or 128)");
  WorkspaceLayout w{};
  w.rows_padded = round_up(nq, kTile);
  const int64_t rows = int64_t{batch} * heads_q * w.rows_padded;
  const auto section = [](int64_t bytes) {
    return static_cast<size_t>(round_up(bytes, kSectionAlign));
  };
  w.lse_log2 = 0;
  w.dsum = w.lse_log2 + section(rows * 4);
  w.dq_accum = w.dsum + section(rows * 4);
  w.semaphores = w.dq_accum + section(rows * head_dim * 4);
  w.total = w.semaphores + section(rows / sm90::kBwdStepRows * 4);
  return w;
}

// Validates args against the descriptor header; throws cm::Error naming the broken rule.
void validate(const DescriptorView& d, const BackwardArgs& a) {
  require(d.host != nullptr && d.device != nullptr,
          "descriptor host and device pointers must be set");
  const desc::Header& h = desc::header(d.host);
  require(h.magic == desc::kMagic,
          "descriptor has a bad magic number (not a CompileMask descriptor)");
  require(h.version == desc::kVersion, "descriptor version " + std::to_string(h.version) +
                                           " is not the supported version " +
                                           std::to_string(desc::kVersion));
  require(h.tile_m == kTile && h.tile_n == kTile,
          "descriptor tiles are " + std::to_string(h.tile_m) + "x" + std::to_string(h.tile_n) +
              "; the sm90 kernel needs 128x128 (specialize with Tiling{128, 128})");
  require(a.dtype == DType::kBFloat16 || a.dtype == DType::kFloat16, "dtype must be bf16 or fp16");
  require(a.heads_kv >= 1, "heads_kv must be >= 1");
  require(a.heads_q % a.heads_kv == 0, "heads_q (" + std::to_string(a.heads_q) +
                                           ") must be a multiple of heads_kv (" +
                                           std::to_string(a.heads_kv) + ")");
  require(a.nk >= 1, "nk must be >= 1");
  require(a.scale >= 0.f && std::isfinite(a.scale), "scale must be finite and >= 0 (0: 1/sqrt(D))");
  require(a.nq == h.nq && a.nk == h.nk,
          "lengths nq=" + std::to_string(a.nq) + ", nk=" + std::to_string(a.nk) +
              " differ from the descriptor's nq=" + std::to_string(h.nq) +
              ", nk=" + std::to_string(h.nk));
  require(
      h.num_q_tiles == (a.nq + kTile - 1) / kTile && h.num_k_tiles == (a.nk + kTile - 1) / kTile,
      "descriptor tile counts do not match its lengths");
  require(h.batch == 1 || h.batch == a.batch, "descriptor batch " + std::to_string(h.batch) +
                                                  " must be 1 or batch " + std::to_string(a.batch));
  require(h.heads == 1 || h.heads == a.heads_q, "descriptor heads " + std::to_string(h.heads) +
                                                    " must be 1 or heads_q " +
                                                    std::to_string(a.heads_q));
  require(int64_t{a.batch} * a.heads_kv < (int64_t{1} << 31), "batch * heads_kv is too large");

  const bool packed = a.q_offsets != nullptr || a.k_offsets != nullptr;
  require(!packed || (a.q_offsets != nullptr && a.k_offsets != nullptr),
          "packed layout needs both q_offsets and k_offsets");
  if (packed) {
    require(a.total_q >= a.nq && a.total_k >= a.nk,
            "packed layout needs total_q >= nq and total_k >= nk");
  }
  check_tensor(a.q, "q", packed);
  check_tensor(a.k, "k", packed);
  check_tensor(a.v, "v", packed);
  check_tensor(a.out, "out", packed);
  check_tensor(a.dout, "dout", packed);
  check_tensor(a.dq, "dq", packed);
  check_tensor(a.dk, "dk", packed);
  check_tensor(a.dv, "dv", packed);
  require(a.lse != nullptr, "lse is null");
  require(a.lse_stride_h >= 0 && a.lse_stride_b >= 0, "lse strides must be >= 0");
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled, found through the runtime (no link against libcuda).
EncodeTiled encode_tiled() {
  static const EncodeTiled fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000,
                                                cudaEnableDefault, &found),
               "looking up cuTensorMapEncodeTiled");
    if (found != cudaDriverEntryPointSuccess || ptr == nullptr) {
      throw CudaError("cm::cuda::backward: the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<EncodeTiled>(ptr);
  }();
  return fn;
}

// A 4-D map (head_dim, rows, heads, batch) with box_rows by 64-column boxes, 128-byte swizzle.
// Rows outside the tensor read as zeros.
CUtensorMap make_map(const TensorRef& t, DType dtype, int head_dim, int64_t rows, int heads,
                     int batch, bool packed, int box_rows) {
  const cuuint64_t bytes = 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(packed ? 1 : batch)};
  const int64_t stride_b = packed ? t.stride_s * rows : t.stride_b;
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(t.stride_s) * bytes,
                                 static_cast<cuuint64_t>(t.stride_h) * bytes,
                                 static_cast<cuuint64_t>(stride_b) * bytes};
  const cuuint32_t box[4] = {kBoxCols, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult status =
      encode_tiled()(&map,
                     dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                     4, const_cast<void*>(t.data), dims, strides, box, element_strides,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw Error("cm::cuda::backward: cuTensorMapEncodeTiled rejected a tensor (error " +
                std::to_string(static_cast<int>(status)) +
                "); strides must be below 2^40 bytes and the rows below 2^32");
  }
  return map;
}

template <sm90::ElementKind kElement>
cudaError_t dispatch_head_dim(int head_dim, const sm90::BwdPrepParams& prep,
                              const sm90::BwdMainParams& main, const sm90::BwdPostParams& post,
                              const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                              const CUtensorMap& dout, bool deterministic, cudaStream_t stream) {
  return head_dim == 64 ? sm90::launch_backward<kElement, 64>(prep, main, post, q, k, v, dout,
                                                              deterministic, stream)
                        : sm90::launch_backward<kElement, 128>(prep, main, post, q, k, v, dout,
                                                               deterministic, stream);
}

}  // namespace

size_t backward_workspace_bytes(int32_t batch, int32_t heads_q, int32_t nq, int32_t head_dim) {
  return workspace_layout(batch, heads_q, nq, head_dim).total;
}

void backward(const DescriptorView& descriptor, const BackwardArgs& args, void* workspace,
              size_t workspace_bytes, cudaStream_t stream) {
  const WorkspaceLayout layout = workspace_layout(args.batch, args.heads_q, args.nq, args.head_dim);
  validate(descriptor, args);
  require(workspace != nullptr && workspace_bytes >= layout.total,
          "workspace must hold backward_workspace_bytes() = " + std::to_string(layout.total) +
              " bytes");
  require(reinterpret_cast<uintptr_t>(workspace) % kSectionAlign == 0,
          "workspace must be 256-byte aligned");
  const desc::Header& h = desc::header(descriptor.host);
  const bool packed = args.q_offsets != nullptr;
  auto* base = static_cast<unsigned char*>(workspace);

  sm90::BwdShape shape{};
  shape.batch = args.batch;
  shape.heads_q = args.heads_q;
  shape.heads_kv = args.heads_kv;
  shape.nq = args.nq;
  shape.nk = args.nk;
  shape.num_q_tiles = h.num_q_tiles;
  shape.num_k_tiles = h.num_k_tiles;
  shape.rows_padded = static_cast<int32_t>(layout.rows_padded);
  shape.q_offsets = args.q_offsets;
  shape.k_offsets = args.k_offsets;
  sm90::BwdWorkspace ws{};
  ws.lse_log2 = reinterpret_cast<float*>(base + layout.lse_log2);
  ws.dsum = reinterpret_cast<float*>(base + layout.dsum);
  ws.dq_accum = reinterpret_cast<float*>(base + layout.dq_accum);
  ws.semaphores = reinterpret_cast<int32_t*>(base + layout.semaphores);
  const float scale =
      args.scale != 0.f ? args.scale : 1.f / std::sqrt(static_cast<float>(args.head_dim));
  const auto batch_stride = [&](const TensorRef& t) { return packed ? 0 : t.stride_b; };

  sm90::BwdPrepParams prep{};
  prep.shape = shape;
  prep.out = args.out.data;
  prep.out_stride_b = batch_stride(args.out);
  prep.out_stride_s = args.out.stride_s;
  prep.out_stride_h = args.out.stride_h;
  prep.dout = args.dout.data;
  prep.dout_stride_b = batch_stride(args.dout);
  prep.dout_stride_s = args.dout.stride_s;
  prep.dout_stride_h = args.dout.stride_h;
  prep.lse = args.lse;
  prep.lse_stride_b = packed ? 0 : args.lse_stride_b;
  prep.lse_stride_h = args.lse_stride_h;
  prep.ws = ws;

  sm90::BwdMainParams main{};
  main.shape = shape;
  main.descriptor = descriptor.device;
  main.desc_batch = h.batch;
  main.desc_heads = h.heads;
  main.scale = scale;
  main.scale_log2 = scale * 1.4426950408889634f;
  main.dk = const_cast<void*>(args.dk.data);
  main.dk_stride_b = batch_stride(args.dk);
  main.dk_stride_s = args.dk.stride_s;
  main.dk_stride_h = args.dk.stride_h;
  main.dv = const_cast<void*>(args.dv.data);
  main.dv_stride_b = batch_stride(args.dv);
  main.dv_stride_s = args.dv.stride_s;
  main.dv_stride_h = args.dv.stride_h;
  main.ws = ws;

  sm90::BwdPostParams post{};
  post.shape = shape;
  post.scale = scale;
  post.dq = const_cast<void*>(args.dq.data);
  post.dq_stride_b = batch_stride(args.dq);
  post.dq_stride_s = args.dq.stride_s;
  post.dq_stride_h = args.dq.stride_h;
  post.dq_accum = ws.dq_accum;

  const int64_t q_rows = packed ? args.total_q : args.nq;
  const int64_t k_rows = packed ? args.total_k : args.nk;
  const int d = args.head_dim;
  const int step = sm90::kBwdStepRows;
  const CUtensorMap q =
      make_map(args.q, args.dtype, d, q_rows, args.heads_q, args.batch, packed, step);
  const CUtensorMap dout =
      make_map(args.dout, args.dtype, d, q_rows, args.heads_q, args.batch, packed, step);
  const CUtensorMap k =
      make_map(args.k, args.dtype, d, k_rows, args.heads_kv, args.batch, packed, kTile);
  const CUtensorMap v =
      make_map(args.v, args.dtype, d, k_rows, args.heads_kv, args.batch, packed, kTile);

  const cudaError_t launched =
      args.dtype == DType::kBFloat16
          ? dispatch_head_dim<sm90::ElementKind::kBFloat16>(d, prep, main, post, q, k, v, dout,
                                                            args.deterministic, stream)
          : dispatch_head_dim<sm90::ElementKind::kFloat16>(d, prep, main, post, q, k, v, dout,
                                                           args.deterministic, stream);
  check_cuda(launched, "launching the backward kernels");
}

}  // namespace cm::cuda
