// Rows past a sequence's end in the backward main kernel (packed inputs only). A load of a
// sequence's last key tile or last query step takes rows past its end: with the strided layouts
// TMA reads them as zeros, but in a packed [T, H, D] tensor they are the rows between the
// sequences, which may hold anything. Masking makes their P and dS exactly 0, yet the products
// still multiply those zeros with the rows (dQ = dS K, dV = Pᵀ dO, dK = dSᵀ Q, dPᵀ = V dOᵀ), and
// 0 * NaN is NaN. So the producer warp (bwd_producer.cuh) lands such a load on kv_loaded or
// step_loaded instead of the full barrier, zeroes the rows past the end in shared memory and then
// completes the full barrier, on which the consumers wait.
#pragma once

#include "sync.cuh"

#include <cutlass/arch/barrier.h>

namespace cm::sm90 {

// Of the `rows` rows loaded from row `first` of a sequence of `length` rows, those inside it.
__host__ __device__ inline int rows_inside(int first, int rows, int length) {
  const int inside = length - first;
  return inside < 0 ? 0 : (inside < rows ? inside : rows);
}

// Zeroes rows [first_row, kRows) of a kRows-row tile that TMA wrote as 64-column boxes: a row is
// 128 contiguous bytes of each box (the swizzle moves 16-byte chunks within it). The warp's lanes
// take the 16-byte chunks in turn.
template <class Config, int kRows>
__device__ void zero_rows_from(typename Config::Element* tile, int first_row, int lane) {
  constexpr int kRowChunks = Config::kBoxCols * sizeof(typename Config::Element) / 16;
  constexpr int kBoxes = Config::kHeadDim / Config::kBoxCols;
  auto* chunks = reinterpret_cast<uint4*>(tile);
  for (int c = first_row * kRowChunks + lane; c < kRows * kRowChunks; c += 32) {
    CUTE_UNROLL
    for (int box = 0; box < kBoxes; ++box) chunks[box * kRows * kRowChunks + c] = uint4{};
  }
}

// Zeroes rows [first_row, kRows) of the kRows-row tiles `a` and `b` (K and V, or a stage's Q and
// dO), then completes `full`: every lane's zeros, made visible to wgmma (the async proxy), before
// lane 0's arrival.
template <class Config, int kRows>
__device__ void zero_rows_and_complete(typename Config::Element* a, typename Config::Element* b,
                                       int first_row, uint64_t& full, int lane) {
  zero_rows_from<Config, kRows>(a, first_row, lane);
  zero_rows_from<Config, kRows>(b, first_row, lane);
  cutlass::arch::fence_view_async_shared();
  __syncwarp();
  if (lane == 0) arrive_barrier(full);
}

}  // namespace cm::sm90
