// The forward kernel's loader: one thread that takes work items from the global counter and
// TMA-loads each item's Q (with packed heads, a box of rows_per_head rows by heads_per_item
// heads: the tile's rows in order) and the K/V tiles its descriptor row lists (at head dim 256
// each tile in two 64-key stages).
#pragma once

#include "fwd_config.cuh"
#include "fwd_params.h"
#include "fwd_work.cuh"
#include "sync.cuh"

#include <cuda.h>

namespace cm::sm90 {

template <class Config>
__device__ void run_loader(const FwdParams& p, typename Config::SharedStorage& ss,
                           const CUtensorMap* tma_q, const CUtensorMap* tma_k,
                           const CUtensorMap* tma_v) {
  using Element = typename Config::Element;
  constexpr int kColBlocks = Config::kHeadDim / Config::kBoxCols;
  constexpr int kStageElems = Config::kStageKeys * Config::kHeadDim;
  constexpr int kBoxElems = Config::kStageKeys * Config::kBoxCols;
  PipeState<Config::kItemSlots> item_state;
  PipeState<Config::kQStages> qs;
  PipeState<Config::kStages> kv;
  for (;;) {
    const int index = atomicAdd(p.work_counter, 1);
    const WorkItem item =
        index < p.total_items ? decode_item(p, index) : WorkItem{};  // row null: the end
    wait_barrier(ss.item_empty[item_state.stage], item_state.phase ^ 1u);
    ss.item[item_state.stage] = item;
    arrive_barrier(ss.item_full[item_state.stage]);
    item_state.advance();
    if (item.row == nullptr) return;

    // Every item takes a Q buffer, which later stages its output; an item without key tiles
    // needs no Q, so its buffer is handed over at once.
    wait_barrier(ss.q_empty[qs.stage], qs.phase ^ 1u);
    if (!item.has_key_tiles) {
      arrive_barrier(ss.q_full[qs.stage]);
      qs.advance();
      continue;
    }
    const int kv_head = item.h / (p.heads_q / p.heads_kv);
    const bool packed = p.q_offsets != nullptr;
    const int k_row0 = packed ? p.k_offsets[item.b] : 0;
    const int batch = packed ? 0 : item.b;

    expect_bytes(ss.q_full[qs.stage], Config::kQBytes);
    Element* q_buffer = ss.q + qs.stage * Config::kBlockM * Config::kHeadDim;
    for (int c = 0; c < kColBlocks; ++c) {
      tma_load(tma_q, ss.q_full[qs.stage], q_buffer + c * Config::kBlockM * Config::kBoxCols,
               c * Config::kBoxCols, item.q_row0, item.h, batch);
    }
    qs.advance();

    KeyTileCursor cursor(p.descriptor, item);
    int n, pattern;
    while (cursor.next(n, pattern)) {
      const desc::TileSpan keys = key_tile(p, n);
      const bool masked = tile_needs_mask(pattern, keys.size());
      // A tile narrower than 128 keys (cut by nk or a restart) loads only the parts it has.
      constexpr int kKeys = Config::kStageKeys;
      const int parts =
          Config::kTileParts == 1 ? 1 : min(Config::kTileParts, (keys.size() + kKeys - 1) / kKeys);
      for (int part = 0; part < parts; ++part) {
        const int row = k_row0 + keys.begin + part * Config::kStageKeys;
        wait_barrier(ss.k_empty[kv.stage], kv.phase ^ 1u);
        ss.key_tile[kv.stage] = {masked, cursor.done() && part + 1 == parts,
                                 static_cast<uint8_t>(part)};
        expect_bytes(ss.k_full[kv.stage], Config::kKVBytes);  // releases key_tile with the K load
        for (int c = 0; c < kColBlocks; ++c) {
          tma_load(tma_k, ss.k_full[kv.stage], ss.k + kv.stage * kStageElems + c * kBoxElems,
                   c * Config::kBoxCols, row, kv_head, batch);
        }
        wait_barrier(ss.v_empty[kv.stage], kv.phase ^ 1u);
        expect_bytes(ss.v_full[kv.stage], Config::kKVBytes);
        for (int c = 0; c < kColBlocks; ++c) {
          tma_load(tma_v, ss.v_full[kv.stage], ss.v + kv.stage * kStageElems + c * kBoxElems,
                   c * Config::kBoxCols, row, kv_head, batch);
        }
        kv.advance();
      }
    }
  }
}

}  // namespace cm::sm90
