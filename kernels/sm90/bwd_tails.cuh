// Rows past a sequence's end in the backward main kernel (packed inputs only). A load of a
// sequence's last key tile or last query step takes rows past its end: with the strided layouts
// TMA reads them as zeros, but in a packed [T, H, D] tensor they are the rows between the
// sequences, which may hold anything. Masking makes their P and dS exactly 0, yet the products
// still multiply those zeros with the rows (dQ = dS K, dV = Pᵀ dO, dK = dSᵀ Q, dPᵀ = V dOᵀ), and
// 0 * NaN is NaN. So the producer warp (bwd_producer.cuh) lands such a load on kv_loaded or
// step_loaded instead of the full barrier, zeroes the rows past the end in shared memory
// (zero_rows.cuh) and then completes the full barrier, on which the consumers wait.
#pragma once

#include "zero_rows.cuh"

namespace cm::sm90 {

// Of the `rows` rows loaded from row `first` of a sequence of `length` rows, those inside it.
__host__ __device__ inline int rows_inside(int first, int rows, int length) {
  const int inside = length - first;
  return inside < 0 ? 0 : (inside < rows ? inside : rows);
}

// Zeroes rows [first_row, kRows) of the kRows-row tiles `a` of kHeadDim columns and `b` of
// kHeadDimV (K and V, or a stage's Q and dO), then completes `full`.
template <class Config, int kRows>
__device__ void zero_rows_and_complete(typename Config::Element* a, typename Config::Element* b,
                                       int first_row, uint64_t& full, int lane) {
  const auto past_end = [first_row](int row) { return row >= first_row; };
  zero_rows<Config, kRows, Config::kHeadDim>(a, lane, 32, past_end);
  zero_rows<Config, kRows, Config::kHeadDimV>(b, lane, 32, past_end);
  complete_after_zeros(full, lane);
}

}  // namespace cm::sm90
