// Host launcher of the sm90 forward kernel: checks the problem against the descriptor, encodes
// the TMA tensor maps and launches the instantiation for (dtype, head dim). Allocates nothing.
#include <compilemask/cuda.h>
#include <compilemask/descriptor.h>

#include "fwd_launch.h"

#include <cuda.h>

#include <cmath>
#include <string>

namespace cm::cuda {
namespace {

constexpr int kTile = 128;     // the kernel's tile_m and tile_n
constexpr int kBoxCols = 64;   // TMA box width in elements (128 bytes)
constexpr int64_t kAlign = 8;  // elements per 16 bytes: TMA and vector-store granularity

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw CudaError(std::string("cm::cuda::forward: ") + what + ": " + cudaGetErrorString(status));
  }
}

void require(bool ok, const std::string& rule) {
  if (!ok) throw Error("cm::cuda::forward: " + rule);
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

// Validates args against the descriptor header; throws cm::Error naming the broken rule.
void validate(const DescriptorView& d, const ForwardArgs& a) {
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
  require(a.mainloop == Mainloop::kAuto || a.mainloop == Mainloop::kSerial ||
              a.mainloop == Mainloop::kPingpong,
          "mainloop must be kAuto, kSerial or kPingpong");
  require(a.head_dim == 64 || a.head_dim == 128,
          "head_dim " + std::to_string(a.head_dim) + " is not supported (64 or 128)");
  require(a.batch >= 1 && a.heads_q >= 1 && a.heads_kv >= 1, "batch and heads must be >= 1");
  require(a.heads_q % a.heads_kv == 0, "heads_q (" + std::to_string(a.heads_q) +
                                           ") must be a multiple of heads_kv (" +
                                           std::to_string(a.heads_kv) + ")");
  require(a.nq >= 1 && a.nk >= 1, "nq and nk must be >= 1");
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
  const int64_t items = int64_t{h.num_q_tiles} * a.batch * a.heads_q;
  require(items < (int64_t{1} << 31), "too many (batch, head, query tile) work items");

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
      throw CudaError("cm::cuda::forward: the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<EncodeTiled>(ptr);
  }();
  return fn;
}

// A 4-D map (head_dim, rows, heads, batch) with 128-row by 64-column boxes, 128-byte swizzle.
CUtensorMap make_map(const TensorRef& t, DType dtype, int head_dim, int64_t rows, int heads,
                     int batch, bool packed) {
  const cuuint64_t bytes = 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(packed ? 1 : batch)};
  const int64_t stride_b = packed ? t.stride_s * rows : t.stride_b;
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(t.stride_s) * bytes,
                                 static_cast<cuuint64_t>(t.stride_h) * bytes,
                                 static_cast<cuuint64_t>(stride_b) * bytes};
  const cuuint32_t box[4] = {kBoxCols, kTile, 1, 1};
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
    throw Error("cm::cuda::forward: cuTensorMapEncodeTiled rejected a tensor (error " +
                std::to_string(static_cast<int>(status)) +
                "); strides must be below 2^40 bytes and the rows below 2^32");
  }
  return map;
}

// Pingpong pays off only on long rows of mostly full key tiles: the serial mainloop's two
// independent warpgroups already overlap one's softmax with the other's products, and on
// partial tiles the masking, not the products, is the longer part (docs/perf-notes.md).
// Decided from instance 0: O(query tiles + runs) on the host.
bool use_pingpong(const DescriptorView& d, Mainloop mainloop) {
  if (mainloop != Mainloop::kAuto) return mainloop == Mainloop::kPingpong;
  const desc::Header& h = desc::header(d.host);
  const desc::Instance& inst = desc::instance(d.host, 0);
  int64_t full = 0, partial = 0;
  for (int m = 0; m < h.num_q_tiles; ++m) {
    const desc::TileRow& row = desc::q_tile(d.host, inst, m);
    for (int i = 0; i < row.full_count; ++i) full += desc::full_runs(d.host, row)[i].count;
    for (int i = 0; i < row.partial_count; ++i) partial += desc::partial_runs(d.host, row)[i].count;
  }
  const double mean_tiles = static_cast<double>(full + partial) / h.num_q_tiles;
  return mean_tiles >= kPingpongMinTiles && partial * kPingpongMaxPartialShare <= full + partial;
}

template <sm90::ElementKind kElement, bool kOverlap>
cudaError_t dispatch_head_dim(int head_dim, const sm90::FwdParams& p, const CUtensorMap& q,
                              const CUtensorMap& k, const CUtensorMap& v, int grid,
                              cudaStream_t stream) {
  return head_dim == 64 ? sm90::launch_forward<kElement, 64, kOverlap>(p, q, k, v, grid, stream)
                        : sm90::launch_forward<kElement, 128, kOverlap>(p, q, k, v, grid, stream);
}

template <sm90::ElementKind kElement>
cudaError_t dispatch_variant(bool pingpong, int head_dim, const sm90::FwdParams& p,
                             const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                             int grid, cudaStream_t stream) {
  return pingpong ? dispatch_head_dim<kElement, true>(head_dim, p, q, k, v, grid, stream)
                  : dispatch_head_dim<kElement, false>(head_dim, p, q, k, v, grid, stream);
}

}  // namespace

DeviceDescriptor::DeviceDescriptor(const void* host_blob) : host_(host_blob) {
  if (host_blob == nullptr) throw Error("cm::cuda::DeviceDescriptor: the blob is null");
  const desc::Header& h = desc::header(host_blob);
  if (h.magic != desc::kMagic) {
    throw Error("cm::cuda::DeviceDescriptor: bad magic number (not a CompileMask descriptor)");
  }
  check_cuda(cudaMalloc(&device_, h.total_bytes), "allocating the device descriptor");
  const cudaError_t copied = cudaMemcpy(device_, host_blob, h.total_bytes, cudaMemcpyHostToDevice);
  if (copied != cudaSuccess) {
    cudaFree(device_);
    check_cuda(copied, "copying the descriptor to the device");
  }
}

DeviceDescriptor::~DeviceDescriptor() {
  cudaFree(device_);
}

size_t forward_workspace_bytes() {
  return 256;
}  // the work-item counter, padded

void forward(const DescriptorView& descriptor, const ForwardArgs& args, void* workspace,
             size_t workspace_bytes, cudaStream_t stream) {
  validate(descriptor, args);
  require(workspace != nullptr && workspace_bytes >= forward_workspace_bytes(),
          "workspace must hold forward_workspace_bytes() bytes");
  const desc::Header& h = desc::header(descriptor.host);
  const bool packed = args.q_offsets != nullptr;

  sm90::FwdParams p{};
  p.descriptor = descriptor.device;
  p.batch = args.batch;
  p.heads_q = args.heads_q;
  p.heads_kv = args.heads_kv;
  p.nq = args.nq;
  p.nk = args.nk;
  p.num_q_tiles = h.num_q_tiles;
  p.num_k_tiles = h.num_k_tiles;
  p.desc_batch = h.batch;
  p.desc_heads = h.heads;
  p.total_items = h.num_q_tiles * args.batch * args.heads_q;
  const float scale = args.scale != 0.f ? args.scale : 1.f / std::sqrt(float(args.head_dim));
  p.scale_log2 = scale * 1.4426950408889634f;
  p.q_offsets = args.q_offsets;
  p.k_offsets = args.k_offsets;
  p.out = const_cast<void*>(args.out.data);
  p.out_stride_b = packed ? 0 : args.out.stride_b;
  p.out_stride_s = args.out.stride_s;
  p.out_stride_h = args.out.stride_h;
  p.lse = args.lse;
  p.lse_stride_b = packed ? 0 : args.lse_stride_b;
  p.lse_stride_h = args.lse_stride_h;
  p.work_counter = static_cast<int32_t*>(workspace);

  const int64_t q_rows = packed ? args.total_q : args.nq;
  const int64_t k_rows = packed ? args.total_k : args.nk;
  const CUtensorMap q =
      make_map(args.q, args.dtype, args.head_dim, q_rows, args.heads_q, args.batch, packed);
  const CUtensorMap k =
      make_map(args.k, args.dtype, args.head_dim, k_rows, args.heads_kv, args.batch, packed);
  const CUtensorMap v =
      make_map(args.v, args.dtype, args.head_dim, k_rows, args.heads_kv, args.batch, packed);

  int device = 0, sms = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
             "reading the multiprocessor count");
  const int grid = static_cast<int>(std::min<int64_t>(sms, p.total_items));

  check_cuda(cudaMemsetAsync(workspace, 0, sizeof(int32_t), stream), "zeroing the work counter");
  const bool pingpong = use_pingpong(descriptor, args.mainloop);
  const cudaError_t launched = args.dtype == DType::kBFloat16
                                   ? dispatch_variant<sm90::ElementKind::kBFloat16>(
                                         pingpong, args.head_dim, p, q, k, v, grid, stream)
                                   : dispatch_variant<sm90::ElementKind::kFloat16>(
                                         pingpong, args.head_dim, p, q, k, v, grid, stream);
  check_cuda(launched, "launching the forward kernel");
}

}  // namespace cm::cuda
