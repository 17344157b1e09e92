// The forward kernel's configuration (tile shapes, pipeline depths, register split, wgmma
// atoms, shared-memory layout) and the records its roles pass each other: work items and what
// the loader says about each key tile. fwd_kernel.cuh describes the roles.
#pragma once

#include "fwd_launch.h"
#include "logit_mods.h"
#include "sync.cuh"
#include "tile_mask.cuh"

#include <compilemask/descriptor.h>

#include <cutlass/numeric_types.h>
#include <cute/tensor.hpp>

namespace cm::sm90 {

using namespace cute;

// A work item: query tile m of (batch b, query head h), and its row of the descriptor; with
// split keys, part `split` of the row's listed key tiles.
struct WorkItem {
  int b, h, m;
  int q0, rows;        // the tile's rows [q0, q0 + rows) of the sequence (fwd_work.cuh: none)
  int q_row0;          // the tile's first row in the sequence dimension of Q and O
  bool has_key_tiles;  // false: the item has no key tile (its rows get O = 0, LSE = -inf)
  const desc::TileRow* row;
  int split;
  TileRange keys;  // the item's listed key tiles
};

// What the loader tells the consumers about the keys of a K/V stage: a key tile, or at head
// dim 256 one of its 64-key halves (FwdConfig::kStageKeys).
struct KeyTileInfo {
  bool masked;   // the tile's visibility is in the consumers' next mask slot (read at `first`)
  bool first;    // the tile's first stage
  bool last;     // the last stage of the work item
  uint8_t part;  // which kStageKeys-wide part of the key tile the stage holds
};

// What the loader tells the guard lanes of a masked tile's V stage (SharedStorage::guarded,
// fwd_guard.cuh).
struct GuardedStage {
  KeyTileInfo tile;
  int slot;  // the K/V stage slot
  bool end;  // no stage follows: the kernel ends
};

// The forward kernel's named barriers (bar.sync ids; 0 is __syncthreads), all in one place so
// that no two groups of threads share one.
enum FwdNamedBarrier : int {
  kFwdEpilogueBarrier = 1,  // + wg, so 1 and 2: one consumer warpgroup's epilogue
  kFwdTurnBarrier = 3,      // + wg, so 3 and 4: the pingpong turn of consumer warpgroup wg
};

template <class ElementT, int kHeadDimQK, int kHeadDimVO, bool kIntraOverlapV, int kLogitModsV>
struct FwdConfig {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimQK;   // the columns of Q and K
  static constexpr int kHeadDimV = kHeadDimVO;  // the columns of V and O
  // Overlap the softmax of key tile n with the P V product of tile n - 1 within a warpgroup,
  // and let the two consumer warpgroups take turns issuing products (pingpong). Faster than
  // the plain serial mainloop on every measured workload (perf-notes, v9).
  static constexpr bool kIntraOverlap = kIntraOverlapV;
  // Soft-capped and ALiBi-biased logits (FwdParams::softcap_scale, alibi_slopes): compile-time
  // choices (logit_mods.h).
  static constexpr bool kSoftcap = (kLogitModsV & kCappedLogits) != 0;
  static constexpr bool kAlibi = (kLogitModsV & kAlibiLogits) != 0;
  static constexpr int kBlockM = 128;  // query rows per tile (two consumer warpgroups of 64)
  static constexpr int kBlockN = 128;  // key columns per tile
  // Keys per K/V stage and per product: the whole tile, or at head dim 256 a 64-key part, so
  // that a warpgroup's O (128 fp32 registers per thread) leaves room for the scores.
  static constexpr int kStageKeys = forward_keys_per_stage(kHeadDimV);
  static constexpr int kTileParts = kBlockN / kStageKeys;
  static constexpr int kStages = 2;  // K/V pipeline depth
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kMaskWarps = 3;  // warps 1-3; warp 0 holds the loader
  static constexpr int kMaskThreads = 32 * kMaskWarps;
  // Registers per thread: the producer warpgroup gives what the consumers' accumulators
  // need. setmaxnreg only moves the registers the launch gave (168 per thread at 384 threads);
  // asking for more blocks the consumers forever. The consumers use about 200; at 56 the mask
  // warps spilled their state and were the limit on grid masks (perf-notes, v13), at 80 (with
  // the keys their rows see, for fwd_guard.cuh) they spilled 56 bytes at head dim 64. 88 is
  // what the consumers leave.
  static constexpr int kProducerRegs = 88;
  static constexpr int kConsumerRegs = 208;
  static_assert(kProducerRegs * 128 + kConsumerRegs * kConsumerThreads <= 168 * kThreads,
                "register file");
  static constexpr int kItemSlots = 2;
  // Shared memory (of 227 KB a block) goes to Q, K and V first. The next item's Q loads while
  // this one finishes, where two Q tiles fit beside K and V in 200 KB. At head dim 256 (and
  // 192 with 128 for V) they do not, so the next Q waits for this item's O to leave the buffer.
  static constexpr int kKVStageBytes = kStageKeys * (kHeadDim + kHeadDimV) * sizeof(Element);
  static constexpr int kQTileBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr int kQStages = 2 * kQTileBytes + kStages * kKVStageBytes <= 200 * 1024 ? 2 : 1;
  // How many masked tiles the mask warps may run ahead (each slot is 2 KB of visibility): 8,
  // or 4 where 8 would not fit beside the tiles (192 and 128: 208 KB of Q, K and V).
  static constexpr int kMaskSlots =
      kQStages * kQTileBytes + kStages * kKVStageBytes <= 200 * 1024 ? 8 : 4;
  static_assert(kHeadDim == kHeadDimV ? kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256
                                      : kHeadDim == 192 && kHeadDimV == 128,
                "head dims (64, 64), (128, 128), (256, 256) and (192, 128) are instantiated");
  static_assert(kHeadDimV <= kHeadDim, "a Q buffer stages O");
  static_assert(kBlockN == kMaskTileN, "tile_mask.cuh assumes 128-column key tiles");

  using MmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kStageKeys>, Int<kHeadDim>>>(),
      Layout<Shape<_2, _1, _1>>{}));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kHeadDimV>, Int<kStageKeys>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));

  // 128-byte swizzled tiles, laid out exactly as TMA writes boxes of 64 columns:
  // column block c of a tile with R rows starts at element c * R * 64.
  using LayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                         Shape<Int<kBlockM>, Int<kHeadDim>, Int<kQStages>>{}));
  using LayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                         Shape<Int<kStageKeys>, Int<kHeadDim>, Int<kStages>>{}));
  // V as the (head_dim_v x keys) B operand of P V, head_dim_v contiguous (MN-major).
  using LayoutVt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kHeadDimV>, Int<kStageKeys>, Int<kStages>>{},
                                          Step<_2, _1, _3>{}));

  static constexpr int kBoxCols = 64;  // TMA box width: 128 bytes, the swizzle span

  // A Q buffer, once its item's products are done, stages that item's O for the store.
  struct SharedStorage {
    alignas(1024) Element q[kQStages * kBlockM * kHeadDim];
    alignas(1024) Element k[kStages * kStageKeys * kHeadDim];
    alignas(1024) Element v[kStages * kStageKeys * kHeadDimV];
    QuadBits mask[kMaskSlots][kBlockM];   // a masked tile's visibility, row by row
    QuadBits quad_below[kMaskTileN + 1];  // the mask warps' QuadColumns table
    uint64_t q_full[kQStages], q_empty[kQStages];
    uint64_t k_full[kStages], k_empty[kStages];
    uint64_t v_full[kStages], v_empty[kStages];
    uint64_t item_full[kItemSlots], item_empty[kItemSlots];
    uint64_t mask_full[kMaskSlots], mask_empty[kMaskSlots];
    // With FwdParams::zero_unseen a masked tile's V loads land on v_loaded, and the guard lanes
    // (fwd_guard.cuh) complete v_full once the keys that no row of the tile sees are zeroed. The
    // loader tells them of such stages, in order, through a ring of their own.
    uint64_t v_loaded[kStages];
    uint64_t guard_full[kStages], guard_empty[kStages];
    GuardedStage guarded[kStages];
    QuadBits seen[kMaskSlots][kMaskWarps];  // per mask slot, the keys each mask warp's rows see
    WorkItem item[kItemSlots];              // decoded by the loader; row == nullptr ends the kernel
    KeyTileInfo key_tile[kStages];
    int32_t first_key[kStages];  // the stage's first key in its sequence, for ALiBi
  };
  static constexpr size_t kSmemBytes = smem_bytes<SharedStorage>();
  static_assert(kSmemBytes <= 227 * 1024, "shared memory: 227 KB a block on sm90");
  static_assert(cosize_v<LayoutQ> == kQStages * kBlockM * kHeadDim, "Q layout is dense");
  static_assert(cosize_v<LayoutK> == kStages * kStageKeys * kHeadDim, "K layout is dense");
  static_assert(cosize_v<LayoutVt> == kStages * kStageKeys * kHeadDimV, "V layout is dense");
};

}  // namespace cm::sm90
