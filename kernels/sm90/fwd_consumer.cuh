// The forward kernel's consumer warpgroups: S = Q Kᵀ and O += P V by wgmma, the online softmax
// and masking in registers, and the epilogue that writes O and the LSE.
#pragma once

#include "fwd_config.cuh"
#include "fwd_params.h"
#include "fwd_staging.h"
#include "fwd_work.cuh"
#include "sync.cuh"
#include "thread_helpers.cuh"
#include "tile_mask.cuh"
#include "wgmma.cuh"

#include <cutlass/arch/barrier.h>
#include <cute/tensor.hpp>

namespace cm::sm90 {

using namespace cute;

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Online-softmax state of the two accumulator rows a consumer thread holds (rows r and r + 8
// of its warp's 16): the running maximum of the scores (S, or tanh(S softcap_scale) with a cap)
// and the thread's partial row sum.
struct RowState {
  float max[2] = {kNegInf, kNegInf};
  float sum[2] = {0.f, 0.f};
};

// ALiBi of the thread's two rows (FwdParams::alibi_slopes): the bias of key k in row h is
// -slope[h] |k - position[h]|, slope in the units of the scores (FwdParams::score_units) and
// position the row's index plus nk - nq.
struct AlibiRows {
  float slope[2];
  int position[2];
};

template <class Config>
struct Consumer {
  using Element = typename Config::Element;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kStageKeys = Config::kStageKeys;  // the columns of S
  static constexpr int kHeadDim = Config::kHeadDim;      // the columns of Q (and of its buffer)
  static constexpr int kHeadDimV = Config::kHeadDimV;    // the columns of O

  const FwdParams& p;
  typename Config::SharedStorage& ss;
  int tid;  // 0..255 among the consumers
  int wg;   // consumer warpgroup: query rows [64 * wg, 64 * wg + 64) of the tile
  int lane;
  int row_in_tile;  // tile-relative row of accumulator row 0; row 1 is 8 below

  __device__ Consumer(const FwdParams& params, typename Config::SharedStorage& storage, int t)
      : p(params), ss(storage), tid(t), wg(t / 128), lane(t % 32), row_in_tile(fwd_first_row(t)) {}

  // Visibility bits of the thread's two rows from the next mask slot, which then goes back to
  // the mask warps.
  __device__ void take_visibility(PipeState<Config::kMaskSlots>& slot,
                                  uint32_t (&visible)[2]) const {
    wait_barrier(ss.mask_full[slot.stage], slot.phase);
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h)
      visible[h] = ss.mask[slot.stage][row_in_tile + 8 * h].quad[lane % 4];
    arrive_barrier(ss.mask_empty[slot.stage]);  // each thread releases what it read
    slot.advance();
  }

  // Sets masked scores to -inf. tSrS is the (2, 2, kStageKeys / 8) accumulator: element
  // (e, h, j) is row h of the thread, column 8j + 2 * quad + e of the stage's keys, which are
  // columns from part * kStageKeys of the tile: bit 2j + e of the visibility shifted by
  // part * kStageKeys / 4 (tile_mask.cuh).
  template <class TS>
  __device__ static void mask_tile(TS& tSrS, const uint32_t (&visible)[2], int part) {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint32_t bits = visible[h] >> (part * kStageKeys / 4);
      CUTE_UNROLL
      for (int j = 0; j < kStageKeys / 8; ++j) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const bool keep = (bits >> (2 * j + e)) & 1u;
          tSrS(make_coord(e, h, j), 0, 0) = keep ? tSrS(make_coord(e, h, j), 0, 0) : kNegInf;
        }
      }
    }
  }

  // Finishes the scores of a stage, whose Q Kᵀ was just issued, into probabilities: a masked
  // tile's visibility is fetched under the product of its first stage (and kept in `visible` for
  // its other part), then the wait (leaving the newest kPending wgmma groups in flight), the K
  // stage's release, the soft cap and the ALiBi bias, masking and the online softmax.
  template <int kPending, class TS>
  __device__ void scores_to_probabilities(TS& tSrS, const KeyTileInfo& tile, int stage,
                                          const AlibiRows& alibi,
                                          PipeState<Config::kMaskSlots>& mask_slot,
                                          uint32_t (&visible)[2], uint64_t& k_empty,
                                          RowState& state, float (&correction)[2]) const {
    const int part = Config::kTileParts == 1 ? 0 : tile.part;
    // Read before k_empty hands the stage back to the loader, which then rewrites it.
    const int first_key = Config::kAlibi ? warp_uniform_load(ss.first_key[stage]) : 0;
    if (tile.masked && (Config::kTileParts == 1 || tile.first)) take_visibility(mask_slot, visible);
    warpgroup_wait<kPending>();
    warpgroup_fence_operand(tSrS);
    arrive_per_warp(k_empty);
    if constexpr (Config::kSoftcap) soft_cap(tSrS, p.softcap_scale);
    float row_bias[2] = {0.f, 0.f};
    if constexpr (Config::kAlibi) add_alibi(tSrS, alibi, first_key, row_bias);
    if (tile.masked) mask_tile(tSrS, visible, part);
    online_softmax(tSrS, state, correction, row_bias);
  }

  // The ALiBi rows of the thread for work item `item`; with packed heads its two rows may
  // belong to different query heads.
  __device__ AlibiRows alibi_rows(const WorkItem& item) const {
    AlibiRows rows{};
    if constexpr (Config::kAlibi) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int t = row_in_tile + 8 * h;  // row r of query head item.h + head
        const int head = t / p.rows_per_head;
        rows.slope[h] = p.alibi_slopes[item.h + head] * p.score_units;
        rows.position[h] = item.q0 + (t & (p.rows_per_head - 1)) + p.nk - p.nq;
      }
    }
    return rows;
  }

  // Adds the ALiBi bias to the scores of a stage whose first key is first_key: element (e, h, j)
  // is key first_key + 8j + 2 quad + e (mask_tile). Before masking, which then sets -inf. Where
  // the stage's keys all lie on one side of the positions of all the warp's rows (every stage
  // but those the diagonal crosses), |k - position| is linear in the key: an element gets only
  // its column's term, one FFMA instead of an FADD and an FFMA, and the rest, which depends on
  // the row and the thread's quad, goes to the softmax as row_bias[h]. Positions and keys are
  // exact in float below 2^24.
  template <class TS>
  __device__ void add_alibi(TS& tSrS, const AlibiRows& rows, int first_key,
                            float (&row_bias)[2]) const {
    const int last_key = first_key + kStageKeys - 1;
    const int lowest = min(rows.position[0], rows.position[1]);
    const int highest = max(rows.position[0], rows.position[1]);
    // 1: every key at or before every row's position; -1: at or after; 0: neither. Broadcast
    // from lane 0 so that ptxas sees the branch below as warp-uniform.
    const int side = __shfl_sync(0xffffffffu,
                                 __all_sync(0xffffffffu, last_key <= lowest)     ? 1
                                 : __all_sync(0xffffffffu, first_key >= highest) ? -1
                                                                                 : 0,
                                 0);
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const auto offset = static_cast<float>(first_key + 2 * (lane % 4) - rows.position[h]);
      if (side != 0) {
        // -slope |offset + c| = side slope (offset + c) for every column c of the stage.
        const float slope = static_cast<float>(side) * rows.slope[h];
        row_bias[h] = slope * offset;
        CUTE_UNROLL
        for (int j = 0; j < kStageKeys / 8; ++j) {
          CUTE_UNROLL
          for (int e = 0; e < 2; ++e) {
            float& s = tSrS(make_coord(e, h, j), 0, 0);
            s = fmaf(slope, static_cast<float>(8 * j + e), s);
          }
        }
      } else {
        CUTE_UNROLL
        for (int j = 0; j < kStageKeys / 8; ++j) {
          CUTE_UNROLL
          for (int e = 0; e < 2; ++e) {
            float& s = tSrS(make_coord(e, h, j), 0, 0);
            s = fmaf(-rows.slope[h], fabsf(offset + static_cast<float>(8 * j + e)), s);
          }
        }
      }
    }
  }

  // Scores S become tanh(S softcap_scale): the logits softcap * tanh, whose factor softcap is in
  // scale_log2. Before masking, whose -inf tanh would turn into -1.
  template <class TS>
  __device__ static void soft_cap(TS& tSrS, float softcap_scale) {
    CUTE_UNROLL
    for (int i = 0; i < size(tSrS); ++i) tSrS(i) = tanh_approx(tSrS(i) * softcap_scale);
  }

  // Turns scores into unnormalised probabilities in place; returns, per row, the factor that
  // rescales what O accumulated under the previous maxima. The thread's scores of row h are
  // tSrS's plus row_bias[h] (add_alibi; 0 otherwise), added here once per row, not per element.
  template <class TS>
  __device__ void online_softmax(TS& tSrS, RowState& state, float (&correction)[2],
                                 const float (&row_bias)[2]) const {
    const float scale_log2 = p.scale_log2;
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      // With a row bias the stage's maximum gets it before it meets the running one.
      float row_max = Config::kAlibi ? kNegInf : state.max[h];
      CUTE_UNROLL
      for (int j = 0; j < kStageKeys / 8; ++j) {
        row_max =
            fmaxf(row_max, fmaxf(tSrS(make_coord(0, h, j), 0, 0), tSrS(make_coord(1, h, j), 0, 0)));
      }
      // Each thread of the quad has its own row bias (its columns), so it joins before quad_max.
      if constexpr (Config::kAlibi) row_max += row_bias[h];
      row_max = quad_max(row_max);
      if constexpr (Config::kAlibi) row_max = fmaxf(state.max[h], row_max);
      // A row that has seen only masked keys keeps max -inf; subtracting 0 then keeps its
      // probabilities at exactly 0 instead of NaN from (-inf) - (-inf).
      const float max_scaled = row_max == kNegInf ? 0.f : row_max * scale_log2;
      correction[h] = exp2_approx(state.max[h] * scale_log2 - max_scaled);
      state.max[h] = row_max;
      const float exponent_offset =
          Config::kAlibi ? fmaf(row_bias[h], scale_log2, -max_scaled) : -max_scaled;
      float sum = 0.f;
      CUTE_UNROLL
      for (int j = 0; j < kStageKeys / 8; ++j) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          float& s = tSrS(make_coord(e, h, j), 0, 0);
          s = exp2_approx(fmaf(s, scale_log2, exponent_offset));
          sum += s;
        }
      }
      state.sum[h] = state.sum[h] * correction[h] + sum;
    }
  }

  template <class TO>
  __device__ static void rescale(TO& tOrO, const float (&correction)[2]) {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      CUTE_UNROLL
      for (int j = 0; j < kHeadDimV / 8; ++j) {
        tOrO(make_coord(0, h, j), 0, 0) *= correction[h];
        tOrO(make_coord(1, h, j), 0, 0) *= correction[h];
      }
    }
  }

  // P as the register A operand of P V: the accumulator's (e, h, j) order, read as k-blocks of
  // 16 columns ((e, h, j % 2), j / 2), is exactly the wgmma A fragment order.
  using PLayout = Layout<Shape<Shape<_2, _2, _2>, _1, Int<kStageKeys / 16>>,
                         Stride<Stride<_1, _2, _4>, _0, _8>>;

  template <class TS, class TP>
  __device__ static void convert(const TS& tSrS, TP& tOrP) {
    CUTE_UNROLL
    for (int i = 0; i < size(tSrS); ++i) tOrP(i) = static_cast<Element>(tSrS(i));
  }

  // The factor that normalises each of the thread's two rows of O and the row's natural-log
  // LSE: 0 and -inf for a row that saw no key. With the head's sink (FwdParams::sinks;
  // sink_log2 = its logit * log2(e), -inf for none; the same for the whole item) as one more
  // term of the row's sum, such a row gets the sink as its LSE.
  __device__ void row_totals(const RowState& state, float sink_log2, float (&inv_sum)[2],
                             float (&lse)[2]) const {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      float all = quad_sum(state.sum[h]);       // the row's sum relative to 2^top
      float top = state.max[h] * p.scale_log2;  // -inf for a row that saw no key
      float keys = 1.f;                         // the keys' weight in it
      if (sink_log2 != kNegInf) {
        const float with_sink = fmaxf(top, sink_log2);
        keys = exp2f(top - with_sink);  // 0 for a row that saw no key
        all = all * keys + exp2f(sink_log2 - with_sink);
        top = with_sink;
      }
      // all >= 1 where any term counts (the largest is 1): the fast division needs no slow path.
      const bool any = all > 0.f;
      inv_sum[h] = any ? __fdividef(keys, all) : 0.f;
      lse[h] = any ? (top + __log2f(all)) * 0.69314718055994531f : kNegInf;
    }
  }

  // The sink of query head h in log2 units; -inf without sinks.
  __device__ float sink_log2(int h) const {
    return p.sinks != nullptr ? p.sinks[h] * 1.4426950408889634f : kNegInf;
  }

  // Split keys or packed heads: writes this warpgroup's rows of the item's part, O normalised by
  // the part's own row sums and the part's LSE, float32, from the accumulator straight into the
  // workspace (fwd_workspace); fwd_combine merges the parts and writes them out. Rows past the
  // tile's end are skipped, and so is the O of a row that sees no key of the part (LSE -inf),
  // which fwd_combine never reads.
  template <class TO>
  __device__ void store_part(const TO& tOrO, const RowState& state, const WorkItem& item) const {
    float inv_sum[2], lse[2];
    row_totals(state, kNegInf, inv_sum, lse);  // the sink joins in fwd_combine
    const int fresh_tid = fresh_thread_index() - 128;
    const int quad = fresh_tid % 4;
    const int first_row = fwd_first_row(fresh_tid);
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int t = first_row + 8 * h;  // the tile row: row r of query head item.h + head
      const int r = t & (p.rows_per_head - 1);
      const int head = t / p.rows_per_head;
      if (r >= item.rows) continue;
      const int64_t row =
          ((int64_t{item.split} * p.batch + item.b) * p.heads_q + item.h + head) * p.nq + item.q0 +
          r;
      if (quad == 0) p.split_lse[row] = lse[h];
      if (lse[h] == kNegInf) continue;
      float* out = p.split_out + row * p.head_dim_v;
      CUTE_UNROLL
      for (int j = 0; j < kHeadDimV / 8; ++j) {
        if (8 * j + 2 * quad >= p.head_dim_v) break;
        *reinterpret_cast<float2*>(out + 8 * j + 2 * quad) =
            make_float2(tOrO(make_coord(0, h, j), 0, 0) * inv_sum[h],
                        tOrO(make_coord(1, h, j), 0, 0) * inv_sum[h]);
      }
    }
  }

  // Writes O (normalised) and the LSE of this warpgroup's 64 rows, staging O in `buffer` (this
  // item's Q buffer, whose products are done). Rows past the tile's end are skipped.
  template <class TO>
  __device__ void store(TO& tOrO, const RowState& state, const WorkItem& item,
                        Element* buffer) const {
    const int barrier_id = kFwdEpilogueBarrier + wg;
    float inv_sum[2], lse[2];
    row_totals(state, sink_log2(item.h), inv_sum, lse);
    const int64_t row0 = item.q_row0;
    const int64_t batch = p.q_offsets != nullptr ? 0 : item.b;
    // With one Q buffer, the previous item's copy-out below read this buffer. Its reads are
    // ordered before these writes through q_empty and q_full already (the loader refills the
    // buffer in between), but compute-sanitizer's racecheck does not follow that chain.
    if constexpr (Config::kQStages == 1) named_sync(barrier_id, 128);

    // The warpgroup's own products are done (wait<0>), and it only touches its own 64 rows.
    // The thread's addresses are recomputed here rather than kept across the mainloop.
    const int fresh_tid = fresh_thread_index() - 128;
    const int quad = fresh_tid % 4;
    const int first_row = fwd_first_row(fresh_tid);
    // fwd_staged(first_row + 8h, 8j + 2 quad): both rows have the same row % 8, so the
    // thread's kHeadDimV / 4 stores use only 8 swizzled chunk addresses, each with constant offsets
    // for h and j / 8 (fwd_staging_test checks it; computed per store, the addressing took 350
    // instructions).
    CUTE_UNROLL
    for (int chunk = 0; chunk < 8; ++chunk) {
      Element* at = buffer + fwd_staged<kBlockM>(first_row, 8 * chunk + 2 * quad);
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        CUTE_UNROLL
        for (int j = chunk; j < kHeadDimV / 8; j += 8) {
          store_pair(at + 8 * h * 64 + (j / 8) * (kBlockM * 64),
                     tOrO(make_coord(0, h, j), 0, 0) * inv_sum[h],
                     tOrO(make_coord(1, h, j), 0, 0) * inv_sum[h]);
        }
      }
    }
    named_sync(barrier_id, 128);

    // Thread t copies chunks t % kThreadChunks + kThreadChunks c of rows first + kRows * k: all
    // of them have the same row % 8, so one staged address and one global address serve every
    // k and c, with constant steps (a step of 16 chunks is two 64-column blocks).
    constexpr int kChunks = kHeadDimV / 8;                      // 16-byte chunks per row
    constexpr int kThreadChunks = kChunks < 16 ? kChunks : 16;  // chunk columns per pass
    constexpr int kChunkSteps = kChunks / kThreadChunks;
    constexpr int kRows = 128 / kThreadChunks;  // rows per pass of the warpgroup's 128 threads
    static_assert(kRows % 8 == 0, "the swizzle repeats every 8 rows");
    const int t = fresh_thread_index() % 128;
    const int first = 64 * wg + t / kThreadChunks;
    const int chunk = t % kThreadChunks;
    const Element* staged_row = buffer + fwd_staged<kBlockM>(first, 8 * chunk);
    uint4 values[64 / kRows][kChunkSteps];
    CUTE_UNROLL
    for (int k = 0; k < 64 / kRows; ++k) {
      CUTE_UNROLL
      for (int c = 0; c < kChunkSteps; ++c) {
        values[k][c] =
            *reinterpret_cast<const uint4*>(staged_row + k * kRows * 64 + c * 2 * kBlockM * 64);
      }
    }
    // The buffer goes back to TMA (async proxy) after these generic-proxy accesses. The fence
    // (a MEMBAR, then the proxy fence) waits for the thread's outstanding memory operations, so
    // it comes before the global stores.
    cutlass::arch::fence_view_async_shared();

    if (quad == 0) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        if (first_row + 8 * h < item.rows) {
          p.lse[batch * p.lse_stride_b + item.h * p.lse_stride_h + row0 + first_row + 8 * h] =
              lse[h];
        }
      }
    }
    Element* out = static_cast<Element*>(p.out) + batch * p.out_stride_b + item.h * p.out_stride_h +
                   (row0 + first) * p.out_stride_s + 8 * chunk;
    const int rows_left = item.rows - first;  // row first + kRows k: k * kRows < it
    CUTE_UNROLL
    for (int c = 0; c < kChunkSteps; ++c) {
      if (8 * (chunk + kThreadChunks * c) >= p.head_dim_v) return;
      CUTE_UNROLL
      for (int k = 0; k < 64 / kRows; ++k) {
        if (k * kRows < rows_left) {
          *reinterpret_cast<uint4*>(out + k * kRows * p.out_stride_s + 8 * kThreadChunks * c) =
              values[k][c];
        }
      }
    }
  }

  // Pingpong between the two consumer warpgroups: each issues its products only in its turn,
  // then passes the turn, so one warpgroup's softmax runs under the other's products.
  __device__ void wait_turn() const { named_sync(kFwdTurnBarrier + wg, 256); }
  __device__ void pass_turn() const { named_arrive(kFwdTurnBarrier + (1 - wg), 256); }

  __device__ void run() {
    using MmaQK = typename Config::MmaQK;
    using MmaPV = typename Config::MmaPV;
    MmaQK mma_qk;
    MmaPV mma_pv;
    auto thr_qk = mma_qk.get_thread_slice(tid);
    auto thr_pv = mma_pv.get_thread_slice(tid);
    Tensor sQ = make_tensor(make_smem_ptr(ss.q), typename Config::LayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(ss.k), typename Config::LayoutK{});
    Tensor sVt = make_tensor(make_smem_ptr(ss.v), typename Config::LayoutVt{});
    Tensor tSrQ = thr_qk.partition_fragment_A(sQ);  // (MMA, M, K, Q stage)
    Tensor tSrK = thr_qk.partition_fragment_B(sK);
    Tensor tOrVt = thr_pv.partition_fragment_B(sVt);

    PipeState<Config::kItemSlots> item_state;
    PipeState<Config::kQStages> qs;
    PipeState<Config::kStages> kv;
    PipeState<Config::kMaskSlots> mask_slot;
    if (Config::kIntraOverlap && wg == 1) pass_turn();  // warpgroup 0 takes the first turn
    for (;;) {
      const WorkItem item = take_item<Config>(ss, item_state);
      if (item.row == nullptr) return;

      Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDimV>>{});
      clear(tOrO);
      RowState state;
      const AlibiRows alibi = alibi_rows(item);
      uint32_t visible[2] = {};  // the current masked tile's rows
      wait_barrier(ss.q_full[qs.stage], qs.phase);
      if (item.has_key_tiles) {
        const auto tSrQs = tSrQ(_, _, _, qs.stage);
        if constexpr (Config::kIntraOverlap) {
          // Software pipeline: Q K_n and P_{n-1} V_{n-1} are issued together; the softmax of
          // S_n runs while P_{n-1} V_{n-1} is still on the tensor cores. The first tile (which
          // has no P V before it) is peeled so that every wgmma group has the same shape.
          Tensor tOrP = make_tensor<Element>(PLayout{});
          bool last;
          {
            Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kStageKeys>>{});
            wait_barrier(ss.k_full[kv.stage], kv.phase);
            const KeyTileInfo tile = warp_uniform_load(ss.key_tile[kv.stage]);
            last = tile.last;
            wait_turn();
            wgmma<true>(mma_qk, tSrQs, tSrK(_, _, _, kv.stage), tSrS);
            pass_turn();
            float correction[2];
            scores_to_probabilities<0>(tSrS, tile, kv.stage, alibi, mask_slot, visible,
                                       ss.k_empty[kv.stage], state, correction);
            convert(tSrS, tOrP);
          }
          PipeState<Config::kStages> prev = kv;
          kv.advance();
          while (!last) {
            Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kStageKeys>>{});
            wait_barrier(ss.k_full[kv.stage], kv.phase);
            const KeyTileInfo tile = warp_uniform_load(ss.key_tile[kv.stage]);
            last = tile.last;
            wait_barrier(ss.v_full[prev.stage], prev.phase);
            wait_turn();
            wgmma<true>(mma_qk, tSrQs, tSrK(_, _, _, kv.stage), tSrS);
            wgmma<false>(mma_pv, tOrP, tOrVt(_, _, _, prev.stage), tOrO);
            pass_turn();
            float correction[2];
            scores_to_probabilities<1>(tSrS, tile, kv.stage, alibi, mask_slot, visible,
                                       ss.k_empty[kv.stage], state, correction);
            warpgroup_wait<0>();
            warpgroup_fence_operand(tOrO);
            warpgroup_fence_operand(tOrP);
            arrive_per_warp(ss.v_empty[prev.stage]);
            rescale(tOrO, correction);
            convert(tSrS, tOrP);
            prev = kv;
            kv.advance();
          }
          wait_barrier(ss.v_full[prev.stage], prev.phase);
          wait_turn();
          wgmma<false>(mma_pv, tOrP, tOrVt(_, _, _, prev.stage), tOrO);
          pass_turn();
          warpgroup_wait<0>();
          warpgroup_fence_operand(tOrO);
          warpgroup_fence_operand(tOrP);
          arrive_per_warp(ss.v_empty[prev.stage]);
        } else {
          for (bool last = false; !last;) {
            Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kStageKeys>>{});
            wait_barrier(ss.k_full[kv.stage], kv.phase);
            const KeyTileInfo tile = warp_uniform_load(ss.key_tile[kv.stage]);
            last = tile.last;
            wgmma<true>(mma_qk, tSrQs, tSrK(_, _, _, kv.stage), tSrS);
            float correction[2];
            scores_to_probabilities<0>(tSrS, tile, kv.stage, alibi, mask_slot, visible,
                                       ss.k_empty[kv.stage], state, correction);
            rescale(tOrO, correction);
            Tensor tOrP = make_tensor<Element>(PLayout{});
            convert(tSrS, tOrP);
            wait_barrier(ss.v_full[kv.stage], kv.phase);
            wgmma<false>(mma_pv, tOrP, tOrVt(_, _, _, kv.stage), tOrO);
            warpgroup_wait<0>();
            warpgroup_fence_operand(tOrO);
            warpgroup_fence_operand(tOrP);
            arrive_per_warp(ss.v_empty[kv.stage]);
            kv.advance();
          }
        }
      }
      if (p.combine) {
        store_part(tOrO, state, item);
      } else {
        store(tOrO, state, item, ss.q + qs.stage * kBlockM * kHeadDim);
      }
      arrive_per_warp(ss.q_empty[qs.stage]);
      qs.advance();
    }
  }
};

}  // namespace cm::sm90
