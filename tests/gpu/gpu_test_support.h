// Helpers shared by the sm90 kernel tests (forward_reference_test.cpp, bwd_reference_test.cpp):
// the Hopper check, plans of the example masks, 16-bit rounding of random inputs, device
// buffers and the example-mask cases both tests sweep.
#pragma once

#include <compilemask/compilemask.h>
#include <compilemask/cuda.h>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace cm::gpu_test {

// Whether device 0 has compute capability 9.0, the only one the sm90 kernels run on.
bool have_hopper();

#define SKIP_WITHOUT_HOPPER()         \
  if (!::cm::gpu_test::have_hopper()) \
  GTEST_SKIP() << "no compute capability 9.0 GPU: sm90 kernel tests skipped"

// Fails the test and returns unless the CUDA call succeeds.
#define CUDA_OK(call)                                                                              \
  do {                                                                                             \
    const cudaError_t cuda_ok_status = (call);                                                     \
    ASSERT_EQ(cuda_ok_status, cudaSuccess) << #call << ": " << cudaGetErrorString(cuda_ok_status); \
  } while (0)

// examples/NAME.mask compiled and specialized to 128x128 tiles; throws if it does not compile.
cm::Plan make_plan(const std::string& example, const cm::Params& params, int nq, int nk, int batch,
                   int heads);

// A host tensor rounded to the kernel's precision: the values the reference reads and the bits
// the device reads.
struct Rounded {
  std::vector<float> values;
  std::vector<uint16_t> bits;
};

Rounded rounded(const std::vector<float>& x, cuda::DType dtype);

// n standard normal values from rng, rounded.
Rounded random_rounded(size_t n, cuda::DType dtype, std::mt19937& rng);

// Device memory freed on scope exit; ptr is null when the allocation failed.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// One example-mask problem: [B, H, S, D] tensors at these lengths, head dim, heads and dtype.
struct Case {
  std::string example;
  cm::Params params;
  int nq, nk;
  int head_dim;
  int heads_q, heads_kv;
  cuda::DType dtype;
  float softcap = 0;   // logit cap (cuda::Problem::softcap); 0 means none
  bool sinks = false;  // attention sinks (cuda::Problem::sinks) of sink_logits(heads_q)
  bool alibi = false;  // ALiBi (cuda::Problem::alibi_slopes) of alibi_slopes(heads_q)
  int head_dim_v = 0;  // the columns of V and O (cuda::Problem::head_dim_v); 0 means head_dim
};

// One attention-sink logit per query head, from -1.5 up in steps of 0.9 (about the range of
// these inputs' largest logits, so a sink weighs from little to most of a row), head 1's -inf
// (no sink).
std::vector<float> sink_logits(int heads);

// The ALiBi slopes of Press et al. for `heads` heads, 2^(-8 (h + 1) / heads) for head h, as
// FlashAttention's users pass them.
std::vector<float> alibi_slopes(int heads);

void PrintTo(const Case& c, std::ostream* os);

// Every example mask at small odd shapes, with GQA, head dims 64 and 128 and four padded ones
// (8, 40, 96, 120), and both dtypes; the
// sanitizer filters of scripts/gpu address these cases by index, so append new ones.
std::vector<Case> example_cases();

// Example cases with their head dim raised above 128, for the kernels for 256: padded ones (136,
// 200) among them; Nq != Nk, rows that see no key, row tables, strips with narrow tiles and
// both dtypes.
std::vector<Case> wide_head_cases();

// Example cases with a logit cap of 1.5, which bends these inputs' logits (standard deviation 1):
// head dims 64, 128 and 200 (the kernels for 256), both dtypes, full tiles, partial tiles from
// bands and from grid formulas, and rows that see no key.
std::vector<Case> softcap_cases();

// Cases with attention sinks: full and partial tiles, rows that see no key (which then get the
// sink's LSE), GQA, both dtypes, head dims 64, 128 and 200 (the kernel for 256), a soft cap,
// and decoding shapes whose key parts and packed heads fwd_combine merges.
std::vector<Case> sink_cases();

// Cases with ALiBi: full and partial tiles, rows that see no key, Nq != Nk (the bias aligns the
// last query row with the last key), GQA, both dtypes, head dims 64, 128 and 200 (the kernel
// for 256), with a soft cap and with sinks, and decoding shapes whose key parts and packed heads
// (rows of several heads, each its own slope, in one tile) fwd_combine merges.
std::vector<Case> alibi_cases();

// Cases whose V and O have a head dim of their own (Case::head_dim_v): MLA's 192 and 128 (the
// forward's kernel for them, the backward's for 256) with rows that see no key, with a soft
// cap, sinks and ALiBi, and on decoding shapes whose key parts and packed heads fwd_combine
// merges; 160 and 104 on the same kernels, zero-padded; V wider than Q and K and narrower, on
// the kernels for 64, 128 and 256; Nq != Nk; both dtypes.
std::vector<Case> value_head_dim_cases();

// paged_cases' first two with head dims (192, 128) and (64, 128).
std::vector<Case> paged_value_head_dim_cases();

// Few query rows against many keys, the shapes that split keys and packed heads serve
// (decoding, a chunk of queries against a long cache): causal (aligned bottom-right) with one
// and with 17 rows, sliding windows, cross attention on the kernel for 256, more query rows than
// keys (the first rows see no key, unpacked), and MQA; both dtypes. All but the 17-row and the
// 130-row cases pack their GQA groups into shared tiles.
std::vector<Case> decode_cases();

// Decoding shapes whose key tiles are uniform, for K and V in pages: causal with 1 and 17 rows,
// a sliding window under MQA, head dim 200 (the kernel for 256, whose last key tile is 80 keys
// wide: two parts), more query rows than keys, and a padded batch (each sequence its own
// length); nk leaves the last page part-filled for every page size the tests use.
std::vector<Case> paged_cases();

}  // namespace cm::gpu_test
