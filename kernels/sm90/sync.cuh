// Synchronisation and copy primitives of the sm90 kernels: mbarrier waits with phase tracking,
// TMA tile loads and bulk copies completing on an mbarrier, bulk reductions, an acquiring load,
// and named barriers among consumer warps.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cute/arch/copy_sm90_tma.hpp>

#include <cuda.h>
#include <stdint.h>

namespace cm::sm90 {

using Barrier = cutlass::arch::ClusterTransactionBarrier;

// A ring of `kStages` full/empty barrier pairs. Producer and consumers each keep their own
// PipeState and advance it once per item; the phase bit flips on wrap-around.
template <int kStages>
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

// Waits until the barrier completed the phase of parity `phase`. A fresh barrier counts as
// having completed parity 1, so producers start waiting on "empty" with phase ^ 1.
__device__ __forceinline__ void wait_barrier(uint64_t& bar, uint32_t phase) {
  Barrier::wait(&bar, phase);
}

__device__ __forceinline__ void arrive_barrier(uint64_t& bar) {
  Barrier::arrive(&bar);
}

// One arrival per warp, once all of its lanes got here (barriers counting warps). Lane 0
// releases the slot, so a shared record the warp read must have been read by lane 0 alone:
// see warp_uniform_load.
__device__ __forceinline__ void arrive_per_warp(uint64_t& bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) arrive_barrier(bar);
}

// A warp-uniform record in shared memory, read by lane 0 and broadcast, so that the reads the
// warp's arrive_per_warp releases are all lane 0's own (what compute-sanitizer's racecheck
// can follow; a record read by every lane and released by lane 0 alone is reported).
template <class T>
__device__ __forceinline__ T warp_uniform_load(const T& shared) {
  constexpr int kWords = (sizeof(T) + 3) / 4;
  uint32_t words[kWords] = {};
  if (threadIdx.x % 32 == 0) memcpy(words, &shared, sizeof(T));
  for (int i = 0; i < kWords; ++i) words[i] = __shfl_sync(0xffffffffu, words[i], 0);
  T value;
  memcpy(&value, words, sizeof(T));
  return value;
}

__device__ __forceinline__ void expect_bytes(uint64_t& bar, uint32_t bytes) {
  Barrier::arrive_and_expect_tx(&bar, bytes);
}

// One box of a 4-D tensor map (dims: head_dim, rows, heads, batch) into shared memory.
__device__ __forceinline__ void tma_load(const CUtensorMap* map, uint64_t& bar, void* smem, int d0,
                                         int row, int head, int batch) {
  constexpr auto kHint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
  cute::SM90_TMA_LOAD_4D::copy(map, &bar, kHint, smem, d0, row, head, batch);
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Brings the tensor maps' descriptors into cache before the first TMA load (one thread).
template <class... Maps>
__device__ __forceinline__ void prefetch_tensor_maps(const Maps*... maps) {
  (prefetch_tensor_map(maps), ...);
}

// Bulk copies (the backward's per-step rows and its dQ reduction) and an acquiring load.
// bulk_load: `bytes` from global to shared memory, completing on the mbarrier `bar`.
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes,
                                          uint64_t& bar) {
  cute::SM90_BULK_COPY_G2S::copy(gmem, &bar, smem, static_cast<int32_t>(bytes));
}

// dst[i] += src[i] for `bytes` of fp32, by the copy engine; completes asynchronously.
__device__ __forceinline__ void bulk_reduce_add(float* dst, const float* src, uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
      "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(bytes)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until all but the newest kPending committed bulk operations have finished reading
// shared memory.
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until the committed bulk operations are complete, writes included.
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ int load_acquire(const int32_t* p) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(value) : "l"(p) : "memory");
  return value;
}

__device__ __forceinline__ void add_release(int32_t* p, int32_t value) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(p), "r"(value) : "memory");
}

// Orders this thread's global-memory accesses of the generic proxy (ordinary loads and stores)
// with its later ones of the async proxy (TMA and bulk copies), and the other way round.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// Named barriers: id 0 is __syncthreads, so ids start at 1.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Dynamic shared memory holding a kernel's Storage: the launch reserves smem_bytes<Storage>()
// and the kernel rounds its base up to the 1024-byte alignment of the 128-byte TMA swizzle.
template <class Storage>
constexpr size_t smem_bytes() {
  return sizeof(Storage) + 1024;
}

// The base is advanced by pointer arithmetic on `raw`, never through an integer: the compiler
// then still knows every access through Storage is to shared memory and emits LDS/STS. A
// pointer rebuilt from an integer is generic, and each access through it became LD.E/ST.E,
// which take the load/store unit's global path (their stalls were about a tenth of the
// backward's samples in Nsight Compute).
template <class Storage>
__device__ Storage& aligned_storage(unsigned char* raw) {
  const auto shared_address = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  return *reinterpret_cast<Storage*>(raw + (1024 - shared_address % 1024) % 1024);
}

}  // namespace cm::sm90
