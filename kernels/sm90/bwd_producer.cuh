// The backward main kernel's producer: one thread that TMA-loads the item's K and V once, then
// Q, dO, lse_log2 and dsum of every step into the consumers' ring. With packed inputs, loads
// that take rows past the sequence's end land where the tail lanes zero those rows first
// (bwd_tails.cuh).
#pragma once

#include "bwd_params.h"
#include "bwd_tails.cuh"
#include "bwd_work.cuh"
#include "sync.cuh"

#include <cuda.h>

namespace cm::sm90 {

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
  const int k_row = (packed ? p.shape.k_offsets[item.b] : 0) +
                    desc::k_tile_span(p.descriptor, item.n).begin + item.part * kBlockN;

  uint64_t& kv_landed =
      packed && item_keys_inside<Config>(p, item) < kBlockN ? ss.kv_loaded : ss.kv_full;
  expect_bytes(kv_landed, 2 * Config::kKVBytes);
  for (int c = 0; c < kColBlocks; ++c) {
    tma_load(tma_k, kv_landed, ss.k + c * kBlockN * Config::kBoxCols, c * Config::kBoxCols, k_row,
             item.hk, batch);
    tma_load(tma_v, kv_landed, ss.v + c * kBlockN * Config::kBoxCols, c * Config::kBoxCols, k_row,
             item.hk, batch);
  }

  PipeState<Config::kStages> st;
  StepCursor steps(p, item);
  BwdStep step;
  while (steps.next(step)) {
    const int row = desc::tile_span(p.shape.q_starts, step.m).begin + step.half * kBwdStepRows;
    const int padded_row = step.m * kBwdTile + step.half * kBwdStepRows;
    const int stage_elems = kBlockM * Config::kHeadDim;
    wait_barrier(ss.step_empty[st.stage], st.phase ^ 1u);
    uint64_t& full = packed && step_rows_inside(p, step) < kBlockM ? ss.step_loaded[st.stage]
                                                                   : ss.step_full[st.stage];
    expect_bytes(full, Config::kStepBytes);
    for (int c = 0; c < kColBlocks; ++c) {
      const int offset = st.stage * stage_elems + c * kBlockM * Config::kBoxCols;
      tma_load(tma_q, full, ss.q + offset, c * Config::kBoxCols, q_base + row, step.h, batch);
      tma_load(tma_dout, full, ss.dout + offset, c * Config::kBoxCols, q_base + row, step.h, batch);
    }
    const int64_t ws_row =
        (int64_t{item.b} * p.shape.heads_q + step.h) * p.shape.rows_padded + padded_row;
    bulk_load(ss.lse_log2[st.stage], p.ws.lse_log2 + ws_row, kBlockM * sizeof(float), full);
    bulk_load(ss.dsum[st.stage], p.ws.dsum + ws_row, kBlockM * sizeof(float), full);
    st.advance();
  }
}

}  // namespace cm::sm90
