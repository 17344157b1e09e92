// The backward main kernel's consumer warpgroups: the five products of each step by wgmma, P
// and dS in registers, dK and dV accumulated in registers, dQ reduced into the fp32 workspace.
// One main loop for both BwdConfig designs (keys or head dim split over the warpgroups).
#pragma once

#include "bwd_params.h"
#include "bwd_work.cuh"
#include "logit_mods.h"
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

// ALiBi of a step (BwdMainParams::alibi_slopes) for a thread's Sᵀ fragment: element (e, h, j)
// gains -slope |offset[h] - (8j + e)|, slope in the units of the scores (BwdMainParams::
// score_units); offset[h] is the distance between the element's key and query position at
// j = e = 0.
struct AlibiStep {
  float slope;
  float offset[2];
};

template <class Config, bool kDeterministic, int kLogitMods, bool kHeadSplits>
struct BwdConsumer {
  static constexpr bool kSoftcap = (kLogitMods & kCappedLogits) != 0;
  static constexpr bool kAlibi = (kLogitMods & kAlibiLogits) != 0;
  using Element = typename Config::Element;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kHeadDim = Config::kHeadDim;    // of Q, K, dQ and dK
  static constexpr int kHeadDimV = Config::kHeadDimV;  // of V, dO and dV

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

  // Words [first_word, +2) of ss.visible (the item's keys [32 first_word, +64)) for the step's
  // rows [first_row, +rows), built by the warpgroup: thread t < 2 rows computes word
  // first_word + t % 2 of row first_row + t / 2 from the pattern's intervals (all keys for a full
  // tile) cut at the key tile's width; rows past the query tile's end see none. Each warpgroup
  // reads only the words it built, so only it has to wait for them.
  __device__ void build_visibility(const BwdStep& step, int first_row, int rows,
                                   int first_word) const {
    const int t = tid % 128;
    if (t >= 2 * rows) return;
    const int r = first_row + t / 2;
    const int word = first_word + t % 2;
    const WindowColumns cols(word + item.part * (kBlockN / 32));  // of the key tile's words
    const int tile_row = step.half * kBwdStepRows + r;
    const desc::TileSpan rows_span = desc::tile_span(p.shape.q_starts, step.m);
    const desc::TileSpan keys = desc::k_tile_span(p.descriptor, item.n);
    TileMask mask = tile_mask(p.descriptor, step.pattern);
    mask.at_keys(keys.begin, cols);
    ss.visible[r][word] =
        tile_row < rows_span.size()
            ? row_visibility(p.descriptor, mask, rows_span.begin, tile_row, keys.size(), cols)
            : 0u;
  }

  // Whether the step masks this item's keys: a partial tile, or keys past the key tile's end.
  __device__ bool step_needs_mask(const BwdStep& step, int key_tile_width) const {
    return tile_needs_mask(step.pattern, key_tile_width + kBwdTile - (item.part + 1) * kBlockN);
  }

  // Bit i of the result: element i of this thread's Sᵀ fragment (a warpgroup's 64 keys x kCols
  // rows) is visible. Element (e, h, j) is item key key_base + row0 + 8h, step row
  // row_base + 8j + col0 + e, read from ss.visible.
  template <int kCols>
  __device__ uint32_t keep_bits(int row_base, int key_base) const {
    const Fragment frag(fresh_thread_index() - 128);
    uint32_t keep = 0;
    CUTE_UNROLL
    for (int j = 0; j < kCols / 8; ++j) {
      CUTE_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int key = key_base + frag.row0;
        const uint32_t word = ss.visible[row_base + 8 * j + frag.col0 + e][key / 32];
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          keep |= ((word >> ((key + 8 * h) % 32)) & 1u) << Fragment::index(e, h, j);
        }
      }
    }
    return keep;
  }

  // The step's ALiBi for this thread's fragment, whose step rows start at row_base and whose item
  // keys start at key_base; first_key is the item's first key in its sequence.
  __device__ AlibiStep alibi_step(const BwdStep& step, int row_base, int key_base,
                                  int first_key) const {
    const Fragment frag(fresh_thread_index() - 128);
    const int first_row = desc::tile_span(p.shape.q_starts, step.m).begin +
                          step.half * kBwdStepRows + row_base + frag.col0;
    const int distance = first_key + key_base + frag.row0 - (first_row + p.shape.nk - p.shape.nq);
    AlibiStep alibi;
    alibi.slope = p.alibi_slopes[step.h] * p.score_units;
    // Exact in float for distances below 2^24.
    alibi.offset[0] = static_cast<float>(distance);
    alibi.offset[1] = static_cast<float>(distance + 8);
    return alibi;
  }

  // P = exp2(Sᵀ scale_log2 - lse_log2), 0 where keep's bit is clear, and dS = P (dPᵀ - dsum),
  // in the element type, for this thread's kCols / 8 x 4 fragment elements, whose step rows
  // start at row_base (keep_bits); lse_log2 and dsum are the stage's. With kSoftcap the scores
  // are t = tanh(Sᵀ softcap_scale) (the forward's soft cap) and dS takes the cap's slope 1 - t²;
  // with kAlibi they gain the ALiBi bias (alibi_step), which adds nothing to dS's slope.
  template <int kCols, class TAcc, class TOut>
  __device__ void probabilities_and_ds(const TAcc& s, const TAcc& dp, uint32_t keep,
                                       const float* lse_log2, const float* dsum, int row_base,
                                       const AlibiStep& alibi, TOut& prob_out, TOut& ds_out) const {
    const Fragment frag(fresh_thread_index() - 128);
    CUTE_UNROLL
    for (int j = 0; j < kCols / 8; ++j) {
      CUTE_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int row = row_base + 8 * j + frag.col0 + e;
        const float lse = lse_log2[row];
        const float ds_bias = dsum[row];
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int i = Fragment::index(e, h, j);
          const float score = kSoftcap ? tanh_approx(s(i) * p.softcap_scale) : s(i);
          const float biased_score =
              kAlibi ? fmaf(-alibi.slope, fabsf(alibi.offset[h] - static_cast<float>(8 * j + e)),
                            score)
                     : score;
          float prob = exp2_approx(fmaf(biased_score, p.scale_log2, -lse));
          prob = (keep >> i) & 1u ? prob : 0.f;
          prob_out(i) = static_cast<Element>(prob);
          const float ds = prob * (dp(i) - ds_bias);
          ds_out(i) = static_cast<Element>(kSoftcap ? ds * fmaf(-score, score, 1.f) : ds);
        }
      }
    }
  }

  // Stores a (keys x kCols rows) fragment of the element type, as probabilities_and_ds lays it
  // out, to the (step row, key) tile at `tile` (ds_offset), row pairs e = 0, 1 in one 32-bit
  // store.
  template <int kCols, class TFrag>
  __device__ void store_transposed(const TFrag& x, Element* tile, int row_base,
                                   int key_base) const {
    const Fragment frag(fresh_thread_index() - 128);
    CUTE_UNROLL
    for (int j = 0; j < kCols / 8; ++j) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int key = key_base + frag.row0 + 8 * h;
        const int at = ds_offset(row_base + 8 * j + frag.col0, key);
        store_pair(tile + at, x(Fragment::index(0, h, j)), x(Fragment::index(1, h, j)));
      }
    }
  }

  // Called by every consumer thread once the previous dQ_step in this buffer may be overwritten
  // (its reduce-add has read it; thread 0 waits for that before a consumers' barrier): stores
  // this step's dQ_step fragment (element (e, h, j) is step row row0 + 8h, column
  // (D / 2) wg + 8j + col0 + e) to buffer dq_buffer in rows of dq_row_floats, leaving
  // out the columns past them (Q's zero padding, whose dQ is 0), and adds it to dq_accum
  // (deterministic mode: hands the buffer to the dQ writer, bwd_dq_writer.cuh).
  template <class TAcc>
  __device__ void add_dq_step(const TAcc& dq_step, const BwdStep& step, int dq_buffer) const {
    float* dq = ss.dq[dq_buffer];
    const int row_floats = dq_row_floats(kHeadDim, p.shape.head_dim);
    const Fragment dq_frag(fresh_thread_index() - 128);
    CUTE_UNROLL
    for (int j = 0; j < kHeadDim / 16; ++j) {
      // Chunks past the row: Q's zero padding (dq_row_floats), only above 128.
      if (Config::kSplitHeadDim && 8 * ((kHeadDim / 16) * wg() + j) >= row_floats) break;
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = dq_frag.row0 + 8 * h;
        const int chunk = (kHeadDim / 16) * wg() + j;
        const int at = r * row_floats + 8 * dq_chunk_swizzle(dq_frag.r8, chunk) + dq_frag.col0;
        *reinterpret_cast<float2*>(dq + at) =
            make_float2(dq_step(Fragment::index(0, h, j)), dq_step(Fragment::index(1, h, j)));
      }
    }
    cutlass::arch::fence_view_async_shared();  // dq is read by the copy engine
    sync_consumers();  // also: both warpgroups' dQ products are done reading dS
    if (tid != 0) return;
    if constexpr (kDeterministic) {
      arrive_barrier(ss.dq_full[dq_buffer]);
    } else {
      bulk_reduce_add(p.ws.dq_accum + dq_first_row(p, item.b, step) * row_floats, dq,
                      Config::dq_step_bytes(p.shape));
    }
  }

  // The main loop. Where the designs differ (BwdConfig): with the keys split, warpgroup wg owns
  // item keys [64 wg, +64) through every product, and P and dS enter dV and dK from registers;
  // with the head dim split, it computes Sᵀ and dPᵀ for step rows [32 wg, +32), then dV, dK and
  // dQ_step for head-dim columns [128 wg, +128), from Pᵀ and dS in shared memory.
  __device__ void run() {
    constexpr bool kSplitHeadDim = Config::kSplitHeadDim;
    constexpr int kCols = kSplitHeadDim ? kBlockM / 2 : kBlockM;  // step rows of its Sᵀ and dPᵀ
    const int row_base = kSplitHeadDim ? kCols * wg() : 0;        // its first step row there
    const int key_base = kSplitHeadDim ? 0 : 64 * wg();           // its first item key there
    // Two products each, over Q's and K's columns and over V's and dO's (BwdConfig).
    typename Config::MmaS mma_s;
    typename Config::MmadP mma_dp;
    typename Config::MmadK mma_dk;
    typename Config::MmadV mma_dv;
    typename Config::MmaQ mma_q;
    auto thr_s = mma_s.get_thread_slice(tid);
    auto thr_dp = mma_dp.get_thread_slice(tid);
    auto thr_dk = mma_dk.get_thread_slice(tid);
    auto thr_dv = mma_dv.get_thread_slice(tid);
    auto thr_q = mma_q.get_thread_slice(tid);

    Tensor sK = make_tensor(make_smem_ptr(ss.k), typename Config::LayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(ss.v), typename Config::LayoutV{});
    Tensor sKt = make_tensor(make_smem_ptr(ss.k), typename Config::LayoutKt{});
    Tensor sQ = make_tensor(make_smem_ptr(ss.q), typename Config::LayoutQ{});
    Tensor sdO = make_tensor(make_smem_ptr(ss.dout), typename Config::LayoutdO{});
    Tensor sQt = make_tensor(make_smem_ptr(ss.q), typename Config::LayoutQt{});
    Tensor sdOt = make_tensor(make_smem_ptr(ss.dout), typename Config::LayoutdOt{});
    Tensor sdS = make_tensor(make_smem_ptr(ss.ds[0]), typename Config::LayoutdS{});

    Tensor tSrK = thr_s.partition_fragment_A(sK);
    Tensor tSrV = thr_dp.partition_fragment_A(sV);
    Tensor tSrQ = thr_s.partition_fragment_B(sQ);
    Tensor tSrdO = thr_dp.partition_fragment_B(sdO);
    Tensor tKVrdOt = thr_dv.partition_fragment_B(sdOt);
    Tensor tKVrQt = thr_dk.partition_fragment_B(sQt);
    Tensor tQrdS = thr_q.partition_fragment_A(sdS);
    Tensor tQrKt = thr_q.partition_fragment_B(sKt);

    Tensor tdKrdK = partition_fragment_C(mma_dk, Shape<Int<kBlockN>, Int<kHeadDim>>{});
    Tensor tdVrdV = partition_fragment_C(mma_dv, Shape<Int<kBlockN>, Int<kHeadDimV>>{});
    clear(tdKrdK);
    clear(tdVrdV);
    const Fragment frag(tid);
    wait_barrier(ss.kv_full, 0);
    if (!kDeterministic) wait_barrier(ss.slice_zeroed, 0);  // bwd_zeroing.cuh

    PipeState<Config::kStages> st;
    PipeState<Config::kDqBuffers> dq;  // the dq buffer this step fills
    StepCursor<kDeterministic> steps(p, item, head_splits_of<kHeadSplits>(p.shape));
    BwdStep step;
    const desc::TileSpan key_tile = desc::k_tile_span(p.descriptor, item.n);
    const int key_width = key_tile.size();
    const int first_key = key_tile.begin + item.part * kBlockN;  // the item's, for ALiBi
    while (steps.next(step)) {
      wait_barrier(ss.step_full[st.stage], st.phase);
      // Sᵀ and dPᵀ: element (e, h, j) is item key key_base + row0 + 8h, step row
      // row_base + 8j + col0 + e.
      Tensor tSrS = partition_fragment_C(mma_s, Shape<Int<kBlockN>, Int<kBlockM>>{});
      Tensor tSrdP = partition_fragment_C(mma_dp, Shape<Int<kBlockN>, Int<kBlockM>>{});
      wgmma<true>(mma_s, tSrK, tSrQ(_, _, _, st.stage), tSrS);
      wgmma<true>(mma_dp, tSrV, tSrdO(_, _, _, st.stage), tSrdP);
      uint32_t keep = ~0u;
      if (step_needs_mask(step, key_width)) {
        build_visibility(step, row_base, kCols, key_base / 32);  // overlaps the two GEMMs
        sync_warpgroup();
        keep = keep_bits<kCols>(row_base, key_base);
      }
      warpgroup_wait<0>();

      Tensor tPrP = make_tensor<Element>(typename Config::LayoutPdS{});
      Tensor tdSrdS = make_tensor<Element>(typename Config::LayoutPdS{});
      const AlibiStep alibi =
          kAlibi ? alibi_step(step, row_base, key_base, first_key) : AlibiStep{};
      probabilities_and_ds<kCols>(tSrS, tSrdP, keep, ss.lse_log2[st.stage], ss.dsum[st.stage],
                                  row_base, alibi, tPrP, tdSrdS);
      if constexpr (!kSplitHeadDim) {
        // dV and dK take P and dS from registers: they run while dS goes through shared memory.
        wgmma<false>(mma_dv, tPrP, tKVrdOt(_, _, _, st.stage), tdVrdV);
        wgmma<false>(mma_dk, tdSrdS, tKVrQt(_, _, _, st.stage), tdKrdK);
        store_transposed<kCols>(tdSrdS, ss.ds[0], row_base, key_base);
      } else {
        // Both warpgroups' products of the last step are done with Pᵀ and dS (add_dq_step's
        // barrier came after their waits).
        store_transposed<kCols>(tPrP, ss.ds[1], row_base, key_base);
        store_transposed<kCols>(tdSrdS, ss.ds[0], row_base, key_base);
      }
      cutlass::arch::fence_view_async_shared();  // dS (and Pᵀ) are read by wgmma (async proxy)
      // The reduce-add that read this dQ buffer, kDqBuffers steps ago, is done reading it.
      if (tid == 0) {
        if constexpr (kDeterministic) {
          wait_barrier(ss.dq_empty[dq.stage], dq.phase ^ 1u);
        } else {
          bulk_wait_read<Config::kDqBuffers - 1>();
        }
      }
      sync_consumers();

      Tensor tQrdQ = partition_fragment_C(mma_q, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      if constexpr (!kSplitHeadDim) {
        wgmma<true>(mma_q, tQrdS, tQrKt, tQrdQ);
        warpgroup_wait<0>();
        release(ss.step_empty[st.stage]);
      } else {
        // Pᵀ and dSᵀ: the bytes of ss.ds viewed as (key, step row), K-major.
        Tensor tKVrPt = thr_dv.partition_fragment_A(
            make_tensor(make_smem_ptr(ss.ds[1]), typename Config::LayoutdSt{}));
        Tensor tKVrdSt = thr_dk.partition_fragment_A(
            make_tensor(make_smem_ptr(ss.ds[0]), typename Config::LayoutdSt{}));
        wgmma<false>(mma_dv, tKVrPt, tKVrdOt(_, _, _, st.stage), tdVrdV);
        wgmma<false>(mma_dk, tKVrdSt, tKVrQt(_, _, _, st.stage), tdKrdK);
        wgmma<true>(mma_q, tQrdS, tQrKt, tQrdQ);
        warpgroup_wait<1>();  // dV and dK: Q and dO may take the next step's rows
        release(ss.step_empty[st.stage]);
        warpgroup_wait<0>();
      }
      st.advance();
      add_dq_step(tQrdQ, step, dq.stage);
      dq.advance();
    }
    if (!kDeterministic && tid == 0) bulk_wait_all();
    // dK, dV element (e, h, j): item key key_base + row0 + 8h, column
    // (D / 2) wg + 8j + col0 + e (Dv for dV) with the head dim split, else 8j + col0 + e.
    store_dkdv(tdKrdK, tdVrdV, key_base + frag.row0,
               (kSplitHeadDim ? (kHeadDim / 2) * wg() : 0) + frag.col0,
               (kSplitHeadDim ? (kHeadDimV / 2) * wg() : 0) + frag.col0);
  }

  // Calls f(key, col, i) for each pair (i, i + 1) of an accumulator's elements: item key key,
  // columns col and col + 1, where element (e, h, j) is item key key0 + 8h, column col0 + 8j + e.
  template <class TAcc, class F>
  __device__ static void for_each_pair(const TAcc& acc, int key0, int col0, F&& f) {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      CUTE_UNROLL
      for (int j = 0; j < size(acc) / 4; ++j)
        f(key0 + 8 * h, col0 + 8 * j, Fragment::index(0, h, j));
    }
  }

  // dK (scaled) and dV of the item's keys below nk and their own columns, in the
  // element type, staged through the Q and dO rings (free once both warpgroups' last products
  // are done) so that every row goes out in 16-byte stores; with head splits, this split's
  // float32 sums instead (store_split_sums). Element (e, h, j) of the accumulators is item key
  // key0 + 8h, column col0 + 8j + e (col0_k for dK, col0_v for dV).
  template <class TdK, class TdV>
  __device__ void store_dkdv(const TdK& dk, const TdV& dv, int key0, int col0_k, int col0_v) const {
    if constexpr (kHeadSplits) {
      store_split_sums(dk, dv, key0, col0_k, col0_v);
      return;
    }
    static_assert(Config::kStages * kBlockM >= kBlockN, "the Q and dO rings hold dK and dV");
    sync_consumers();  // both warpgroups' products are done with Q and dO
    for_each_pair(dk, key0, col0_k, [&](int key, int col, int i) {
      store_pair(ss.q + staged<kHeadDim>(key, col), dk(i) * p.scale, dk(i + 1) * p.scale);
    });
    for_each_pair(dv, key0, col0_v, [&](int key, int col, int i) {
      store_pair(ss.dout + staged<kHeadDimV>(key, col), dv(i), dv(i + 1));
    });
    sync_consumers();
    const bool packed = p.shape.k_offsets != nullptr;
    const desc::TileSpan tile = desc::k_tile_span(p.descriptor, item.n);
    const int first = tile.begin + item.part * kBlockN;
    const int64_t row0 = (packed ? p.shape.k_offsets[item.b] : 0) + int64_t{first};
    const int rows = min(tile.end - first, kBlockN);
    copy_out<kHeadDim>(ss.q, p.dk, p.shape.head_dim, row0, rows);
    copy_out<kHeadDimV>(ss.dout, p.dv, p.shape.head_dim_v, row0, rows);
  }

  // Element `col` of row `row` of a staged tile of kColumns columns: chunk c of row r lies at
  // chunk c ^ (r % 8), so that a warp's pair stores (8 rows, one chunk each) fall in 8
  // different bank groups.
  template <int kColumns>
  __device__ static int staged(int row, int col) {
    return row * kColumns + 8 * ((col / 8) ^ (row % 8)) + col % 8;
  }

  // Rows [0, rows) of a staged tile of kColumns columns to `to` (dK or dV) from row row0, their
  // first `columns` columns, in 16-byte stores.
  template <int kColumns>
  __device__ void copy_out(const Element* tile, const GradientRef& to, int columns, int64_t row0,
                           int rows) const {
    constexpr int kChunks = kColumns / 8;  // 16-byte chunks per row
    const int64_t batch = p.shape.k_offsets != nullptr ? 0 : item.b;
    Element* out = static_cast<Element*>(to.data) + batch * to.stride_b + item.hk * to.stride_h;
    for (int i = fresh_thread_index() - 128; i < rows * kChunks; i += Config::kConsumerThreads) {
      const int r = i / kChunks;
      const int col = 8 * (i % kChunks);
      if (col >= columns) continue;
      *reinterpret_cast<uint4*>(out + (row0 + r) * to.stride_s + col) =
          *reinterpret_cast<const uint4*>(tile + staged<kColumns>(r, col));
    }
  }

  // This head split's dK (scaled) and dV as float32, from the accumulators straight to the
  // item's rows of ws.dkv_parts (dkv_part_row: dK's kHeadDim floats, then dV's): a warp's float2
  // stores fill whole 32-byte sectors. Rows past the key tile's end are padding, which
  // bwd_kv_postprocess does not read.
  template <class TdK, class TdV>
  __device__ void store_split_sums(const TdK& dk, const TdV& dv, int key0, int col0_k,
                                   int col0_v) const {
    constexpr int kRowFloats = kHeadDim + kHeadDimV;
    float* rows = p.ws.dkv_parts +
                  dkv_part_row<kRowFloats>(p.shape, item.split, kv_slice(p.shape, item.b, item.hk),
                                           item.n * kBwdTile + item.part * kBlockN);
    for_each_pair(dk, key0, col0_k, [&](int key, int col, int i) {
      *reinterpret_cast<float2*>(rows + key * kRowFloats + col) =
          make_float2(dk(i) * p.scale, dk(i + 1) * p.scale);
    });
    for_each_pair(dv, key0, col0_v, [&](int key, int col, int i) {
      *reinterpret_cast<float2*>(rows + key * kRowFloats + kHeadDim + col) =
          make_float2(dv(i), dv(i + 1));
    });
  }
};

}  // namespace cm::sm90
