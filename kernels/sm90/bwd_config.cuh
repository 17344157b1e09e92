// The backward main kernel's configuration: tile shapes, pipeline depth, the register split,
// wgmma atoms and the shared-memory layout. bwd_kernel.cuh describes the roles.
#pragma once

#include "bwd_launch.h"
#include "bwd_params.h"
#include "sync.cuh"
#include "tile_mask.cuh"

#include <cutlass/numeric_types.h>
#include <cute/tensor.hpp>

#include <type_traits>

namespace cm::sm90 {

using namespace cute;

// The main kernel's named barriers (bar.sync ids; 0 is __syncthreads), all in one place so
// that no two groups of threads share one.
enum BwdNamedBarrier : int {
  kBwdConsumersBarrier = 1,  // the 256 consumer threads (bwd_consumer.cuh)
  kBwdWarpgroupBarrier = 2,  // + wg, so 2 and 3: one consumer warpgroup
  kBwdZeroingBarrier = 4,    // producer warps 2-3 (bwd_zeroing.cuh)
};

// Two designs, by head dim (bwd_kernel.cuh):
//   kSplitHeadDim = false (64, 128): a CTA takes a whole 128-key tile; the consumer warpgroups
//     split the keys (64 each), and P and dS feed the dK and dV products from registers.
//   kSplitHeadDim = true (256, and 256 with 128 for V): dK and dV of 128 keys would fill the
//     register file, so a CTA takes 64 keys (half a tile); the warpgroups split the step's query
//     rows for Sᵀ and dPᵀ (32 each) and the head dims for dK, dV and dQ (half each), with Pᵀ and
//     dS through shared memory. Shared memory then holds one dQ buffer and, with V of 256, one
//     Q/dO stage.
// Q, K, dQ and dK have kHeadDim columns; V, dO and dV kHeadDimV.
template <class ElementT, int kHeadDimQK, int kHeadDimVO>
struct BwdConfig {
  using Element = ElementT;
  static constexpr int kHeadDim = kHeadDimQK;
  static constexpr int kHeadDimV = kHeadDimVO;
  static_assert(kHeadDim == kHeadDimV ? kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256
                                      : kHeadDim == 256 && kHeadDimV == 128,
                "head dims (64, 64), (128, 128), (256, 256) and (256, 128) are instantiated");
  static constexpr bool kSplitHeadDim = kHeadDim > 128;
  static constexpr int kBlockN = backward_keys_per_item(kHeadDim);  // keys per CTA
  static constexpr int kKeyParts = kBwdTile / kBlockN;              // CTAs per key tile
  static_assert(kBwdTile == kMaskTileN, "tile_mask.cuh assumes 128-column key tiles");
  static constexpr int kBlockM = kBwdStepRows;  // query rows per step
  // Q/dO pipeline depth: one stage at head dims (256, 256), two otherwise (sizes below).
  static constexpr int kStages = kSplitHeadDim && kHeadDimV == 256 ? 1 : 2;
  static constexpr int kConsumerThreads = 256;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kBoxCols = 64;  // TMA box width: 128 bytes, the swizzle span
  // setmaxnreg split of the 168 x 384 registers the launch reserves. The consumers (dK and dV,
  // 64 fp32 each per thread at head dims 128 and 256) fit in 232 without spilling (timed as
  // fast as 240 in run 101); the producer warp's step loop, which with packed inputs also zeroes
  // rows past a sequence's end (bwd_tails.cuh), spilled at 24 and needs none at 40 (at head
  // dim 256, 24 / 240 ran 1.37-1.48x slower, run 237).
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  static_assert(128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= 168 * kThreads,
                "the register split must fit what the launch reserves");

  // Sᵀ = K Qᵀ (over kColumns = kHeadDim) and dPᵀ = V dOᵀ (over kHeadDimV): keys are M; the
  // warpgroups split the keys, or the query rows.
  template <int kColumns>
  using MmaScores = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float,
                           Shape<_64, Int<kBlockM / (kSplitHeadDim ? 2 : 1)>, Int<kColumns>>>(),
      std::conditional_t<kSplitHeadDim, Layout<Shape<_1, _2, _1>>, Layout<Shape<_2, _1, _1>>>{}));
  using MmaS = MmaScores<kHeadDim>;
  using MmadP = MmaScores<kHeadDimV>;
  // dK += dSᵀ Q (kColumns = kHeadDim) and dV += Pᵀ dO (kHeadDimV), B (Q, dO) head-dim
  // contiguous (MN-major). Keys split: A from registers, each warpgroup its keys. Head dim
  // split: A (dSᵀ, Pᵀ; query rows contiguous, K-major) from shared memory, each warpgroup half
  // the columns.
  template <int kColumns>
  using MmaGradient = std::conditional_t<
      kSplitHeadDim,
      decltype(make_tiled_mma(
          GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kColumns / 2>, Int<kBlockM>>,
                               GMMA::Major::K, GMMA::Major::MN>(),
          Layout<Shape<_1, _2, _1>>{})),
      decltype(make_tiled_mma(
          GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<kColumns>, Int<kBlockM>>,
                               GMMA::Major::K, GMMA::Major::MN>(),
          Layout<Shape<_2, _1, _1>>{}))>;
  using MmadK = MmaGradient<kHeadDim>;
  using MmadV = MmaGradient<kHeadDimV>;
  // dQ_step = dS K: query rows are M; the head dim (N) is split over the two warpgroups.
  // dS is stored query-contiguous (MN-major A), K head-dim contiguous (MN-major B).
  using MmaQ = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<kHeadDim / 2>, Int<kBlockN>>,
                           GMMA::Major::MN, GMMA::Major::MN>(),
      Layout<Shape<_1, _2, _1>>{}));

  // 128-byte swizzled tiles laid out as TMA writes boxes of 64 columns: column block c of a
  // tile with R rows starts at element c * R * 64. The "t" layouts view the same bytes
  // transposed (head dim first), as the MN-major B operand.
  // K (kColumns = kHeadDim) and V (kHeadDimV); Q and dO likewise.
  template <int kColumns>
  using LayoutKeys = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                            Shape<Int<kBlockN>, Int<kColumns>>{}));
  using LayoutK = LayoutKeys<kHeadDim>;
  using LayoutV = LayoutKeys<kHeadDimV>;
  using LayoutKt = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kHeadDim>, Int<kBlockN>>{}, Step<_2, _1>{}));
  template <int kColumns>
  using LayoutRows = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                            Shape<Int<kBlockM>, Int<kColumns>, Int<kStages>>{}));
  template <int kColumns>
  using LayoutRowsT = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                             Shape<Int<kColumns>, Int<kBlockM>, Int<kStages>>{},
                                             Step<_2, _1, _3>{}));
  using LayoutQ = LayoutRows<kHeadDim>;
  using LayoutQt = LayoutRowsT<kHeadDim>;
  using LayoutdO = LayoutRows<kHeadDimV>;
  using LayoutdOt = LayoutRowsT<kHeadDimV>;
  // dS (and, head dim split, P) as (query row, key), query rows contiguous; the "t" layout
  // views the same bytes as (key, query row), the K-major A operand of MmadK and MmadV.
  using LayoutdS = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                          Shape<Int<kBlockM>, Int<kBlockN>>{}));
  using LayoutdSt = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                           Shape<Int<kBlockN>, Int<kBlockM>>{}));
  // An Sᵀ accumulator read as the register A operand of MmadK and MmadV: the accumulator's (e, h,
  // j) order, read as k-blocks of 16 columns ((e, h, j % 2), j / 2), is the wgmma A fragment order.
  using AccAsA =
      Layout<Shape<Shape<_2, _2, _2>, _1, Int<kBlockM / 16>>, Stride<Stride<_1, _2, _4>, _0, _8>>;
  // A warpgroup's P and dS in registers: the register A operand of MmadV and MmadK with the keys
  // split, else a plain fragment of its 64 keys x 32 rows that goes to shared memory.
  using LayoutPdS =
      std::conditional_t<kSplitHeadDim, Layout<Int<kBlockN * kBlockM / kConsumerThreads>>, AccAsA>;

  static constexpr uint32_t kKVBytes = kBlockN * (kHeadDim + kHeadDimV) * sizeof(Element);
  static constexpr uint32_t kStepBytes =
      kBlockM * (kHeadDim + kHeadDimV) * sizeof(Element) + 2 * kBlockM * sizeof(float);
  // Bytes of a dQ_step in rows of dq_row_floats (bwd_params.h), staged and added to dq_accum.
  __device__ static uint32_t dq_step_bytes(const BwdShape& s) {
    return kBlockM * dq_row_floats(kHeadDim, s.head_dim) * sizeof(float);
  }
  // At head dims (256, 256): K and V 32 KB each, one Q and dO stage 32 KB each, dS and P 8 KB
  // each and one 64 KB dQ buffer, 208 KB of the 227; a second stage or dQ buffer would not fit.
  // At (256, 128), V and a dO stage take 16 KB each, so two Q/dO stages fit: 225.5 KB. With one
  // stage the producer could load a step's Q and dO only once the last step's dV and dK were
  // done, hidden behind dQ_step alone.
  static constexpr int kDqBuffers = kSplitHeadDim ? 1 : 2;

  struct SharedStorage {
    alignas(1024) Element k[kBlockN * kHeadDim];
    alignas(1024) Element v[kBlockN * kHeadDimV];
    alignas(1024) Element q[kStages * kBlockM * kHeadDim];
    alignas(1024) Element dout[kStages * kBlockM * kHeadDimV];
    // dS, and with the head dim split also P: [0] dS, [1] P.
    alignas(1024) Element ds[kSplitHeadDim ? 2 : 1][kBlockM * kBlockN];
    // Two dQ_step buffers, used in turn: a step's bulk reduce-add may still read one while the
    // next step writes the other. Rows of dq_row_floats (at most kHeadDim), chunks
    // dq_chunk_swizzle'd.
    alignas(128) float dq[kDqBuffers][kBlockM * kHeadDim];
    alignas(16) float lse_log2[kStages][kBlockM];
    alignas(16) float dsum[kStages][kBlockM];
    uint32_t visible[kBlockM][kBlockN / 32];  // bit k % 32 of word k / 32: key k visible
    uint64_t kv_full;
    uint64_t slice_zeroed;  // default mode: this CTA's dq_accum rows are zero (bwd_zeroing.cuh)
    uint64_t step_full[kStages], step_empty[kStages];
    // Deterministic mode: a dq buffer filled by the consumers, and read by the dQ writer
    // (bwd_dq_writer.cuh).
    uint64_t dq_full[kDqBuffers], dq_empty[kDqBuffers];
    // Packed inputs: loads with rows past the sequence's end land here (bwd_tails.cuh).
    uint64_t kv_loaded, step_loaded[kStages];
  };
  static constexpr size_t kSmemBytes = smem_bytes<SharedStorage>();
  static_assert(kSmemBytes <= 227 * 1024, "shared memory: 227 KB a block on sm90");
  static_assert(cosize_v<LayoutK> == kBlockN * kHeadDim, "K layout is dense");
  static_assert(cosize_v<LayoutV> == kBlockN * kHeadDimV, "V layout is dense");
  static_assert(cosize_v<LayoutKt> == kBlockN * kHeadDim, "Kᵀ layout is dense");
  static_assert(cosize_v<LayoutQ> == kStages * kBlockM * kHeadDim, "Q layout is dense");
  static_assert(cosize_v<LayoutQt> == kStages * kBlockM * kHeadDim, "Qᵀ layout is dense");
  static_assert(cosize_v<LayoutdS> == kBlockM * kBlockN, "dS layout is dense");
  static_assert(cosize_v<LayoutdSt> == kBlockM * kBlockN, "dSᵀ layout is dense");
};

}  // namespace cm::sm90
