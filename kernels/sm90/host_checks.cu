// Problem checks shared by the sm90 launchers (host_checks.h).
#include "host_checks.h"

#include <cmath>
#include <cstdint>

namespace cm::cuda::host {
namespace {

constexpr int64_t kAlign = 8;  // elements per 16 bytes: TMA and vector-access granularity

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

void LaunchChecks::require(bool ok, const std::string& rule) const {
  if (!ok) throw Error(std::string(entry_) + ": " + rule);
}

void LaunchChecks::cuda(cudaError_t status, const char* what) const {
  if (status != cudaSuccess) {
    throw CudaError(std::string(entry_) + ": " + what + ": " + cudaGetErrorString(status));
  }
}

int LaunchChecks::multiprocessors() const {
  int device = 0, sms = 0;
  cuda(cudaGetDevice(&device), "cudaGetDevice");
  cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
       "reading the multiprocessor count");
  return sms;
}

void LaunchChecks::bind_device_context() const {
  int device = 0;
  cuda(cudaGetDevice(&device), "cudaGetDevice");
  cuda(cudaSetDevice(device), "binding the device's context (cudaSetDevice)");
}

const desc::Header& LaunchChecks::descriptor(const DescriptorView& d, int tile) const {
  require(d.host != nullptr && d.device != nullptr,
          "descriptor host and device pointers must be set");
  const desc::Header& h = desc::header(d.host);
  require(h.magic == desc::kMagic,
          "descriptor has a bad magic number (not a CompileMask descriptor)");
  require(h.version == desc::kVersion, "descriptor version " + std::to_string(h.version) +
                                           " is not the supported version " +
                                           std::to_string(desc::kVersion));
  require(h.tile_m == tile && h.tile_n == tile,
          "descriptor tiles are " + std::to_string(h.tile_m) + "x" + std::to_string(h.tile_n) +
              "; the sm90 kernel needs 128x128 (specialize with Tiling{128, 128})");
  return h;
}

void LaunchChecks::dtype(DType dtype) const {
  require(dtype == DType::kBFloat16 || dtype == DType::kFloat16, "dtype must be bf16 or fp16");
}

void LaunchChecks::head_dims(const Problem& a) const {
  require(head_dim_supported(a.head_dim),
          "head_dim " + std::to_string(a.head_dim) + " is not supported (" + kHeadDimRule + ")");
  require(a.head_dim_v == 0 || head_dim_supported(a.head_dim_v),
          "head_dim_v " + std::to_string(a.head_dim_v) + " is not supported (0 means head_dim, " +
              "else " + kHeadDimRule + ")");
}

void LaunchChecks::heads_group(int32_t heads_q, int32_t heads_kv) const {
  require(heads_q % heads_kv == 0, "heads_q (" + std::to_string(heads_q) +
                                       ") must be a multiple of heads_kv (" +
                                       std::to_string(heads_kv) + ")");
}

void LaunchChecks::scale(float scale) const {
  require(scale >= 0.f && std::isfinite(scale), "scale must be finite and >= 0 (0: 1/sqrt(D))");
}

void LaunchChecks::softcap(float softcap) const {
  require(softcap >= 0.f && std::isfinite(softcap), "softcap must be finite and >= 0 (0: no cap)");
}

void LaunchChecks::per_head(const float* values, const char* name) const {
  require(reinterpret_cast<uintptr_t>(values) % alignof(float) == 0,
          std::string(name) + " must be 4-byte aligned (float32)");
}

void LaunchChecks::fits_header(const desc::Header& h, int tile, int32_t batch, int32_t heads_q,
                               int32_t nq, int32_t nk) const {
  require(nq == h.nq && nk == h.nk, "lengths nq=" + std::to_string(nq) +
                                        ", nk=" + std::to_string(nk) +
                                        " differ from the descriptor's nq=" + std::to_string(h.nq) +
                                        ", nk=" + std::to_string(h.nk));
  // Tiles hold 1 to `tile` rows each (descriptor.h), restarting at block boundaries.
  require(h.num_q_tiles >= (nq + tile - 1) / tile && h.num_q_tiles <= nq &&
              h.num_k_tiles >= (nk + tile - 1) / tile && h.num_k_tiles <= nk,
          "descriptor tile counts do not match its lengths");
  require(h.batch == 1 || h.batch == batch, "descriptor batch " + std::to_string(h.batch) +
                                                " must be 1 or batch " + std::to_string(batch));
  require(h.heads == 1 || h.heads == heads_q, "descriptor heads " + std::to_string(h.heads) +
                                                  " must be 1 or heads_q " +
                                                  std::to_string(heads_q));
}

bool LaunchChecks::packed_layout(const int32_t* q_offsets, const int32_t* k_offsets,
                                 int64_t total_q, int64_t total_k, int32_t nq, int32_t nk) const {
  const bool packed = q_offsets != nullptr || k_offsets != nullptr;
  require(!packed || (q_offsets != nullptr && k_offsets != nullptr),
          "packed layout needs both q_offsets and k_offsets");
  if (packed) {
    require(total_q >= nq && total_k >= nk, "packed layout needs total_q >= nq and total_k >= nk");
    // The offsets, and the rows the kernels compute from them, are int32.
    require(total_q <= INT32_MAX && total_k <= INT32_MAX,
            "packed layout needs total_q and total_k below 2^31 (the offsets are int32)");
  }
  return packed;
}

void LaunchChecks::tensor(const TensorRef& t, const char* name, bool packed) const {
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

void LaunchChecks::lse(const float* lse, int64_t stride_h, int64_t stride_b) const {
  require(lse != nullptr, "lse is null");
  require(stride_h >= 0 && stride_b >= 0, "lse strides must be >= 0");
}

bool LaunchChecks::problem(const desc::Header& h, int tile, const Problem& a) const {
  dtype(a.dtype);
  head_dims(a);
  require(a.batch >= 1 && a.heads_q >= 1 && a.heads_kv >= 1, "batch and heads must be >= 1");
  heads_group(a.heads_q, a.heads_kv);
  require(a.nq >= 1 && a.nk >= 1, "nq and nk must be >= 1");
  scale(a.scale);
  softcap(a.softcap);
  per_head(a.sinks, "sinks");
  per_head(a.alibi_slopes, "alibi_slopes");
  fits_header(h, tile, a.batch, a.heads_q, a.nq, a.nk);
  const bool packed = packed_layout(a.q_offsets, a.k_offsets, a.total_q, a.total_k, a.nq, a.nk);
  tensor(a.q, "q", packed);
  tensor(a.k, "k", packed);
  tensor(a.v, "v", packed);
  tensor(a.out, "out", packed);
  lse(a.lse, a.lse_stride_h, a.lse_stride_b);
  return packed;
}

int32_t value_head_dim(const Problem& a) {
  return a.head_dim_v != 0 ? a.head_dim_v : a.head_dim;
}

float softmax_scale(const Problem& a) {
  return a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(a.head_dim));
}

LogitFactors logit_factors(const Problem& a) {
  constexpr float kLog2e = 1.4426950408889634f;
  const float scale = softmax_scale(a);
  if (a.softcap == 0.f) return {scale * kLog2e, 0.f, 1.f / scale};
  return {a.softcap * kLog2e, scale / a.softcap, 1.f / a.softcap};
}

namespace {

// The device address of a tile-start table, or, with kWhereRestarted, null when its tiles are
// the uniform ones (ProblemShape::q_starts). Reads the host copy: O(tiles), once per launch.
const int32_t* tile_starts(const DescriptorView& d, uint32_t offset, int32_t count, int32_t length,
                           TileTables tables) {
  const int32_t* starts = desc::at<int32_t>(d.host, offset);
  bool uniform = tables == TileTables::kWhereRestarted;
  for (int32_t t = 0; t < count && uniform; ++t) {
    uniform = starts[t] == t * sm90::kKernelTile;
  }
  uniform = uniform && starts[count] == length;
  return uniform ? nullptr : desc::at<int32_t>(d.device, offset);
}

}  // namespace

sm90::ProblemShape problem_shape(const Problem& a, const DescriptorView& descriptor,
                                 TileTables tables) {
  const desc::Header& h = desc::header(descriptor.host);
  sm90::ProblemShape s{};
  s.batch = a.batch;
  s.heads_q = a.heads_q;
  s.heads_kv = a.heads_kv;
  s.nq = a.nq;
  s.nk = a.nk;
  s.head_dim = a.head_dim;
  s.head_dim_v = value_head_dim(a);
  s.num_q_tiles = h.num_q_tiles;
  s.num_k_tiles = h.num_k_tiles;
  s.q_offsets = a.q_offsets;
  s.k_offsets = a.k_offsets;
  s.total_q = a.total_q;
  s.total_k = a.total_k;
  s.q_starts = tile_starts(descriptor, h.q_starts_offset, h.num_q_tiles, h.nq, tables);
  s.k_starts = tile_starts(descriptor, h.k_starts_offset, h.num_k_tiles, h.nk, tables);
  return s;
}

sm90::RowsTensor rows_tensor(const TensorRef& t, int32_t columns) {
  constexpr int64_t kBytes = 2;  // bf16 and fp16
  return {const_cast<void*>(t.data), t.stride_s * kBytes, t.stride_h * kBytes,
          static_cast<int32_t>(columns * kBytes), 0u};
}

}  // namespace cm::cuda::host
