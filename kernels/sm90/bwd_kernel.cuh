// The sm90 (Hopper) backward attention kernel driven by the transposed form of a CompileMask
// descriptor (per key tile: runs of full and partial query tiles).
//
// One CTA per (batch, kv head, key tile of 128 keys), three warpgroups:
//   WG0  producer: one thread TMA-loads K and V once, then, for every query head of the kv
//        group and every query tile the descriptor lists for this key tile, Q, dO, lse_log2
//        and dsum of 64 query rows at a time (a "step") into a 2-stage mbarrier ring.
//   WG1, WG2  consumers: each owns 64 of the 128 keys. Per step, by wgmma:
//          Sᵀ = K Qᵀ, dPᵀ = V dOᵀ                       (keys x 64 rows, from shared memory)
//          Pᵀ = exp2(Sᵀ scale_log2 - lse_log2), dSᵀ = Pᵀ (dPᵀ - dsum)   (in registers)
//          dV += Pᵀ dO, dK += dSᵀ Q                      (Pᵀ, dSᵀ as register operands)
//          dQ_step = dS K                                 (dS through shared memory; each
//                                                          warpgroup takes half the head dim)
//        dQ_step goes to shared memory and is added to the fp32 dq_accum workspace by one bulk
//        reduce-add (cp.reduce.async.bulk), or, in deterministic mode, by ordinary adds ordered
//        across key tiles with a per-64-row semaphore (ascending key tile).
// dK and dV stay in registers over all steps (so GQA groups are summed inside the CTA) and are
// written once. Full tiles run no mask code; partial tiles and the key tile cut by nk build a
// 64 x 128 visibility bitmap from the descriptor's per-row intervals. Rows past nq and rows
// that see no key have lse_log2 = +inf (bwd_params.h), so their P is exactly 0.
#pragma once

#include "bwd_params.h"
#include "sync.cuh"
#include "tile_mask.cuh"
#include "wgmma.cuh"

#include <compilemask/descriptor.h>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cute/tensor.hpp>

#include <cuda.h>

namespace cm::sm90 {

using namespace cute;

template <class ElementT, int kHeadDimV>
struct BwdConfig {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimV;
  static constexpr int kBlockN = kBwdTile;  // keys per CTA
  static_assert(kBlockN == kMaskTileN, "tile_mask.cuh assumes 128-column key tiles");
  static constexpr int kBlockM = kBwdStepRows;  // query rows per step
  static constexpr int kStages = 2;             // Q/dO pipeline depth
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kBoxCols = 64;  // TMA box width: 128 bytes, the swizzle span
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dims 64 and 128 are instantiated");
  // setmaxnreg split of the 168 x 384 registers the launch reserves: head dim 128 gives the
  // consumers (dK and dV, 64 fp32 each per thread) all it can; 64 leaves the producer room.
  static constexpr int kProducerRegs = kHeadDim == 128 ? 24 : 40;
  static constexpr int kConsumerRegs = kHeadDim == 128 ? 240 : 232;
  static_assert(128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= 168 * kThreads,
                "the register split must fit what the launch reserves");

  // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: keys are M, split over the two consumer warpgroups.
  using MmaSdP = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBlockM>, Int<kHeadDim>>>(),
      Layout<Shape<_2, _1, _1>>{}));
  // dV += Pᵀ dO and dK += dSᵀ Q: A from registers, B (dO, Q) head-dim contiguous (MN-major).
  using MmaKV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim>, Int<kBlockM>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));
  // dQ_step = dS K: query rows are M; the head dim (N) is split over the two warpgroups.
  // dS is stored query-contiguous (MN-major A), K head-dim contiguous (MN-major B).
  using MmaQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim / 2>, Int<kBlockN>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<_1, _2, _1>>{}));

  // 128-byte swizzled tiles laid out as TMA writes boxes of 64 columns: column block c of a
  // tile with R rows starts at element c * R * 64. The "t" layouts view the same bytes
  // transposed (head dim first), as the MN-major B operand.
  using LayoutKV = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                          Shape<Int<kBlockN>, Int<kHeadDim>>{}));
  using LayoutKt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{}));
  using LayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                         Shape<Int<kBlockM>, Int<kHeadDim>, Int<kStages>>{}));
  using LayoutQt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kHeadDim>, Int<kBlockM>, Int<kStages>>{},
                                          Step<_2, _1, _3>{}));
  // dS as (query row, key), query rows contiguous.
  using LayoutdS = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kBlockM>, Int<kBlockN>>{}));
  // An Sᵀ accumulator read as the register A operand of MmaKV: the accumulator's (e, h, j)
  // order, read as k-blocks of 16 columns ((e, h, j % 2), j / 2), is the wgmma A fragment order.
  using AccAsA =
      Layout<Shape<Shape<_2, _2, _2>, _1, Int<kBlockM / 16>>, Stride<Stride<_1, _2, _4>, _0, _8>>;

  static constexpr uint32_t kKVBytes = kBlockN * kHeadDim * sizeof(Element);
  static constexpr uint32_t kRowsBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kStepBytes = 2 * kRowsBytes + 2 * kBlockM * sizeof(float);
  static constexpr uint32_t kDqBytes = kBlockM * kHeadDim * sizeof(float);

  struct SharedStorage {
    alignas(1024) Element k[kBlockN * kHeadDim];
    alignas(1024) Element v[kBlockN * kHeadDim];
    alignas(1024) Element q[kStages * kBlockM * kHeadDim];
    alignas(1024) Element dout[kStages * kBlockM * kHeadDim];
    alignas(1024) Element ds[kBlockM * kBlockN];
    alignas(128) float dq[kBlockM * kHeadDim];  // rows of kHeadDim, chunks dq_chunk_swizzle'd
    alignas(16) float lse_log2[kStages][kBlockM];
    alignas(16) float dsum[kStages][kBlockM];
    uint32_t visible[kBlockM][kBlockN / 32];  // bit k % 32 of word k / 32: key k visible
    uint64_t kv_full;
    uint64_t step_full[kStages], step_empty[kStages];
  };
  static constexpr size_t kSmemBytes = smem_bytes<SharedStorage>();
  static_assert(cosize_v<LayoutKV> == kBlockN * kHeadDim, "K layout is dense");
  static_assert(cosize_v<LayoutKt> == kBlockN * kHeadDim, "Kᵀ layout is dense");
  static_assert(cosize_v<LayoutQ> == kStages * kBlockM * kHeadDim, "Q layout is dense");
  static_assert(cosize_v<LayoutQt> == kStages * kBlockM * kHeadDim, "Qᵀ layout is dense");
  static_assert(cosize_v<LayoutdS> == kBlockM * kBlockN, "dS layout is dense");
};

// The key tile n of kv head hk of sequence b.
struct BwdItem {
  int b, hk, n;
};

// CTAs are dispatched in blockIdx order, x fastest (the launch sets the grid to match).
// Default: x is the rank of the key tile in the descriptor's longest-first order of the group's
// first head, y the kv head hk, z the sequence b. The CTAs running at once then share one or
// two (b, hk), so the dQ accumulator rows, Q and dO they all touch stay in L2 instead of
// streaming from DRAM (perf-notes). Deterministic: x is hk, y is b, z the key tile in
// ascending order. A key tile's ordered dQ adds wait for the lower key tiles of its head,
// which were all dispatched before it, and the CTAs running at once belong to different heads
// and so do not wait for each other.
__device__ inline BwdItem decode_bwd_item(const BwdMainParams& p, bool deterministic) {
  if (deterministic) {
    return {static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x),
            static_cast<int>(blockIdx.z)};
  }
  const int rank = static_cast<int>(blockIdx.x);
  const int hk = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int group = p.shape.heads_q / p.shape.heads_kv;
  const desc::Instance& inst = instance_for(p.descriptor, p.shape, b, hk * group);
  return {b, hk, desc::at<uint16_t>(p.descriptor, inst.bwd_order_offset)[rank]};
}

// One step of the main loop: rows [64 half, 64 half + 64) of query tile m of query head h;
// pattern is the tile's pattern, -1 for a full tile.
struct BwdStep {
  int h, m, half, pattern;
};

// The query tiles of one key tile's row in the transposed form: partial runs, then full runs.
class QueryTileCursor {
 public:
  QueryTileCursor() = default;
  __device__ QueryTileCursor(const void* blob, const desc::TileRow& row)
      : partial_(desc::partial_runs(blob, row)),
        full_(desc::full_runs(blob, row)),
        partial_count_(row.partial_count),
        full_count_(row.full_count) {}

  // Moves to the next query tile m with its pattern (-1 for a full tile); false at the end.
  __device__ bool next(int& m, int& pattern) {
    while (at_ == end_) {
      if (run_ < partial_count_) {
        at_ = partial_[run_].first;
        end_ = at_ + partial_[run_].count;
        pattern_ = static_cast<int>(partial_[run_].pattern);
      } else if (run_ < partial_count_ + full_count_) {
        at_ = full_[run_ - partial_count_].first;
        end_ = at_ + full_[run_ - partial_count_].count;
        pattern_ = -1;
      } else {
        return false;
      }
      ++run_;
    }
    m = at_++;
    pattern = pattern_;
    return true;
  }

 private:
  const desc::PartialRun* partial_ = nullptr;
  const desc::FullRun* full_ = nullptr;
  int partial_count_ = 0, full_count_ = 0;
  int run_ = 0, at_ = 0, end_ = 0, pattern_ = -1;
};

// Walks the steps of an item in the one order producer and consumers share: query heads of the
// kv group, then the query tiles of the key tile's row in the transposed form, then the two
// 64-row halves of each (a second half starting at or past nq is skipped).
class StepCursor {
 public:
  __device__ StepCursor(const BwdMainParams& p, const BwdItem& item)
      : p_(p), item_(item), group_(p.shape.heads_q / p.shape.heads_kv) {}

  __device__ bool next(BwdStep& step) {
    for (;;) {
      if (g_ >= 0 && step_.half == 0 && step_.m >= 0 &&
          step_.m * kBwdTile + kBwdStepRows < p_.shape.nq) {
        step_.half = 1;
        step = step_;
        return true;
      }
      if (g_ >= 0 && tiles_.next(step_.m, step_.pattern)) {
        step_.half = 0;  // row m * 128 < nq: query tile m exists
        step = step_;
        return true;
      }
      if (++g_ == group_) return false;
      step_.h = item_.hk * group_ + g_;
      step_.m = -1;
      const desc::Instance& inst = instance_for(p_.descriptor, p_.shape, item_.b, step_.h);
      tiles_ = QueryTileCursor(p_.descriptor, desc::k_tile(p_.descriptor, inst, item_.n));
    }
  }

 private:
  const BwdMainParams& p_;
  BwdItem item_;
  int group_;
  int g_ = -1;
  BwdStep step_{0, -1, 0, -1};
  QueryTileCursor tiles_;
};

__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes,
                                          uint64_t& bar) {
  SM90_BULK_COPY_G2S::copy(gmem, &bar, smem, static_cast<int32_t>(bytes));
}

// dst[i] += src[i] for `bytes` of fp32, by the copy engine; completes asynchronously.
__device__ __forceinline__ void bulk_reduce_add(float* dst, const float* src, uint32_t bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
      "r"(static_cast<uint32_t>(__cvta_generic_to_shared(src))), "r"(bytes)
      : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until the committed bulk operations have finished reading shared memory.
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
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

template <class Config>
__device__ void run_bwd_producer(const BwdMainParams& p, typename Config::SharedStorage& ss,
                                 const BwdItem& item, const CUtensorMap* tma_q,
                                 const CUtensorMap* tma_k, const CUtensorMap* tma_v,
                                 const CUtensorMap* tma_dout) {
  constexpr int kColBlocks = Config::kHeadDim / Config::kBoxCols;
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  const bool packed = p.shape.q_offsets != nullptr;
  const int batch = packed ? 0 : item.b;
  const int q_base = packed ? p.shape.q_offsets[item.b] : 0;
  const int k_row = (packed ? p.shape.k_offsets[item.b] : 0) + item.n * kBlockN;

  expect_bytes(ss.kv_full, 2 * Config::kKVBytes);
  for (int c = 0; c < kColBlocks; ++c) {
    tma_load(tma_k, ss.kv_full, ss.k + c * kBlockN * Config::kBoxCols, c * Config::kBoxCols, k_row,
             item.hk, batch);
    tma_load(tma_v, ss.kv_full, ss.v + c * kBlockN * Config::kBoxCols, c * Config::kBoxCols, k_row,
             item.hk, batch);
  }

  PipeState<Config::kStages> st;
  StepCursor steps(p, item);
  BwdStep step;
  while (steps.next(step)) {
    const int row = step.m * kBwdTile + step.half * kBwdStepRows;
    const int stage_elems = kBlockM * Config::kHeadDim;
    wait_barrier(ss.step_empty[st.stage], st.phase ^ 1u);
    uint64_t& full = ss.step_full[st.stage];
    expect_bytes(full, Config::kStepBytes);
    for (int c = 0; c < kColBlocks; ++c) {
      const int offset = st.stage * stage_elems + c * kBlockM * Config::kBoxCols;
      tma_load(tma_q, full, ss.q + offset, c * Config::kBoxCols, q_base + row, step.h, batch);
      tma_load(tma_dout, full, ss.dout + offset, c * Config::kBoxCols, q_base + row, step.h, batch);
    }
    const int64_t ws_row = (int64_t{item.b} * p.shape.heads_q + step.h) * p.shape.rows_padded + row;
    bulk_load(ss.lse_log2[st.stage], p.ws.lse_log2 + ws_row, kBlockM * sizeof(float), full);
    bulk_load(ss.dsum[st.stage], p.ws.dsum + ws_row, kBlockM * sizeof(float), full);
    st.advance();
  }
}

// Where element i = e + 2h + 4j of a thread's wgmma accumulator fragment (m64nNk16, one
// warpgroup) lies: row 16 (warp % 4) + lane / 4 + 8h, column 8j + 2 (lane % 4) + e. The
// fragment-to-coordinate map is checked against CuTe's partitioning by bwd_layout_test.
struct Fragment {
  int row0;  // 16 (warp % 4) + lane / 4
  int col0;  // 2 (lane % 4)
  int r8;    // lane / 4: row0 % 8, equal for both rows of the thread
  __host__ __device__ explicit Fragment(int thread)
      : row0(16 * ((thread % 128) / 32) + (thread % 32) / 4),
        col0(2 * (thread % 4)),
        r8((thread % 32) / 4) {}
  static constexpr int index(int e, int h, int j) { return e + 2 * h + 4 * j; }
};

// The consumer thread index (threads 128.. of the CTA), re-read from %tid.x. Shared-memory
// addresses derived from it are recomputed where they are used, instead of being hoisted out
// of the main loop and held in registers that the accumulators need.
__device__ __forceinline__ int fresh_consumer_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t - 128;
}

// Physical element offset of (query row q, key k) in the dS tile (Config::LayoutdS: 64 query
// rows contiguous per key, 128-byte swizzle), also checked by bwd_layout_test.
__host__ __device__ __forceinline__ int ds_offset(int q, int k) {
  return 64 * k + 8 * ((q / 8) ^ (k % 8)) + q % 8;
}

template <class Config, bool kDeterministic>
struct BwdConsumer {
  using Element = typename Config::Element;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kHeadDim = Config::kHeadDim;
  static constexpr int kBarrier = 1;           // named barrier of the 256 consumer threads
  static constexpr int kWarpgroupBarrier = 2;  // + wg: named barrier of one consumer warpgroup

  const BwdMainParams& p;
  typename Config::SharedStorage& ss;
  const BwdItem item;
  int tid;  // 0..255 among the consumers

  __device__ int wg() const { return tid / 128; }

  __device__ void sync_consumers() const { named_sync(kBarrier, Config::kConsumerThreads); }
  __device__ void sync_warpgroup() const { named_sync(kWarpgroupBarrier + wg(), 128); }

  // Every consumer thread arrives, not one per warp: each has read lse_log2 and dsum of the
  // stage with ordinary loads, and the producer's next bulk copy overwrites them, so each
  // reader's own arrival orders its reads before that write (compute-sanitizer racecheck
  // reports the one-arrival-per-warp form).
  __device__ void release(uint64_t& bar) const { arrive_barrier(bar); }

  // The warpgroup's two words of ss.visible for the step's 64 rows (its keys [64 wg, +64)):
  // thread t of the warpgroup computes keys [32 (2 wg + t % 2), +32) of row t / 2, from the
  // pattern's intervals (all keys for a full tile) cut at nk; rows past nq see none. Each
  // warpgroup reads only its own words, so only it has to wait for them.
  __device__ void build_visibility(const BwdStep& step) const {
    const int r = (tid % 128) / 2;
    const int word = 2 * wg() + tid % 2;
    const int tile_row = step.half * kBwdStepRows + r;
    const int q0 = step.m * kBwdTile;
    const int k0 = item.n * kBwdTile;
    const desc::Pattern pattern = tile_pattern(p.descriptor, step.pattern);
    ss.visible[r][word] = q0 + tile_row < p.shape.nq
                              ? row_visibility(p.descriptor, pattern, q0, k0, tile_row,
                                               p.shape.nk - k0, WindowColumns(word))
                              : 0u;
  }

  // Key tiles below item.n that visit query tile m of head h's mask: the number of dQ adds
  // that come before this CTA's in deterministic mode.
  __device__ int dq_rank(int h, int m) const {
    const desc::Instance& inst = instance_for(p.descriptor, p.shape, item.b, h);
    const desc::TileRow& row = desc::q_tile(p.descriptor, inst, m);
    const desc::FullRun* full = desc::full_runs(p.descriptor, row);
    const desc::PartialRun* partial = desc::partial_runs(p.descriptor, row);
    int rank = 0;
    for (int i = 0; i < row.full_count; ++i) {
      rank += max(0, min(item.n - full[i].first, static_cast<int>(full[i].count)));
    }
    for (int i = 0; i < row.partial_count; ++i) {
      rank += max(0, min(item.n - partial[i].first, static_cast<int>(partial[i].count)));
    }
    return rank;
  }

  // dst += ss.dq after every lower key tile added its part, then signals the next one.
  __device__ void add_dq_in_order(float* dst, int32_t* semaphore, int rank) const {
    if (tid == 0) {
      while (load_acquire(semaphore) != rank) {
      }
    }
    sync_consumers();
    const float4* src = reinterpret_cast<const float4*>(ss.dq);
    float4* out = reinterpret_cast<float4*>(dst);
    for (int i = tid; i < kBlockM * kHeadDim / 4; i += Config::kConsumerThreads) {
      float4 a = __ldcg(out + i);
      const float4 b = src[i];
      a.x += b.x;
      a.y += b.y;
      a.z += b.z;
      a.w += b.w;
      __stcg(out + i, a);
    }
    __threadfence();
    sync_consumers();
    if (tid == 0) atomicAdd(semaphore, 1);
  }

  __device__ void run() {
    using MmaSdP = typename Config::MmaSdP;
    using MmaKV = typename Config::MmaKV;
    using MmaQ = typename Config::MmaQ;
    using AccAsA = typename Config::AccAsA;
    MmaSdP mma_sdp;
    MmaKV mma_kv;
    MmaQ mma_q;
    auto thr_sdp = mma_sdp.get_thread_slice(tid);
    auto thr_kv = mma_kv.get_thread_slice(tid);
    auto thr_q = mma_q.get_thread_slice(tid);

    Tensor sK = make_tensor(make_smem_ptr(ss.k), typename Config::LayoutKV{});
    Tensor sV = make_tensor(make_smem_ptr(ss.v), typename Config::LayoutKV{});
    Tensor sKt = make_tensor(make_smem_ptr(ss.k), typename Config::LayoutKt{});
    Tensor sQ = make_tensor(make_smem_ptr(ss.q), typename Config::LayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(ss.dout), typename Config::LayoutQ{});
    Tensor sQt = make_tensor(make_smem_ptr(ss.q), typename Config::LayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(ss.dout), typename Config::LayoutQt{});
    Tensor sdS = make_tensor(make_smem_ptr(ss.ds), typename Config::LayoutdS{});

    Tensor tSrK = thr_sdp.partition_fragment_A(sK);
    Tensor tSrV = thr_sdp.partition_fragment_A(sV);
    Tensor tSrQ = thr_sdp.partition_fragment_B(sQ);
    Tensor tSrdO = thr_sdp.partition_fragment_B(sdO);
    Tensor tKVrdOt = thr_kv.partition_fragment_B(sdOt);
    Tensor tKVrQt = thr_kv.partition_fragment_B(sQt);
    Tensor tQrdS = thr_q.partition_fragment_A(sdS);
    Tensor tQrKt = thr_q.partition_fragment_B(sKt);

    Tensor tdKrdK = partition_fragment_C(mma_kv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    Tensor tdVrdV = partition_fragment_C(mma_kv, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    clear(tdKrdK);
    clear(tdVrdV);
    const Fragment frag(tid);
    const int key0 = 64 * wg() + frag.row0;  // tile-relative key of the thread's Sᵀ row h = 0
    const bool edge_tile = p.shape.nk % kBlockN != 0 && item.n == p.shape.num_k_tiles - 1;
    wait_barrier(ss.kv_full, 0);

    PipeState<Config::kStages> st;
    StepCursor steps(p, item);
    BwdStep step;
    while (steps.next(step)) {
      wait_barrier(ss.step_full[st.stage], st.phase);
      // Sᵀ and dPᵀ: element (e, h, j) is key key0 + 8h, step row 8j + col0 + e.
      Tensor tSrS = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      Tensor tSrdP = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      wgmma<true>(mma_sdp, tSrK, tSrQ(_, _, _, st.stage), tSrS);
      wgmma<true>(mma_sdp, tSrV, tSrdO(_, _, _, st.stage), tSrdP);
      // Bit i of keep: element i of this thread's Sᵀ is visible.
      uint32_t keep = ~0u;
      const Fragment mask_frag(fresh_consumer_tid());
      if (step.pattern >= 0 || edge_tile) {
        build_visibility(step);  // overlaps the two GEMMs
        sync_warpgroup();
        keep = 0;
        CUTE_UNROLL
        for (int j = 0; j < kBlockM / 8; ++j) {
          CUTE_UNROLL
          for (int e = 0; e < 2; ++e) {
            const int key = 64 * wg() + mask_frag.row0;
            const uint32_t word = ss.visible[8 * j + mask_frag.col0 + e][key / 32];
            CUTE_UNROLL
            for (int h = 0; h < 2; ++h) {
              keep |= ((word >> ((key + 8 * h) % 32)) & 1u) << Fragment::index(e, h, j);
            }
          }
        }
      }
      warpgroup_wait<0>();

      const float* lse_log2 = ss.lse_log2[st.stage];
      const float* dsum = ss.dsum[st.stage];
      Tensor tPrP = make_tensor<Element>(AccAsA{});
      Tensor tdSrdS = make_tensor<Element>(AccAsA{});
      CUTE_UNROLL
      for (int j = 0; j < kBlockM / 8; ++j) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int row = 8 * j + mask_frag.col0 + e;
          const float lse = lse_log2[row];
          const float ds_bias = dsum[row];
          CUTE_UNROLL
          for (int h = 0; h < 2; ++h) {
            const int i = Fragment::index(e, h, j);
            float prob = exp2_approx(fmaf(tSrS(i), p.scale_log2, -lse));
            prob = (keep >> i) & 1u ? prob : 0.f;
            tPrP(i) = static_cast<Element>(prob);
            tdSrdS(i) = static_cast<Element>(prob * (tSrdP(i) - ds_bias));
          }
        }
      }
      // dV and dK take P and dS from registers: they run while dS goes through shared memory.
      wgmma<false>(mma_kv, tPrP, tKVrdOt(_, _, _, st.stage), tdVrdV);
      wgmma<false>(mma_kv, tdSrdS, tKVrQt(_, _, _, st.stage), tdKrdK);
      // dS to shared memory as (step row, key), row pairs e = 0, 1 in one 32-bit store.
      const Fragment store_frag(fresh_consumer_tid());
      CUTE_UNROLL
      for (int j = 0; j < kBlockM / 8; ++j) {
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int key = 64 * wg() + store_frag.row0 + 8 * h;
          const int at = ds_offset(8 * j + store_frag.col0, key);
          Element pair[2] = {tdSrdS(Fragment::index(0, h, j)), tdSrdS(Fragment::index(1, h, j))};
          *reinterpret_cast<uint32_t*>(ss.ds + at) = *reinterpret_cast<const uint32_t*>(pair);
        }
      }
      cutlass::arch::fence_view_async_shared();           // dS is read by wgmma (async proxy)
      if (!kDeterministic && tid == 0) bulk_wait_read();  // ss.dq of the last step is free
      sync_consumers();

      // dQ_step: element (e, h, j) is step row row0 + 8h, column (D / 2) wg + 8j + col0 + e.
      Tensor tQrdQ = partition_fragment_C(mma_q, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      wgmma<true>(mma_q, tQrdS, tQrKt, tQrdQ);
      warpgroup_wait<0>();
      release(ss.step_empty[st.stage]);
      st.advance();

      const Fragment dq_frag(fresh_consumer_tid());
      CUTE_UNROLL
      for (int j = 0; j < kHeadDim / 16; ++j) {
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int r = dq_frag.row0 + 8 * h;
          const int chunk = (kHeadDim / 16) * wg() + j;
          const int at = r * kHeadDim + 8 * dq_chunk_swizzle(dq_frag.r8, chunk) + dq_frag.col0;
          *reinterpret_cast<float2*>(ss.dq + at) =
              make_float2(tQrdQ(Fragment::index(0, h, j)), tQrdQ(Fragment::index(1, h, j)));
        }
      }
      cutlass::arch::fence_view_async_shared();  // ss.dq is read by the copy engine
      sync_consumers();
      const int row = step.m * kBwdTile + step.half * kBwdStepRows;
      const int64_t bh = int64_t{item.b} * p.shape.heads_q + step.h;
      float* dst = p.ws.dq_accum + (bh * p.shape.rows_padded + row) * kHeadDim;
      if constexpr (kDeterministic) {
        int32_t* semaphore =
            p.ws.semaphores + bh * (p.shape.rows_padded / kBwdStepRows) + row / kBwdStepRows;
        add_dq_in_order(dst, semaphore, tid == 0 ? dq_rank(step.h, step.m) : 0);
      } else if (tid == 0) {
        bulk_reduce_add(dst, ss.dq, Config::kDqBytes);
      }
    }
    if (!kDeterministic && tid == 0) bulk_wait_all();
    store_dkdv(tdKrdK, tdVrdV, frag, key0);
  }

  // dK (scaled) and dV of the keys below nk, in the element type. Element (e, h, j) is key
  // key0 + 8h, column 8j + col0 + e.
  template <class TAcc>
  __device__ void store_dkdv(const TAcc& dk, const TAcc& dv, const Fragment& frag, int key0) const {
    const bool packed = p.shape.k_offsets != nullptr;
    const int64_t batch = packed ? 0 : item.b;
    const int64_t row0 = packed ? p.shape.k_offsets[item.b] : 0;
    Element* dk_out = static_cast<Element*>(p.dk) + batch * p.dk_stride_b + item.hk * p.dk_stride_h;
    Element* dv_out = static_cast<Element*>(p.dv) + batch * p.dv_stride_b + item.hk * p.dv_stride_h;
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int key = item.n * kBlockN + key0 + 8 * h;
      if (key >= p.shape.nk) continue;
      Element* dk_row = dk_out + (row0 + key) * p.dk_stride_s + frag.col0;
      Element* dv_row = dv_out + (row0 + key) * p.dv_stride_s + frag.col0;
      CUTE_UNROLL
      for (int j = 0; j < kHeadDim / 8; ++j) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const int i = Fragment::index(e, h, j);
          dk_row[8 * j + e] = static_cast<Element>(dk(i) * p.scale);
          dv_row[8 * j + e] = static_cast<Element>(dv(i));
        }
      }
    }
  }
};

template <class Config, bool kDeterministic>
__global__ void __launch_bounds__(Config::kThreads, 1)
    bwd_kernel(const __grid_constant__ BwdMainParams params,
               const __grid_constant__ CUtensorMap tma_q, const __grid_constant__ CUtensorMap tma_k,
               const __grid_constant__ CUtensorMap tma_v,
               const __grid_constant__ CUtensorMap tma_dout) {
  extern __shared__ unsigned char smem_raw[];
  auto* ss = &aligned_storage<typename Config::SharedStorage>(smem_raw);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    prefetch_tensor_maps(&tma_q, &tma_k, &tma_v, &tma_dout);
    Barrier::init(&ss->kv_full, 1);
    for (int s = 0; s < Config::kStages; ++s) {
      Barrier::init(&ss->step_full[s], 1);
      Barrier::init(&ss->step_empty[s], Config::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  const BwdItem item = decode_bwd_item(params, kDeterministic);
  if (warp < 4) {
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (threadIdx.x == 0) {
      run_bwd_producer<Config>(params, *ss, item, &tma_q, &tma_k, &tma_v, &tma_dout);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
    BwdConsumer<Config, kDeterministic>{params, *ss, item, static_cast<int>(threadIdx.x) - 128}
        .run();
  }
}

}  // namespace cm::sm90
