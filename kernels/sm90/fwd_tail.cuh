// The forward kernel's tail lanes (lanes 1-31 of the loader's warp, with FwdParams::zero_tail:
// packed or paged K/V). A key tile narrower than its stage masks its scores past its width, but
// P V multiplies those zero probabilities with whatever V rows the stage holds there, and
// 0 * NaN is NaN. The strided layout reads zeros past nk (TMA out of bounds); a packed layout's
// gap rows and a cache page's unused rows are read as they are, so these lanes zero them.
#pragma once

#include "fwd_config.cuh"
#include "sync.cuh"

#include <cutlass/arch/barrier.h>

namespace cm::sm90 {

inline constexpr int kTailLanes = 31;  // lanes 1-31: lane 0 is the loader

// The tail lanes take part in every V stage, in the loader's order: they wait for its load and
// release it with the consumers (v_empty counts them), so no stage is reloaded before they saw
// it (a parity wait by a bystander could not tell a load from the one two loads later). The
// loader tells them, with each V load, from which row the stage is to be zeroed (v_tail): in a
// narrow tile's first stage, which holds its last part (fwd_loader.cuh), the rows past its keys.
// They zero those and hand the tile to the mask warps (tail_full), whose mask_full then orders
// the zeros before the consumers' P V. Each lane arrives on its own: warp-level syncs and
// shuffles among lanes that diverged from the loader made ptxas spill 92 bytes in every kernel. A
// row is 128 contiguous bytes of each 64-column block (the swizzle moves 16-byte chunks within a
// row), so the rows to zero are one range per block; the proxy fence makes the zeros visible to
// wgmma and orders them before the next TMA load.
template <class Config>
__device__ void run_tail_lanes(typename Config::SharedStorage& ss, int lane) {
  constexpr int kKeys = Config::kStageKeys;
  constexpr int kRowChunks = Config::kBoxCols * sizeof(typename Config::Element) / 16;
  uint32_t tail_phase = 0;
  for (int stage = 0;; ++stage) {
    const int slot = stage % Config::kStages;
    wait_barrier(ss.v_full[slot], static_cast<uint32_t>(stage / Config::kStages) & 1u);
    const int width = ss.v_tail[slot];
    if (width == kTailEnd) return;
    if (width != kTailNone) {
      wait_barrier(ss.tail_empty, tail_phase ^ 1u);
      auto* rows =
          reinterpret_cast<uint4*>(ss.v + slot * kKeys * Config::kHeadDim) + width * kRowChunks;
      for (int c = lane - 1; c < (kKeys - width) * kRowChunks; c += kTailLanes) {
        CUTE_UNROLL
        for (int block = 0; block < Config::kHeadDim / Config::kBoxCols; ++block) {
          rows[block * kKeys * kRowChunks + c] = make_uint4(0, 0, 0, 0);
        }
      }
      cutlass::arch::fence_view_async_shared();
      arrive_barrier(ss.tail_full);
      tail_phase ^= 1u;
    }
    arrive_barrier(ss.v_empty[slot]);
  }
}

}  // namespace cm::sm90
