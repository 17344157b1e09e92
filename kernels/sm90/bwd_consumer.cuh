// The backward main kernel's consumer warpgroups: the five products of each step by wgmma, P
// and dS in registers, dK and dV accumulated in registers, dQ reduced into the fp32 workspace.
#pragma once

#include "bwd_params.h"
#include "bwd_work.cuh"
#include "sync.cuh"
#include "thread_helpers.cuh"
#include "tile_mask.cuh"
#include "wgmma.cuh"

#include <compilemask/descriptor.h>

#include <cutlass/arch/barrier.h>
#include <cute/tensor.hpp>

namespace cm::sm90 {

using namespace cute;

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

  const BwdMainParams& p;
  typename Config::SharedStorage& ss;
  const BwdItem item;
  int tid;  // 0..255 among the consumers

  __device__ int wg() const { return tid / 128; }

  __device__ void sync_consumers() const {
    named_sync(kBwdConsumersBarrier, Config::kConsumerThreads);
  }
  __device__ void sync_warpgroup() const { named_sync(kBwdWarpgroupBarrier + wg(), 128); }

  // Every consumer thread arrives, not one per warp: each has read lse_log2 and dsum of the
  // stage with ordinary loads, and the producer's next bulk copy overwrites them, so each
  // reader's own arrival orders its reads before that write (compute-sanitizer racecheck
  // reports the one-arrival-per-warp form).
  __device__ void release(uint64_t& bar) const { arrive_barrier(bar); }

  // The warpgroup's two words of ss.visible for the step's 64 rows (its keys [64 wg, +64)):
  // thread t of the warpgroup computes keys [32 (2 wg + t % 2), +32) of row t / 2, from the
  // pattern's intervals (all keys for a full tile) cut at the key tile's width; rows past the
  // query tile's end see none. Each
  // warpgroup reads only its own words, so only it has to wait for them.
  __device__ void build_visibility(const BwdStep& step) const {
    const int r = (tid % 128) / 2;
    const int word = 2 * wg() + tid % 2;
    const int tile_row = step.half * kBwdStepRows + r;
    const desc::TileSpan rows = desc::tile_span(p.shape.q_starts, step.m);
    const desc::TileSpan keys = desc::k_tile_span(p.descriptor, item.n);
    TileMask mask = tile_mask(p.descriptor, step.pattern);
    mask.at_keys(keys.begin, WindowColumns(word));
    ss.visible[r][word] = tile_row < rows.size()
                              ? row_visibility(p.descriptor, mask, rows.begin, tile_row,
                                               keys.size(), WindowColumns(word))
                              : 0u;
  }

  // dst += dq after every lower key tile added its part, then signals the next one.
  __device__ void add_dq_in_order(float* dst, const float* dq, int32_t* semaphore, int rank) const {
    if (tid == 0) {
      while (load_acquire(semaphore) != rank) {
      }
    }
    sync_consumers();
    const float4* src = reinterpret_cast<const float4*>(dq);
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
    wait_barrier(ss.kv_full, 0);
    if (!kDeterministic) wait_barrier(ss.slice_zeroed, 0);  // bwd_zeroing.cuh

    PipeState<Config::kStages> st;
    int dq_buffer = 0;
    StepCursor steps(p, item);
    BwdStep step;
    const int key_width = desc::k_tile_span(p.descriptor, item.n).size();
    while (steps.next(step)) {
      wait_barrier(ss.step_full[st.stage], st.phase);
      // Sᵀ and dPᵀ: element (e, h, j) is key key0 + 8h, step row 8j + col0 + e.
      Tensor tSrS = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      Tensor tSrdP = partition_fragment_C(mma_sdp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      wgmma<true>(mma_sdp, tSrK, tSrQ(_, _, _, st.stage), tSrS);
      wgmma<true>(mma_sdp, tSrV, tSrdO(_, _, _, st.stage), tSrdP);
      // Bit i of keep: element i of this thread's Sᵀ is visible.
      uint32_t keep = ~0u;
      const Fragment mask_frag(fresh_thread_index() - 128);
      if (tile_needs_mask(step.pattern, key_width)) {
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
      const Fragment store_frag(fresh_thread_index() - 128);
      CUTE_UNROLL
      for (int j = 0; j < kBlockM / 8; ++j) {
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int key = 64 * wg() + store_frag.row0 + 8 * h;
          const int at = ds_offset(8 * j + store_frag.col0, key);
          store_pair(ss.ds + at, tdSrdS(Fragment::index(0, h, j)),
                     tdSrdS(Fragment::index(1, h, j)));
        }
      }
      cutlass::arch::fence_view_async_shared();  // dS is read by wgmma (async proxy)
      float* dq = ss.dq[dq_buffer];
      // The reduce-add that read this buffer, two steps ago, is done reading it.
      if (!kDeterministic && tid == 0) bulk_wait_read<Config::kDqBuffers - 1>();
      sync_consumers();

      // dQ_step: element (e, h, j) is step row row0 + 8h, column (D / 2) wg + 8j + col0 + e.
      Tensor tQrdQ = partition_fragment_C(mma_q, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      wgmma<true>(mma_q, tQrdS, tQrKt, tQrdQ);
      warpgroup_wait<0>();
      release(ss.step_empty[st.stage]);
      st.advance();

      const Fragment dq_frag(fresh_thread_index() - 128);
      CUTE_UNROLL
      for (int j = 0; j < kHeadDim / 16; ++j) {
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int r = dq_frag.row0 + 8 * h;
          const int chunk = (kHeadDim / 16) * wg() + j;
          const int at = r * kHeadDim + 8 * dq_chunk_swizzle(dq_frag.r8, chunk) + dq_frag.col0;
          *reinterpret_cast<float2*>(dq + at) =
              make_float2(tQrdQ(Fragment::index(0, h, j)), tQrdQ(Fragment::index(1, h, j)));
        }
      }
      cutlass::arch::fence_view_async_shared();  // dq is read by the copy engine
      sync_consumers();
      const int row = step.m * kBwdTile + step.half * kBwdStepRows;
      const int64_t bh = int64_t{item.b} * p.shape.heads_q + step.h;
      float* dst = p.ws.dq_accum + (bh * p.shape.rows_padded + row) * kHeadDim;
      if constexpr (kDeterministic) {
        int32_t* semaphore =
            p.ws.semaphores + bh * (p.shape.rows_padded / kBwdStepRows) + row / kBwdStepRows;
        add_dq_in_order(dst, dq, semaphore,
                        tid == 0 ? dq_rank(p, item, step.h, step.m, step.half) : 0);
      } else if (tid == 0) {
        bulk_reduce_add(dst, dq, Config::kDqBytes);
      }
      dq_buffer = (dq_buffer + 1) % Config::kDqBuffers;
    }
    if (!kDeterministic && tid == 0) bulk_wait_all();
    store_dkdv(tdKrdK, tdVrdV, frag, key0);
  }

  // dK (scaled) and dV of the keys below nk and their first head_dim columns, in the element type,
  // staged through the Q and dO rings (free once both warpgroups' last products are done) so that
  // every row goes out in 16-byte stores. Element (e, h, j) of the accumulators is key key0 + 8h,
  // column 8j + col0 + e.
  template <class TAcc>
  __device__ void store_dkdv(const TAcc& dk, const TAcc& dv, const Fragment& frag, int key0) const {
    static_assert(Config::kStages * kBlockM >= kBlockN, "the Q and dO rings hold dK and dV");
    constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
    // Chunk c of row r lies at chunk c ^ (r % 8): a warp's pair stores (8 rows, one chunk
    // each) fall in 8 different bank groups.
    const auto staged = [](int row, int col) {
      return row * kHeadDim + 8 * ((col / 8) ^ (row % 8)) + col % 8;
    };
    sync_consumers();  // both warpgroups' products are done with Q and dO
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      CUTE_UNROLL
      for (int j = 0; j < kHeadDim / 8; ++j) {  // columns 8j + col0 + {0, 1}; col0 is even
        const int i = Fragment::index(0, h, j);
        const int at = staged(key0 + 8 * h, 8 * j + frag.col0);
        store_pair(ss.q + at, dk(i) * p.scale, dk(i + 1) * p.scale);
        store_pair(ss.dout + at, dv(i), dv(i + 1));
      }
    }
    sync_consumers();
    const bool packed = p.shape.k_offsets != nullptr;
    const int64_t batch = packed ? 0 : item.b;
    const desc::TileSpan keys = desc::k_tile_span(p.descriptor, item.n);
    const int64_t row0 = (packed ? p.shape.k_offsets[item.b] : 0) + int64_t{keys.begin};
    Element* dk_out = static_cast<Element*>(p.dk) + batch * p.dk_stride_b + item.hk * p.dk_stride_h;
    Element* dv_out = static_cast<Element*>(p.dv) + batch * p.dv_stride_b + item.hk * p.dv_stride_h;
    const int rows = keys.size();
    for (int i = fresh_thread_index() - 128; i < rows * kChunks; i += Config::kConsumerThreads) {
      const int r = i / kChunks;
      const int col = 8 * (i % kChunks);
      if (col >= p.shape.head_dim) continue;
      *reinterpret_cast<uint4*>(dk_out + (row0 + r) * p.dk_stride_s + col) =
          *reinterpret_cast<const uint4*>(ss.q + staged(r, col));
      *reinterpret_cast<uint4*>(dv_out + (row0 + r) * p.dv_stride_s + col) =
          *reinterpret_cast<const uint4*>(ss.dout + staged(r, col));
    }
  }
};

}  // namespace cm::sm90
