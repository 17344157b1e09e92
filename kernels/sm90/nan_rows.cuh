// The outputs of a packed sequence whose rows do not all lie in their tensors (sequence_fits,
// problem_shape.h): NaN on its rows that do, nothing on the others. Off the hot path: only such
// a sequence's items come here.
#pragma once

#include <stdint.h>

namespace cm::sm90 {

// 0x7fff is a NaN as bfloat16 and as float16 (every exponent bit set, a nonzero fraction), and
// 0x7fff7fff is one as float32: one word serves O, dQ, dK, dV and the LSE.
inline constexpr uint32_t kNanWord = 0x7fff7fffu;

// Writes NaN over the first row_bytes bytes (a multiple of 4) of rows first + [0, rows) of a
// tensor of `total` rows, row r at base + r * row_stride bytes, where they lie in [0, total).
// The calling threads share the words: this one is `thread` of `threads`.
__device__ inline void fill_nan_rows(void* base, int64_t first, int rows, int64_t total,
                                     int64_t row_stride, int row_bytes, int thread, int threads) {
  const int words = row_bytes / 4;
  for (int i = thread; i < rows * words; i += threads) {
    const int64_t row = first + i / words;
    if (row < 0 || row >= total) continue;
    *reinterpret_cast<uint32_t*>(static_cast<char*>(base) + row * row_stride + 4 * (i % words)) =
        kNanWord;
  }
}

}  // namespace cm::sm90
