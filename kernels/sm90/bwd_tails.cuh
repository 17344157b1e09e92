// The backward main kernel's tail lanes (lanes 1-31 of the producer's warp, packed inputs only).
// A load of a sequence's last key tile or last query step takes rows past the sequence's end:
// with the strided layouts TMA reads them as zeros, but in a packed [T, H, D] tensor they are
// the rows between the sequences, which may hold anything. Masking makes their P and dS exactly
// 0, yet the products still multiply those zeros with the rows (dQ = dS K, dV = Pᵀ dO,
// dK = dSᵀ Q, dPᵀ = V dOᵀ), and 0 * NaN is NaN. So the tail lanes zero such rows in shared
// memory before the consumers read them: the producer lands those loads on kv_loaded or
// step_loaded instead of kv_full or step_full, and once the lanes have zeroed the rows one of
// them completes the full barrier. Every other load completes its full barrier itself, as
// without the lanes. The lanes walk the item's steps with the producer's cursor, so they need
// no messages from it.
#pragma once

#include "bwd_params.h"
#include "bwd_work.cuh"
#include "sync.cuh"

#include <compilemask/descriptor.h>

#include <cutlass/arch/barrier.h>

namespace cm::sm90 {

inline constexpr int kTailLanes = 31;  // lanes 1-31: lane 0 is the producer

// Of the `rows` rows loaded from row `first` of a sequence of `length` rows, those inside it.
__host__ __device__ inline int rows_inside(int first, int rows, int length) {
  const int inside = length - first;
  return inside < 0 ? 0 : (inside < rows ? inside : rows);
}

// The item's K and V rows inside the sequence (of Config::kBlockN).
template <class Config>
__device__ int item_keys_inside(const BwdMainParams& p, const BwdItem& item) {
  const int first = desc::k_tile_span(p.descriptor, item.n).begin + item.part * Config::kBlockN;
  return rows_inside(first, Config::kBlockN, p.shape.nk);
}

// The step's Q and dO rows inside the sequence (of kBwdStepRows).
__device__ inline int step_rows_inside(const BwdMainParams& p, const BwdStep& step) {
  const int first = desc::tile_span(p.shape.q_starts, step.m).begin + step.half * kBwdStepRows;
  return rows_inside(first, kBwdStepRows, p.shape.nq);
}

// Zeroes rows [first_row, kRows) of a kRows-row tile that TMA wrote as 64-column boxes: a row is
// 128 contiguous bytes of each box (the swizzle moves 16-byte chunks within it). Lanes 1-31
// take the 16-byte chunks in turn.
template <class Config, int kRows>
__device__ void zero_rows_from(typename Config::Element* tile, int first_row, int lane) {
  constexpr int kRowChunks = Config::kBoxCols * sizeof(typename Config::Element) / 16;
  constexpr int kBoxes = Config::kHeadDim / Config::kBoxCols;
  auto* chunks = reinterpret_cast<uint4*>(tile);
  for (int c = first_row * kRowChunks + lane - 1; c < kRows * kRowChunks; c += kTailLanes) {
    CUTE_UNROLL
    for (int box = 0; box < kBoxes; ++box) chunks[box * kRows * kRowChunks + c] = uint4{};
  }
}

// Every lane's zeros, made visible to wgmma (the async proxy), before lane 1's arrival on `full`.
__device__ inline void hand_over(uint64_t& full, int lane) {
  cutlass::arch::fence_view_async_shared();
  __syncwarp(~1u);
  if (lane == 1) arrive_barrier(full);
}

// The k-th tail load into a stage completes phase k of its step_loaded, and the next one cannot
// land before the lanes pass it (the consumers release the stage only after step_full): a parity
// bit per stage tracks it. Not inlined, so that its registers stay out of the producer's code.
template <class Config>
__device__ __noinline__ void run_tail_lanes(const BwdMainParams& p,
                                            typename Config::SharedStorage& ss, const BwdItem& item,
                                            int lane) {
  const int keys = item_keys_inside<Config>(p, item);
  if (keys < Config::kBlockN) {
    wait_barrier(ss.kv_loaded, 0);
    zero_rows_from<Config, Config::kBlockN>(ss.k, keys, lane);
    zero_rows_from<Config, Config::kBlockN>(ss.v, keys, lane);
    hand_over(ss.kv_full, lane);
  }
  PipeState<Config::kStages> st;
  uint32_t loaded_phase = 0;  // bit s: the parity of stage s's next tail load
  StepCursor steps(p, item);
  BwdStep step;
  while (steps.next(step)) {
    const int rows = step_rows_inside(p, step);
    if (rows < kBwdStepRows) {
      wait_barrier(ss.step_loaded[st.stage], (loaded_phase >> st.stage) & 1u);
      loaded_phase ^= 1u << st.stage;
      const int stage_elems = Config::kBlockM * Config::kHeadDim;
      zero_rows_from<Config, Config::kBlockM>(ss.q + st.stage * stage_elems, rows, lane);
      zero_rows_from<Config, Config::kBlockM>(ss.dout + st.stage * stage_elems, rows, lane);
      hand_over(ss.step_full[st.stage], lane);
    }
    st.advance();
  }
}

}  // namespace cm::sm90
