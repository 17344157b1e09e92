// The backward main kernel's producer warp: lane 0 TMA-loads the item's K and V once, then Q, dO,
// lse_log2 and dsum of every step into the consumers' ring. With packed inputs, a load that
// takes rows past the sequence's end lands on kv_loaded or step_loaded, and the whole warp zeroes
// those rows before it completes the full barrier (bwd_tails.cuh). Every lane walks the same
// steps, so the warp diverges only around lane 0's issues.
#pragma once

#include "bwd_params.h"
#include "bwd_tails.cuh"
#include "bwd_work.cuh"
#include "sync.cuh"

#include <cuda.h>

namespace cm::sm90 {

template <class Config, bool kDeterministic>
__device__ void run_bwd_producer(const BwdMainParams& p, typename Config::SharedStorage& ss,
                                 const BwdItem& item, int head_splits, const CUtensorMap* tma_q,
                                 const CUtensorMap* tma_k, const CUtensorMap* tma_v,
                                 const CUtensorMap* tma_dout, int lane) {
  constexpr int kColBlocks = Config::kHeadDim / Config::kBoxCols;    // of Q and K
  constexpr int kColBlocksV = Config::kHeadDimV / Config::kBoxCols;  // of V and dO
  constexpr int kBlockM = Config::kBlockM;
  constexpr int kBlockN = Config::kBlockN;
  const bool packed = p.shape.q_offsets != nullptr;
  const int batch = packed ? 0 : item.b;
  const int q_base = packed ? p.shape.q_offsets[item.b] : 0;
  const int first_key = desc::k_tile_span(p.descriptor, item.n).begin + item.part * kBlockN;
  const int k_row = (packed ? p.shape.k_offsets[item.b] : 0) + first_key;

  const int keys = packed ? rows_inside(first_key, kBlockN, p.shape.nk) : kBlockN;
  if (lane == 0) {
    uint64_t& landed = keys < kBlockN ? ss.kv_loaded : ss.kv_full;
    expect_bytes(landed, Config::kKVBytes);  // K and V
    for (int c = 0; c < kColBlocks; ++c) {
      tma_load(tma_k, landed, ss.k + c * kBlockN * Config::kBoxCols, c * Config::kBoxCols, k_row,
               item.hk, batch);
    }
    for (int c = 0; c < kColBlocksV; ++c) {
      tma_load(tma_v, landed, ss.v + c * kBlockN * Config::kBoxCols, c * Config::kBoxCols, k_row,
               item.hk, batch);
    }
  }
  if (keys < kBlockN) {
    wait_barrier(ss.kv_loaded, 0);
    zero_rows_and_complete<Config, kBlockN>(ss.k, ss.v, keys, ss.kv_full, lane);
  }

  PipeState<Config::kStages> st;
  // Bit s: the parity of stage s's next load that lands on step_loaded. The next such load into
  // the stage cannot be issued before this warp has completed the stage's step_full.
  uint32_t loaded_phase = 0;
  StepCursor<kDeterministic> steps(p, item, head_splits);
  BwdStep step;
  while (steps.next(step)) {
    const int row = desc::tile_span(p.shape.q_starts, step.m).begin + step.half * kBwdStepRows;
    const int padded_row = step.m * kBwdTile + step.half * kBwdStepRows;
    const int q_elems = kBlockM * Config::kHeadDim, dout_elems = kBlockM * Config::kHeadDimV;
    const int rows = packed ? rows_inside(row, kBlockM, p.shape.nq) : kBlockM;
    wait_barrier(ss.step_empty[st.stage], st.phase ^ 1u);
    uint64_t& landed = rows < kBlockM ? ss.step_loaded[st.stage] : ss.step_full[st.stage];
    if (lane == 0) {
      expect_bytes(landed, Config::kStepBytes);
      for (int c = 0; c < kColBlocks; ++c) {
        tma_load(tma_q, landed, ss.q + st.stage * q_elems + c * kBlockM * Config::kBoxCols,
                 c * Config::kBoxCols, q_base + row, step.h, batch);
      }
      for (int c = 0; c < kColBlocksV; ++c) {
        tma_load(tma_dout, landed, ss.dout + st.stage * dout_elems + c * kBlockM * Config::kBoxCols,
                 c * Config::kBoxCols, q_base + row, step.h, batch);
      }
      const int64_t ws_row =
          (int64_t{item.b} * p.shape.heads_q + step.h) * p.shape.rows_padded + padded_row;
      bulk_load(ss.lse_log2[st.stage], p.ws.lse_log2 + ws_row, kBlockM * sizeof(float), landed);
      bulk_load(ss.dsum[st.stage], p.ws.dsum + ws_row, kBlockM * sizeof(float), landed);
    }
    if (rows < kBlockM) {
      wait_barrier(landed, (loaded_phase >> st.stage) & 1u);
      loaded_phase ^= 1u << st.stage;
      zero_rows_and_complete<Config, kBlockM>(ss.q + st.stage * q_elems,
                                              ss.dout + st.stage * dout_elems, rows,
                                              ss.step_full[st.stage], lane);
    }
    st.advance();
  }
}

}  // namespace cm::sm90
