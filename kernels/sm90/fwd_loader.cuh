// The forward kernel's loader: one thread that takes work items from the global counter and
// TMA-loads each item's Q (with packed heads, a box of rows_per_head rows by heads_per_item
// heads: the tile's rows in order) and the K/V tiles its descriptor row lists (at head dim 256
// each tile in two 64-key stages; with pages smaller than a stage, one box per page).
#pragma once

#include "fwd_config.cuh"
#include "fwd_paging.h"
#include "fwd_params.h"
#include "fwd_work.cuh"
#include "sync.cuh"

#include <cuda.h>

namespace cm::sm90 {

// TMA-loads a K or V stage of kColumns columns from its boxes (fwd_paging.h): box i fills the
// stage's rows from i * box_rows, in every 64-column block.
template <class Config, int kColumns, class Element, int kMaxBoxes>
__device__ void load_stage(const CUtensorMap* map, uint64_t& full, Element* stage,
                           const KeyBox (&box)[kMaxBoxes], int boxes, int box_rows, int kv_head) {
  constexpr int kColBlocks = kColumns / Config::kBoxCols;
  CUTE_UNROLL
  for (int i = 0; i < kMaxBoxes; ++i) {
    if (i == boxes) return;
    CUTE_UNROLL
    for (int c = 0; c < kColBlocks; ++c) {
      tma_load(map, full, stage + (c * Config::kStageKeys + i * box_rows) * Config::kBoxCols,
               c * Config::kBoxCols, box[i].row, kv_head, box[i].batch);
    }
  }
}

// The work item a CTA takes after its first, which is its block index: one from the counter,
// past the first gridDim.x items; the end (total_items) without touching the counter when the
// CTAs hold every item. So no CTA waits on an atomic before its first loads, and a launch with
// no more items than CTAs (decoding) leaves the counter unread: launch.cu zeroes it only for
// launches that read it.
__device__ __forceinline__ int next_item_index(const FwdParams& p) {
  const int ctas = static_cast<int>(gridDim.x);
  return p.total_items <= ctas ? p.total_items : ctas + atomicAdd(p.work_counter, 1);
}

template <class Config>
__device__ void run_loader(const FwdParams& p, typename Config::SharedStorage& ss,
                           const CUtensorMap* tma_q, const CUtensorMap* tma_k,
                           const CUtensorMap* tma_v) {
  using Element = typename Config::Element;
  constexpr int kColBlocks = Config::kHeadDim / Config::kBoxCols;  // of Q
  constexpr int kKeys = Config::kStageKeys;
  constexpr int kKElems = kKeys * Config::kHeadDim, kVElems = kKeys * Config::kHeadDimV;
  // Paged with pages smaller than a stage: one box per page (fwd_paging.h); else one box.
  const bool paged = p.page_table != nullptr;
  const PagedBoxes paged_boxes(paged ? p.page_size : 0, kKeys);
  const int box_rows = paged_boxes.rows();
  PipeState<Config::kItemSlots> item_state;
  PipeState<Config::kQStages> qs;
  PipeState<Config::kStages> kv;
  PipeState<Config::kStages> guard;  // the guard lanes' ring (zero_unseen)
  for (int index = static_cast<int>(blockIdx.x);; index = next_item_index(p)) {
    const WorkItem item =
        index < p.total_items ? decode_item(p, index) : WorkItem{};  // row null: the end
    wait_barrier(ss.item_empty[item_state.stage], item_state.phase ^ 1u);
    ss.item[item_state.stage] = item;
    arrive_barrier(ss.item_full[item_state.stage]);
    item_state.advance();
    if (item.row == nullptr) {
      if (p.zero_unseen) {  // the end, for the guard lanes
        wait_barrier(ss.guard_empty[guard.stage], guard.phase ^ 1u);
        ss.guarded[guard.stage] = {{}, 0, true};
        arrive_barrier(ss.guard_full[guard.stage]);
      }
      return;
    }

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
    const int32_t* page_row = paged ? p.page_table + item.b * p.page_table_stride : nullptr;

    expect_bytes(ss.q_full[qs.stage], Config::kQTileBytes);
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
      const int parts = stage_parts<Config>(keys.size());
      for (int part = 0; part < parts; ++part) {
        const int first_key = keys.begin + part * kKeys;
        // Strided or packed K/V take one box from the row, without the page arithmetic (which
        // cost the short-row workloads 3-4%, runs 199-200).
        constexpr int kMaxBoxes = kKeys / kMinPageSize;
        KeyBox box[kMaxBoxes];
        box[0] = {k_row0 + first_key, batch};
        const int boxes = paged ? paged_boxes.stage(page_row, p.nk, first_key, box) : 1;
        const uint32_t row_bytes = boxes * box_rows * static_cast<uint32_t>(sizeof(Element));
        wait_barrier(ss.k_empty[kv.stage], kv.phase ^ 1u);
        const KeyTileInfo tile{masked, part == 0, cursor.done() && part + 1 == parts,
                               static_cast<uint8_t>(part)};
        ss.key_tile[kv.stage] = tile;
        if constexpr (Config::kAlibi) ss.first_key[kv.stage] = first_key;
        // releases key_tile with the K load
        expect_bytes(ss.k_full[kv.stage], row_bytes * Config::kHeadDim);
        load_stage<Config, Config::kHeadDim>(tma_k, ss.k_full[kv.stage], ss.k + kv.stage * kKElems,
                                             box, boxes, box_rows, kv_head);
        wait_barrier(ss.v_empty[kv.stage], kv.phase ^ 1u);
        // A masked tile's V goes to the guard lanes first (fwd_guard.cuh), the others straight
        // to the consumers.
        const bool guarded = p.zero_unseen && masked;
        if (guarded) {
          wait_barrier(ss.guard_empty[guard.stage], guard.phase ^ 1u);
          ss.guarded[guard.stage] = {tile, kv.stage, false};
          arrive_barrier(ss.guard_full[guard.stage]);
          guard.advance();
        }
        uint64_t& v_landing = guarded ? ss.v_loaded[kv.stage] : ss.v_full[kv.stage];
        expect_bytes(v_landing, row_bytes * Config::kHeadDimV);
        load_stage<Config, Config::kHeadDimV>(tma_v, v_landing, ss.v + kv.stage * kVElems, box,
                                              boxes, box_rows, kv_head);
        kv.advance();
      }
    }
  }
}

}  // namespace cm::sm90
