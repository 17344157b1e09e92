// The sm90 (Hopper) forward attention kernel driven by a CompileMask descriptor.
//
// One persistent CTA per SM, three warpgroups:
//   WG0  producer. The loader (one thread of warp 0) pulls work items (b, h, query tile) from a
//        global counter in per-(b, h) longest-first order, decodes them and hands them on
//        through a 2-slot ring, and TMA-loads Q and the K/V tiles the descriptor lists for that
//        query tile, telling the consumers with each K/V stage whether it is masked and whether
//        it ends the item. The mask warps (warps 1-3) walk the same tiles and write the
//        visibility of every masked tile's rows into a ring of mask slots, ahead of use.
//   WG1, WG2  consumers: each owns 64 of the 128 query rows. S = Q Kᵀ by wgmma from shared
//        memory, online softmax in registers, O += P V by wgmma with P from registers. They
//        never read the descriptor: a masked tile costs one shared-memory load per row.
// Full key tiles run no mask code; partial tiles (and the key tile cut by nk) mask elements
// from per-row visibility bits (tile_mask.cuh). Rows that see no key get O = 0, LSE = -inf.
#pragma once

#include "fwd_params.h"
#include "sync.cuh"
#include "tile_mask.cuh"
#include "wgmma.cuh"

#include <compilemask/descriptor.h>

#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
#include <cute/tensor.hpp>

#include <cuda.h>

namespace cm::sm90 {

using namespace cute;

inline constexpr float kNegInf = -__builtin_huge_valf();

// A work item: query tile m of (batch b, query head h), and its row of the descriptor.
struct WorkItem {
  int b, h, m;
  int q_row0;          // the tile's first row in the sequence dimension of Q and O
  bool has_key_tiles;  // false: every row of the tile is fully masked
  const desc::TileRow* row;
};

// What the loader tells the consumers about the key tile of a K/V stage.
struct KeyTileInfo {
  bool masked;  // its visibility is in the consumers' next mask slot
  bool last;    // the last key tile of the work item
};

template <class ElementT, int kHeadDimV, bool kIntraOverlapV>
struct FwdConfig {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimV;
  // Overlap the softmax of key tile n with the P V product of tile n - 1 within a warpgroup,
  // and let the two consumer warpgroups take turns issuing products (pingpong). Faster than
  // the plain serial mainloop on every measured workload (perf-notes, v9).
  static constexpr bool kIntraOverlap = kIntraOverlapV;
  static constexpr int kBlockM = 128;  // query rows per tile (two consumer warpgroups of 64)
  static constexpr int kBlockN = 128;  // key columns per tile
  static constexpr int kStages = 2;    // K/V pipeline depth
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kMaskWarps = 3;  // warps 1-3; warp 0 holds the loader
  static constexpr int kMaskThreads = 32 * kMaskWarps;
  static constexpr int kMaskSlots = 8;  // how many masked tiles the mask warps may run ahead
  // Registers per thread: the producer warpgroup gives what the consumers' accumulators
  // need. setmaxnreg only moves the registers the launch gave (168 per thread at 384 threads);
  // asking for more blocks the consumers forever.
  static constexpr int kProducerRegs = 56;
  static constexpr int kConsumerRegs = 224;
  static_assert(kProducerRegs * 128 + kConsumerRegs * kConsumerThreads <= 168 * kThreads,
                "register file");
  static constexpr int kItemSlots = 2;
  static constexpr int kQStages = 2;  // the next item's Q loads while this one finishes
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dims 64 and 128 are instantiated");
  static_assert(kBlockN == kMaskTileN, "tile_mask.cuh assumes 128-column key tiles");

  using MmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kBlockN>, Int<kHeadDim>>>(),
      Layout<Shape<_2, _1, _1>>{}));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim>, Int<kBlockN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      Layout<Shape<_2, _1, _1>>{}));

  // 128-byte swizzled tiles, laid out exactly as TMA writes boxes of 64 columns:
  // column block c of a tile with R rows starts at element c * R * 64.
  using LayoutQ = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                         Shape<Int<kBlockM>, Int<kHeadDim>, Int<kQStages>>{}));
  using LayoutK = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                         Shape<Int<kBlockN>, Int<kHeadDim>, Int<kStages>>{}));
  // V as the (head_dim x keys) B operand of P V, head_dim contiguous (MN-major).
  using LayoutVt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kHeadDim>, Int<kBlockN>, Int<kStages>>{},
                                          Step<_2, _1, _3>{}));

  static constexpr int kBoxCols = 64;  // TMA box width: 128 bytes, the swizzle span
  static constexpr uint32_t kQBytes = kBlockM * kHeadDim * sizeof(Element);
  static constexpr uint32_t kKVBytes = kBlockN * kHeadDim * sizeof(Element);

  // A Q buffer, once its item's products are done, stages that item's O for the store.
  struct SharedStorage {
    alignas(1024) Element q[kQStages * kBlockM * kHeadDim];
    alignas(1024) Element k[kStages * kBlockN * kHeadDim];
    alignas(1024) Element v[kStages * kBlockN * kHeadDim];
    QuadBits mask[kMaskSlots][kBlockM];  // a masked tile's visibility, row by row
    uint64_t q_full[kQStages], q_empty[kQStages];
    uint64_t k_full[kStages], k_empty[kStages];
    uint64_t v_full[kStages], v_empty[kStages];
    uint64_t item_full[kItemSlots], item_empty[kItemSlots];
    uint64_t mask_full[kMaskSlots], mask_empty[kMaskSlots];
    WorkItem item[kItemSlots];  // decoded by the loader; row == nullptr ends the kernel
    KeyTileInfo key_tile[kStages];
  };
  static constexpr size_t kSmemBytes = smem_bytes<SharedStorage>();
  static_assert(cosize_v<LayoutQ> == kQStages * kBlockM * kHeadDim, "Q layout is dense");
  static_assert(cosize_v<LayoutK> == kStages * kBlockN * kHeadDim, "K layout is dense");
  static_assert(cosize_v<LayoutVt> == kStages * kBlockN * kHeadDim, "V layout is dense");
};

__device__ inline WorkItem decode_item(const FwdParams& p, int index, int block_m) {
  const int bh = index / p.num_q_tiles;
  const int rank = index - bh * p.num_q_tiles;
  const int b = bh / p.heads_q;
  const int h = bh - b * p.heads_q;
  const desc::Instance& inst = instance_for(p.descriptor, p, b, h);
  const int m = desc::at<uint16_t>(p.descriptor, inst.fwd_order_offset)[rank];
  const desc::TileRow& row = desc::q_tile(p.descriptor, inst, m);
  const int q_row0 = (p.q_offsets != nullptr ? p.q_offsets[b] : 0) + m * block_m;
  return {b, h, m, q_row0, row.full_count + row.partial_count > 0, &row};
}

// Whether key tile n with pattern `pattern` (-1: full) needs element masking: partial tiles,
// and the last key tile when nk cuts it.
__device__ inline bool tile_needs_mask(const FwdParams& p, int pattern, int n) {
  return pattern >= 0 || (p.nk % kMaskTileN != 0 && n == p.num_k_tiles - 1);
}

// Walks the key tiles of a query tile in ascending order: full runs and partial runs merged by
// position. Producer and consumers walk the same sequence, which is what keeps their pipelines
// in step. A kPatternGridSparse run may list empty tiles (descriptor version 2); they are not
// skipped but computed as fully masked tiles, which adds nothing to O or the LSE (row-major
// clear at N = 32K holds none; in 16-column strips 197 of its 4,093 listed tiles are empty).
class KeyTileCursor {
 public:
  __device__ KeyTileCursor(const void* blob, const desc::TileRow& row)
      : full_(desc::full_runs(blob, row)),
        partial_(desc::partial_runs(blob, row)),
        full_count_(row.full_count),
        partial_count_(row.partial_count) {}

  // Moves to the next tile: n is its index, pattern its pattern (-1 for a full tile).
  // Returns false after the last tile.
  __device__ bool next(int& n, int& pattern) {
    if (at_ == end_) {
      if (fi_ == full_count_ && pi_ == partial_count_) return false;
      const bool take_partial =
          fi_ == full_count_ || (pi_ < partial_count_ && partial_[pi_].first < full_[fi_].first);
      if (take_partial) {
        const desc::PartialRun run = partial_[pi_++];
        at_ = run.first;
        end_ = run.first + run.count;
        pattern_ = static_cast<int>(run.pattern);
      } else {
        const desc::FullRun run = full_[fi_++];
        at_ = run.first;
        end_ = run.first + run.count;
        pattern_ = -1;
      }
    }
    n = at_++;
    pattern = pattern_;
    return true;
  }

  // Whether the tile next() returned last was the row's last.
  __device__ bool done() const {
    return at_ == end_ && fi_ == full_count_ && pi_ == partial_count_;
  }

 private:
  const desc::FullRun* full_;
  const desc::PartialRun* partial_;
  int full_count_, partial_count_;
  int fi_ = 0, pi_ = 0;
  int at_ = 0, end_ = 0, pattern_ = -1;
};

// x, hidden from the optimiser: what is computed from it is computed where it is used, instead
// of being hoisted out of the mainloop into registers that the mainloop then spills.
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

template <class Config>
__device__ void run_loader(const FwdParams& p, typename Config::SharedStorage& ss,
                           const CUtensorMap* tma_q, const CUtensorMap* tma_k,
                           const CUtensorMap* tma_v) {
  using Element = typename Config::Element;
  constexpr int kColBlocks = Config::kHeadDim / Config::kBoxCols;
  constexpr int kTileElems = Config::kBlockN * Config::kHeadDim;
  PipeState<Config::kItemSlots> item_state;
  PipeState<Config::kQStages> qs;
  PipeState<Config::kStages> kv;
  for (;;) {
    const int index = atomicAdd(p.work_counter, 1);
    const WorkItem item = index < p.total_items ? decode_item(p, index, Config::kBlockM)
                                                : WorkItem{0, 0, 0, 0, false, nullptr};
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

    KeyTileCursor cursor(p.descriptor, *item.row);
    int n, pattern;
    while (cursor.next(n, pattern)) {
      const int row = k_row0 + n * Config::kBlockN;
      const int box_elems = Config::kBlockN * Config::kBoxCols;
      wait_barrier(ss.k_empty[kv.stage], kv.phase ^ 1u);
      ss.key_tile[kv.stage] = {tile_needs_mask(p, pattern, n), cursor.done()};
      expect_bytes(ss.k_full[kv.stage], Config::kKVBytes);  // releases key_tile with the K load
      for (int c = 0; c < kColBlocks; ++c) {
        tma_load(tma_k, ss.k_full[kv.stage], ss.k + kv.stage * kTileElems + c * box_elems,
                 c * Config::kBoxCols, row, kv_head, batch);
      }
      wait_barrier(ss.v_empty[kv.stage], kv.phase ^ 1u);
      expect_bytes(ss.v_full[kv.stage], Config::kKVBytes);
      for (int c = 0; c < kColBlocks; ++c) {
        tma_load(tma_v, ss.v_full[kv.stage], ss.v + kv.stage * kTileElems + c * box_elems,
                 c * Config::kBoxCols, row, kv_head, batch);
      }
      kv.advance();
    }
  }
}

// The next work item from the loader's ring, for a whole warp (mask warps and consumers).
template <class Config>
__device__ WorkItem take_item(typename Config::SharedStorage& ss,
                              PipeState<Config::kItemSlots>& state) {
  wait_barrier(ss.item_full[state.stage], state.phase);
  const WorkItem item = warp_uniform_load(ss.item[state.stage]);
  arrive_per_warp(ss.item_empty[state.stage]);
  state.advance();
  return item;
}

// The mask warps: for every key tile that needs masking, in the loader's order, the visibility
// of the tile's 128 rows goes into the next mask slot, each row as four words, one per quad
// thread of the accumulator. Each row's intervals are walked once here, not once per thread
// that holds a part of the row, and the consumers wait on no descriptor read.
// The 96 threads take the rows of consecutive masked tiles in turn, as one sequence: thread t
// computes rows g = t mod 96 of it, so each tile needs one or two rows of each thread, whichever
// warp gives two rotates from tile to tile, and a thread computes 4 rows per 3 tiles instead of
// 2 per tile. Mask warps run ahead of the consumers, so that is their throughput.
template <class Config>
__device__ void run_masker(const FwdParams& p, typename Config::SharedStorage& ss, int t) {
  static_assert(Config::kBlockM >= Config::kMaskThreads, "every thread has a row of every tile");
  PipeState<Config::kItemSlots> item_state;
  PipeState<Config::kMaskSlots> slot;
  int first_row = t;  // the thread's first row of the next masked tile
  for (;;) {
    const WorkItem item = take_item<Config>(ss, item_state);
    if (item.row == nullptr) return;
    if (!item.has_key_tiles) continue;

    const int q0 = item.m * Config::kBlockM;
    KeyTileCursor cursor(p.descriptor, *item.row);
    int n, pattern;
    while (cursor.next(n, pattern)) {
      if (!tile_needs_mask(p, pattern, n)) continue;
      const int k0 = n * Config::kBlockN;
      const desc::Pattern masked_by = tile_pattern(p.descriptor, pattern);
      wait_barrier(ss.mask_empty[slot.stage], slot.phase ^ 1u);
      int r = first_row;
      for (; r < Config::kBlockM; r += Config::kMaskThreads) {
        ss.mask[slot.stage][r] =
            row_visibility(p.descriptor, masked_by, q0, k0, r, p.nk - k0, QuadColumns());
      }
      first_row = r - Config::kBlockM;
      arrive_barrier(ss.mask_full[slot.stage]);  // each thread releases its own rows
      slot.advance();
    }
  }
}

// Online-softmax state of the two accumulator rows a consumer thread holds (rows r and r + 8
// of its warp's 16): the running maximum of the raw scores and the thread's partial row sum.
struct RowState {
  float max[2] = {kNegInf, kNegInf};
  float sum[2] = {0.f, 0.f};
};

template <class Config>
struct Consumer {
  using Element = typename Config::Element;
  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kHeadDim = Config::kHeadDim;
  static constexpr int kTurnBarrier = 3;  // named barriers 3, 4 (1, 2: per-warpgroup epilogue)

  const FwdParams& p;
  typename Config::SharedStorage& ss;
  int tid;  // 0..255 among the consumers
  int wg;   // consumer warpgroup: query rows [64 * wg, 64 * wg + 64) of the tile
  int lane;
  int row_in_tile;  // tile-relative row of accumulator row 0; row 1 is 8 below

  __device__ Consumer(const FwdParams& params, typename Config::SharedStorage& storage, int t)
      : p(params),
        ss(storage),
        tid(t),
        wg(t / 128),
        lane(t % 32),
        row_in_tile(64 * (t / 128) + 16 * ((t % 128) / 32) + (t % 32) / 4) {}

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

  // Sets masked scores to -inf. tSrS is the (2, 2, 16) accumulator: element (e, h, j) is row h
  // of the thread, column 8j + 2 * quad + e.
  template <class TS>
  __device__ static void mask_tile(TS& tSrS, const uint32_t (&visible)[2]) {
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      CUTE_UNROLL
      for (int j = 0; j < kBlockN / 8; ++j) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          const bool keep = (visible[h] >> (2 * j + e)) & 1u;
          tSrS(make_coord(e, h, j), 0, 0) = keep ? tSrS(make_coord(e, h, j), 0, 0) : kNegInf;
        }
      }
    }
  }

  // Finishes the scores of a key tile, whose Q Kᵀ was just issued, into probabilities: a
  // masked tile's visibility is fetched under the product, then the wait (leaving the newest
  // kPending wgmma groups in flight), the K stage's release, masking and the online softmax.
  template <int kPending, class TS>
  __device__ void scores_to_probabilities(TS& tSrS, const KeyTileInfo& tile,
                                          PipeState<Config::kMaskSlots>& mask_slot,
                                          uint64_t& k_empty, RowState& state,
                                          float (&correction)[2]) const {
    uint32_t visible[2];
    if (tile.masked) take_visibility(mask_slot, visible);
    warpgroup_wait<kPending>();
    warpgroup_fence_operand(tSrS);
    arrive_per_warp(k_empty);
    if (tile.masked) mask_tile(tSrS, visible);
    online_softmax(tSrS, state, correction);
  }

  // Turns scores into unnormalised probabilities in place; returns, per row, the factor that
  // rescales what O accumulated under the previous maxima.
  template <class TS>
  __device__ void online_softmax(TS& tSrS, RowState& state, float (&correction)[2]) const {
    const float scale_log2 = p.scale_log2;
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      float row_max = state.max[h];
      CUTE_UNROLL
      for (int j = 0; j < kBlockN / 8; ++j) {
        row_max =
            fmaxf(row_max, fmaxf(tSrS(make_coord(0, h, j), 0, 0), tSrS(make_coord(1, h, j), 0, 0)));
      }
      row_max = quad_max(row_max);
      // A row that has seen only masked keys keeps max -inf; subtracting 0 then keeps its
      // probabilities at exactly 0 instead of NaN from (-inf) - (-inf).
      const float max_scaled = row_max == kNegInf ? 0.f : row_max * scale_log2;
      correction[h] = exp2_approx(state.max[h] * scale_log2 - max_scaled);
      state.max[h] = row_max;
      float sum = 0.f;
      CUTE_UNROLL
      for (int j = 0; j < kBlockN / 8; ++j) {
        CUTE_UNROLL
        for (int e = 0; e < 2; ++e) {
          float& s = tSrS(make_coord(e, h, j), 0, 0);
          s = exp2_approx(fmaf(s, scale_log2, -max_scaled));
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
      for (int j = 0; j < kHeadDim / 8; ++j) {
        tOrO(make_coord(0, h, j), 0, 0) *= correction[h];
        tOrO(make_coord(1, h, j), 0, 0) *= correction[h];
      }
    }
  }

  // P as the register A operand of P V: the accumulator's (e, h, j) order, read as k-blocks of
  // 16 columns ((e, h, j % 2), j / 2), is exactly the wgmma A fragment order.
  using PLayout =
      Layout<Shape<Shape<_2, _2, _2>, _1, Int<kBlockN / 16>>, Stride<Stride<_1, _2, _4>, _0, _8>>;

  template <class TS, class TP>
  __device__ static void convert(const TS& tSrS, TP& tOrP) {
    CUTE_UNROLL
    for (int i = 0; i < size(tSrS); ++i) tOrP(i) = static_cast<Element>(tSrS(i));
  }

  // Element offset of (row, column) in a Q buffer reused to stage O. It keeps the Q tile's own
  // organisation (column blocks of 64 elements, each row a 128-byte line), so a warpgroup's
  // rows occupy exactly the bytes of its own Q rows: the other warpgroup may still be reading
  // its Q rows with wgmma. The 16-byte chunks are XOR-swizzled by row % 8, so both the fragment
  // writes (8 rows per warp instruction) and the 16-byte row reads are free of bank conflicts.
  __device__ static int staged(int row, int col) {
    return (col >> 6) * (kBlockM * 64) + row * 64 + (((((col & 63) >> 3) ^ (row & 7))) << 3) +
           (col & 7);
  }

  // Writes O (normalised) and the LSE of this warpgroup's 64 rows, staging O in `buffer` (this
  // item's Q buffer, whose products are done). Rows past nq are skipped.
  template <class TO>
  __device__ void store(TO& tOrO, const RowState& state, const WorkItem& item,
                        Element* buffer) const {
    const int barrier_id = 1 + wg;
    float inv_sum[2], lse[2];
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const float total = quad_sum(state.sum[h]);
      const bool any = total > 0.f;
      inv_sum[h] = any ? 1.f / total : 0.f;
      lse[h] =
          any ? (state.max[h] * p.scale_log2 + __log2f(total)) * 0.69314718055994531f : kNegInf;
    }
    const int64_t row0 = item.q_row0;
    const int64_t batch = p.q_offsets != nullptr ? 0 : item.b;

    // The warpgroup's own products are done (wait<0>), and it only touches its own 64 rows.
    // The thread's addresses are recomputed here rather than kept across the mainloop.
    const int quad = opaque(lane % 4);
    const int first_row = opaque(row_in_tile);
    CUTE_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int row = first_row + 8 * h;
      CUTE_UNROLL
      for (int j = 0; j < kHeadDim / 8; ++j) {
        using Pair = cute::array<Element, 2>;
        Pair pair;
        pair[0] = static_cast<Element>(tOrO(make_coord(0, h, j), 0, 0) * inv_sum[h]);
        pair[1] = static_cast<Element>(tOrO(make_coord(1, h, j), 0, 0) * inv_sum[h]);
        *reinterpret_cast<Pair*>(buffer + staged(row, 8 * j + 2 * quad)) = pair;
      }
    }
    if (quad == 0) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int q = item.m * kBlockM + first_row + 8 * h;
        if (q < p.nq) {
          p.lse[batch * p.lse_stride_b + item.h * p.lse_stride_h + row0 + first_row + 8 * h] =
              lse[h];
        }
      }
    }
    named_sync(barrier_id, 128);

    constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
    Element* out = static_cast<Element*>(p.out) + batch * p.out_stride_b + item.h * p.out_stride_h;
    const int t = opaque(tid % 128);
    CUTE_UNROLL
    for (int i = t; i < 64 * kChunks; i += 128) {
      const int r = 64 * wg + i / kChunks;
      const int c = i % kChunks;
      if (item.m * kBlockM + r < p.nq) {
        const uint4 value = *reinterpret_cast<const uint4*>(buffer + staged(r, 8 * c));
        *reinterpret_cast<uint4*>(out + (row0 + r) * p.out_stride_s + 8 * c) = value;
      }
    }
    // The buffer goes back to TMA (async proxy) after these generic-proxy accesses.
    cutlass::arch::fence_view_async_shared();
  }

  // Pingpong between the two consumer warpgroups: each issues its products only in its turn,
  // then passes the turn, so one warpgroup's softmax runs under the other's products.
  __device__ void wait_turn() const { named_sync(kTurnBarrier + wg, 256); }
  __device__ void pass_turn() const { named_arrive(kTurnBarrier + (1 - wg), 256); }

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

      Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDim>>{});
      clear(tOrO);
      RowState state;
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
            Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
            wait_barrier(ss.k_full[kv.stage], kv.phase);
            const KeyTileInfo tile = warp_uniform_load(ss.key_tile[kv.stage]);
            last = tile.last;
            wait_turn();
            wgmma<true>(mma_qk, tSrQs, tSrK(_, _, _, kv.stage), tSrS);
            pass_turn();
            float correction[2];
            scores_to_probabilities<0>(tSrS, tile, mask_slot, ss.k_empty[kv.stage], state,
                                       correction);
            convert(tSrS, tOrP);
          }
          PipeState<Config::kStages> prev = kv;
          kv.advance();
          while (!last) {
            Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
            wait_barrier(ss.k_full[kv.stage], kv.phase);
            const KeyTileInfo tile = warp_uniform_load(ss.key_tile[kv.stage]);
            last = tile.last;
            wait_barrier(ss.v_full[prev.stage], prev.phase);
            wait_turn();
            wgmma<true>(mma_qk, tSrQs, tSrK(_, _, _, kv.stage), tSrS);
            wgmma<false>(mma_pv, tOrP, tOrVt(_, _, _, prev.stage), tOrO);
            pass_turn();
            float correction[2];
            scores_to_probabilities<1>(tSrS, tile, mask_slot, ss.k_empty[kv.stage], state,
                                       correction);
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
            Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kBlockN>>{});
            wait_barrier(ss.k_full[kv.stage], kv.phase);
            const KeyTileInfo tile = warp_uniform_load(ss.key_tile[kv.stage]);
            last = tile.last;
            wgmma<true>(mma_qk, tSrQs, tSrK(_, _, _, kv.stage), tSrS);
            float correction[2];
            scores_to_probabilities<0>(tSrS, tile, mask_slot, ss.k_empty[kv.stage], state,
                                       correction);
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
      store(tOrO, state, item, ss.q + qs.stage * kBlockM * kHeadDim);
      arrive_per_warp(ss.q_empty[qs.stage]);
      qs.advance();
    }
  }
};

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, 1)
    fwd_kernel(const __grid_constant__ FwdParams params, const __grid_constant__ CUtensorMap tma_q,
               const __grid_constant__ CUtensorMap tma_k,
               const __grid_constant__ CUtensorMap tma_v) {
  extern __shared__ unsigned char smem_raw[];
  auto* ss = &aligned_storage<typename Config::SharedStorage>(smem_raw);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) {
    prefetch_tensor_maps(&tma_q, &tma_k, &tma_v);
    for (int s = 0; s < Config::kQStages; ++s) {
      Barrier::init(&ss->q_full[s], 1);
      Barrier::init(&ss->q_empty[s], Config::kConsumerWarps);
    }
    for (int s = 0; s < Config::kStages; ++s) {
      Barrier::init(&ss->k_full[s], 1);
      Barrier::init(&ss->v_full[s], 1);
      Barrier::init(&ss->k_empty[s], Config::kConsumerWarps);
      Barrier::init(&ss->v_empty[s], Config::kConsumerWarps);
    }
    for (int s = 0; s < Config::kItemSlots; ++s) {
      Barrier::init(&ss->item_full[s], 1);
      Barrier::init(&ss->item_empty[s], Config::kConsumerWarps + Config::kMaskWarps);
    }
    for (int s = 0; s < Config::kMaskSlots; ++s) {
      Barrier::init(&ss->mask_full[s], Config::kMaskThreads);
      Barrier::init(&ss->mask_empty[s], Config::kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warp < 4) {
    cutlass::arch::warpgroup_reg_dealloc<Config::kProducerRegs>();
    if (threadIdx.x == 0) {
      run_loader<Config>(params, *ss, &tma_q, &tma_k, &tma_v);
    } else if (warp > 0) {
      run_masker<Config>(params, *ss, static_cast<int>(threadIdx.x) - 32);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<Config::kConsumerRegs>();
    Consumer<Config>(params, *ss, static_cast<int>(threadIdx.x) - 128).run();
  }
}

}  // namespace cm::sm90
