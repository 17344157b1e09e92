// The forward kernel's guard lanes (lanes 1-31 of the loader's warp, with
// FwdParams::zero_unseen: packed or paged K/V). A masked key tile sets the scores of the keys a
// row does not see to -inf, but P V multiplies those zero probabilities with whatever V rows the
// stage holds, and 0 * NaN is NaN. So the V rows that no row of a masked tile sees (a narrow
// tile's rows past its keys, a shorter sequence's keys below nk, a cache page's unused slots)
// are zeroed before any consumer multiplies with them. The strided layout goes without: it
// reads zeros past nk (TMA out of bounds), its keys below nk are the caller's own tensor, and
// the guard would cost its masked tiles 1-31% (perf-notes, session 36).
#pragma once

#include "fwd_config.cuh"
#include "sync.cuh"
#include "tile_mask.cuh"
#include "zero_rows.cuh"

#include <cutlass/arch/barrier.h>

namespace cm::sm90 {

inline constexpr int kGuardLanes = 31;  // lanes 1-31: lane 0 is the loader

// Whether key column c of a tile is set in quad-ordered bits (tile_mask.cuh: column 8j + 2q + e
// is bit 2j + e of word q). The word is picked by selects: indexed, the four words would live in
// local memory.
__device__ __forceinline__ bool column_bit(const QuadBits& bits, int c) {
  const int q = (c >> 1) & 3;
  const uint32_t word =
      q < 2 ? (q == 0 ? bits.quad[0] : bits.quad[1]) : (q == 2 ? bits.quad[2] : bits.quad[3]);
  return (word >> (2 * (c >> 3) + (c & 1))) & 1u;
}

// Zeroes the rows of V stage `slot` whose keys (columns from part * kStageKeys of the tile) are
// not in `seen`, with the guard lanes (zero_rows.cuh). The proxy fence makes the zeros visible
// to wgmma and orders them before the slot's next TMA load.
template <class Config>
__device__ void zero_unseen_rows(typename Config::SharedStorage& ss, int slot, const QuadBits& seen,
                                 int part, int lane) {
  constexpr int kKeys = Config::kStageKeys;
  const int shift = part * kKeys / 4;  // the part's bits in each quad word
  const uint32_t part_bits = low_bits(kKeys / 4) << shift;
  if ((seen.quad[0] & seen.quad[1] & seen.quad[2] & seen.quad[3] & part_bits) == part_bits) return;
  zero_rows<Config, kKeys, Config::kHeadDimV>(
      ss.v + slot * kKeys * Config::kHeadDimV, lane - 1, kGuardLanes,
      [&](int row) { return !column_bit(seen, part * kKeys + row); });
  cutlass::arch::fence_view_async_shared();
}

// The guard lanes take the V stages of masked tiles from the loader's ring
// (SharedStorage::guarded), in order: such a load lands on v_loaded, and once the lanes have zeroed
// the stage's unseen rows one of them completes v_full, on which the consumers wait (the other
// stages' loads complete it themselves). A masked tile's first stage also takes the tile's mask
// slot, as the consumers do, for the keys its rows see (the mask warps' unions); the lanes release
// it with the consumers (mask_empty counts them), so the mask warps never refill it under them. The
// k-th guarded load into a slot completes phase k of its v_loaded, and no later one can land before
// the lanes pass it (the consumers release the slot only after v_full): a parity bit per slot
// tracks it. Not inlined: inlined, its loops made ptxas spill 84 bytes in the mask warps' code.
// The backward's structure (the whole producer warp waits for the load and zeroes it) measured
// slower here: packed doc_causal and hstu +2.5-3.4%, and strided clear +2% (perf-notes, session
// 39).
template <class Config>
__device__ __noinline__ void run_guard_lanes(typename Config::SharedStorage& ss, int lane) {
  PipeState<Config::kStages> ring;
  PipeState<Config::kMaskSlots> mask_slot;
  uint32_t loaded_phase = 0;  // bit s: the parity of slot s's next guarded load
  QuadBits seen{};            // the keys some row of the current masked tile sees
  for (;;) {
    wait_barrier(ss.guard_full[ring.stage], ring.phase);
    const GuardedStage stage = ss.guarded[ring.stage];
    arrive_barrier(ss.guard_empty[ring.stage]);
    ring.advance();
    if (stage.end) return;
    if (stage.tile.first) {
      wait_barrier(ss.mask_full[mask_slot.stage], mask_slot.phase);
      seen = ss.seen[mask_slot.stage][0];
      CUTE_UNROLL
      for (int w = 1; w < Config::kMaskWarps; ++w) seen |= ss.seen[mask_slot.stage][w];
      arrive_barrier(ss.mask_empty[mask_slot.stage]);
      mask_slot.advance();
    }
    wait_barrier(ss.v_loaded[stage.slot], (loaded_phase >> stage.slot) & 1u);
    loaded_phase ^= 1u << stage.slot;
    zero_unseen_rows<Config>(ss, stage.slot, seen, Config::kTileParts == 1 ? 0 : stage.tile.part,
                             lane);
    // Every lane's zeros (and its proxy fence) before the one arrival.
    __syncwarp(~1u);
    if (lane == 1) arrive_barrier(ss.v_full[stage.slot]);
  }
}

}  // namespace cm::sm90
