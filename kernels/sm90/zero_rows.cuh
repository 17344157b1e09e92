// Zeroing rows of a tile that TMA wrote to shared memory, before wgmma reads it. Both kernels
// multiply probabilities or gradients that masking made exactly 0 with rows that packed or paged
// inputs leave undefined (NaN included), and 0 * NaN is NaN: the forward zeroes the V rows that
// no row of a masked tile sees (fwd_guard.cuh), the backward the rows a load takes past a
// sequence's end (bwd_tails.cuh).
#pragma once

#include "sync.cuh"

#include <cutlass/arch/barrier.h>

namespace cm::sm90 {

// Zeroes the rows r of a kRows x kColumns tile for which zero_row(r) holds, with `lanes` lanes of a
// warp, this one being lane `lane_index` of them. TMA wrote the tile as 64-column boxes, one
// after another: a row is 128 contiguous bytes of each box (the swizzle moves 16-byte chunks
// within a row). The lanes take the rows' 16-byte chunks in turn.
template <class Config, int kRows, int kColumns, class ZeroRow>
__device__ void zero_rows(typename Config::Element* tile, int lane_index, int lanes,
                          ZeroRow zero_row) {
  constexpr int kRowChunks = Config::kBoxCols * sizeof(typename Config::Element) / 16;
  constexpr int kBoxes = kColumns / Config::kBoxCols;
  auto* chunks = reinterpret_cast<uint4*>(tile);
  for (int c = lane_index; c < kRows * kRowChunks; c += lanes) {
    if (!zero_row(c / kRowChunks)) continue;
    CUTE_UNROLL
    for (int box = 0; box < kBoxes; ++box) chunks[box * kRows * kRowChunks + c] = uint4{};
  }
}

// Completes `full` once every lane's zeros are visible to wgmma (the async proxy); the fence
// also orders them before the next TMA load into the same buffer.
__device__ __forceinline__ void complete_after_zeros(uint64_t& full, int lane) {
  cutlass::arch::fence_view_async_shared();
  __syncwarp();
  if (lane == 0) arrive_barrier(full);
}

}  // namespace cm::sm90
